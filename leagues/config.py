"""League configuration: frozen dataclasses read from one TOML file.

    [league]                           # LeagueConfig: populations, market, generations
    name = "tiny-demo"
    preset = "in-distribution"
    generations = 2
    seed = 0
    sellers = ["scripted:satisficer", "scripted:prober"]
    buyers = ["scripted:time", "scripted:tit-for-tat"]

    [league.learner]                   # LearnerConfig: who learns, against whom, how long
    model = "tiny"                     # a local causal-LM folder, or "tiny" (see below)
    side = "seller"                    # seller | buyer | both | self-play
    steps_per_generation = 4
    opponents = "pfsp"                 # uniform | latest | pfsp | nash
    eval_episodes = 64

    [league.learner.train]             # TrainConfig (leagues.train_config): trl.GRPOConfig
    num_generations = 4                # fields by TRL's names, and the league's own settings
    gradient_accumulation_steps = 2    # 8 x 2 = 16 episodes (4 scenarios) per step

    [league.market]                    # optional: fields of the preset to override
    total_turns = 6

Every table refuses unknown keys with a message naming them. Relative paths: ``catalog`` and
``folder`` are read from the TOML file's folder. ``model`` is special: an absolute path must be a
model folder; a relative path naming a model folder next to the TOML file is used as is; ``"tiny"``
or any other relative path means "the project's tiny test model at that path inside the league
folder, built there if absent" (:mod:`leagues.models`), so an example league runs on a fresh
clone.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents import check_spec
from agents.prompts import PROMPT_STYLES
from agents.steering import STEERS
from arena.catalog import SPLITS
from arena.config import MarketConfig
from arena.seats import ROLES
from arena.settings import about as _help
from arena.settings import check_positive_int as _positive_int
from arena.settings import from_mapping, to_json
from leagues.sampling import META_SOLVERS
from leagues.tiny import TinyConfig
from leagues.train_config import TrainConfig
from tournaments.config import market_config, read_toml_table
from tournaments.runner import EXECUTORS

SIDES = ("seller", "buyer", "both", "self-play")
LR_SCHEDULES = ("constant", "linear")
"""Values of ``learner.lr_schedule``: the learning rate across generations."""
PLACEMENT = ("executor", "ray_address", "workers")
"""Where a league's evaluation runs: changes no result, so it may change when a league resumes."""
TINY = "tiny"
"""``model = "tiny"``: build the project's tiny random chat model into the league folder."""


WARM_START_TALK = ("scripted", "short")
BUYER_SEATS = ("first", "all")
"""Values of ``learner.buyer_seats``: where a training buyer sits among several buyers."""
BUYER_CREDIT = ("seat", "side")
"""Values of ``learner.buyer_credit``: whose reward a buyer seat's group is scored by."""
SIDE_TRAIN_KEYS = (
    "learning_rate", "temperature", "top_p", "top_k", "beta", "epsilon", "epsilon_high",
    "loss_type", "scale_rewards", "max_grad_norm", "weight_decay", "warmup_steps",
    "warmup_ratio", "lr_scheduler_type",
)  # fmt: skip
"""``learner.side_train`` keys: TRL's optimisation and sampling settings; the batch shape,
completion length, sampler and adapter stay the league's."""
SIDE_STEPS = "steps_per_generation"
"""The one league setting ``learner.side_train`` also takes: a side's optimizer steps per
generation (RLlib's per-module overrides include how much each module trains)."""


@dataclass(frozen=True)
class LearnerConfig:
    """The learning agent of a league: its base model, side, opponents and schedule."""

    model: str = field(metadata=_help("Local causal-LM folder with a chat template, or 'tiny'."))
    side: str = field(
        default="seller",
        metadata=_help(
            "seller, buyer, both (alternate generations: seller, buyer, ...) or self-play (one "
            "model plays every seat, seller and buyer streams trained with separate baselines)."
        ),
    )
    steps_per_generation: int = field(
        default=4, metadata=_help("Optimizer steps (rollout batches) per generation.")
    )
    buyer_seats: str = field(
        default="first",
        metadata=_help(
            "The buyer seats a training buyer plays in a market of several buyers: first (buyer "
            "slot 1; the others are drawn from the initial buyers) or all (every buyer seat, as "
            "a buyer checkpoint is evaluated; one GRPO group per seat and scenario, the seats "
            "sharing episodes: each seat is compared only with itself, so a seat the seller "
            "courted is not averaged with one it ignored)."
        ),
    )
    buyer_credit: str = field(
        default="seat",
        metadata=_help(
            "The reward a training buyer's group is scored by: seat (the seat's own; the "
            "buyers compete) or side (the mean over every buyer seat, the learner's and the "
            "others', as a buyer checkpoint in every seat is rated: the buyers are credited as "
            "one team)."
        ),
    )
    lr_schedule: str = field(
        default="constant",
        metadata=_help(
            "The learning rate across generations: constant (every generation trains at "
            "train.learning_rate), or linear (generation g of G at learning_rate * (G - g + 1) / "
            "G: full in the first, a third in the last of three; each generation's optimizer "
            "starts afresh, so late generations refine instead of moving as far again)."
        ),
    )
    opponents: str = field(
        default="pfsp", metadata=_help("Opponent sampling: uniform, latest, pfsp or nash.")
    )
    eval_episodes: int = field(
        default=64, metadata=_help("Evaluation episodes per (checkpoint, opponent) pairing.")
    )
    prompt: str = field(
        default="full",
        metadata=_help(
            "The learner's prompt style, in training and evaluation: full (the paper's prompts) "
            "or compact (the same protocol in few tokens, for small models)."
        ),
    )
    steer: str = field(
        default="none",
        metadata=_help(
            "Steered decoding of the learner, in training and evaluation: none; deal (a "
            "seller's [DEAL] is written at the standing bid it takes); legal (deal, and a "
            "target drawn at an inactive channel is drawn again among the active ones); or "
            "protocol (legal, and every line's field label, a buyer's too). Forced "
            "tokens carry no loss; the cost floor stays the learner's to learn; "
            "agents.steering. hf only."
        ),
    )
    train_market: Mapping[str, Any] = field(
        default_factory=dict,
        metadata=_help(
            "Market fields overridden for training and warm-start scenarios only (evaluation "
            "keeps [league.market]), e.g. {price_jitter = 1.5} or {total_turns = 3}."
        ),
    )
    side_train: Mapping[str, Mapping[str, Any]] = field(
        default_factory=dict,
        metadata=_help(
            "Training settings of one side that differ from [league.learner.train] (RLlib's "
            "per-module overrides), by side: [league.learner.side_train.buyer] learning_rate = "
            "5e-4, temperature = 1.0, steps_per_generation = 12. Keys: "
            + ", ".join((*SIDE_TRAIN_KEYS, SIDE_STEPS))
            + " (what shapes a step or a checkpoint stays the league's)."
        ),
    )
    warm_start: str = field(
        default="",
        metadata=_help(
            "scripted:<name>, or several comma-separated: before generation 1, fit the base "
            "model on those scripted agents' transcripts, in equal shares (agents.finetune): "
            "buyers for side = buyer, else sellers, played against the initial buyers; with "
            "side = both or self-play every seat of those episodes is fitted; empty: start "
            "from the base model as it is."
        ),
    )
    warm_start_talk: str = field(
        default="scripted",
        metadata=_help(
            "The Talk lines fitted on: scripted (as the agents wrote them) or short (one short "
            "sentence naming the action, so a small model spends its capacity on the moves)."
        ),
    )
    warm_start_episodes: int = field(
        default=256, metadata=_help("Scripted episodes to fit on for the warm start.")
    )
    warm_start_steps: int = field(
        default=200, metadata=_help("Optimizer steps of the warm-start fit (batches of 8 turns).")
    )
    warm_start_lr: float = field(default=3e-3, metadata=_help("Learning rate of the warm start."))
    base_seed: int = field(
        default=-1,
        metadata=_help(
            "Seed of the base model (the tiny model, its copy pretraining, the warm start); -1: "
            "the league's seed. Leagues with the same base settings and base seed share one "
            "base, built once into bases/<hash> beside the league folder: set it to share one "
            "starting point across the seeds of a run, as a pretrained model is shared."
        ),
    )
    tiny: TinyConfig = field(
        default_factory=TinyConfig, metadata=_help("[league.learner.tiny], for model = 'tiny'.")
    )
    eval_batch_size: int = field(
        default=32,
        metadata=_help("Prompts per generate() call when evaluating on the hf back-end."),
    )
    train: TrainConfig = field(
        default_factory=TrainConfig, metadata=_help("[league.learner.train]")
    )

    def __post_init__(self) -> None:
        where = "league.learner"
        if not isinstance(self.model, str) or not self.model.strip():
            raise ValueError(f"{where}.model must name a model folder (or 'tiny')")
        if self.side not in SIDES:
            raise ValueError(f"{where}.side must be one of {', '.join(SIDES)}, got {self.side!r}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(
                f"{where}.lr_schedule must be one of {', '.join(LR_SCHEDULES)}, "
                f"got {self.lr_schedule!r}"
            )
        if self.opponents not in META_SOLVERS:
            raise ValueError(
                f"{where}.opponents must be one of {', '.join(META_SOLVERS)}, "
                f"got {self.opponents!r}"
            )
        for name in (
            "steps_per_generation",
            "eval_episodes",
            "warm_start_steps",
            "eval_batch_size",
        ):
            _positive_int(where, name, getattr(self, name))
        if not isinstance(self.base_seed, int) or self.base_seed < -1:
            raise ValueError(f"{where}.base_seed must be an integer >= 0, or -1 (the league seed)")
        if not (isinstance(self.warm_start_lr, float) and self.warm_start_lr > 0):
            raise ValueError(f"{where}.warm_start_lr must be a positive number")
        if self.side == "self-play" and self.train.scenarios_per_step % 2:
            raise ValueError(
                f"{where}.side = 'self-play' trains the seller and buyer seats of each scenario "
                "together: the scenarios per step (train.per_device_train_batch_size x "
                "train.gradient_accumulation_steps / train.num_generations) must be even"
            )
        for side, override in self.side_train.items():
            if side not in ROLES:
                raise ValueError(
                    f"{where}.side_train.{side}: a side is seller or buyer, got {side!r}"
                )
            if self.side == "self-play":
                raise ValueError(
                    f"{where}.side_train: self-play trains both seats in one step; set "
                    "[league.learner.train] instead"
                )
            if side not in self.roles:
                raise ValueError(
                    f"{where}.side_train.{side}: this learner never trains the {side} "
                    f"(side = {self.side!r}); remove the table"
                )
            if not isinstance(override, Mapping):
                raise ValueError(f"{where}.side_train.{side} must be a table of settings")
            for key in override:
                if key not in (*SIDE_TRAIN_KEYS, SIDE_STEPS):
                    raise ValueError(
                        f"{where}.side_train.{side}.{key}: not a per-side setting; one of "
                        f"{', '.join((*SIDE_TRAIN_KEYS, SIDE_STEPS))} (set the others in "
                        "[league.learner.train])"
                    )
            steps = override.get(SIDE_STEPS, 1)
            if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
                raise ValueError(
                    f"{where}.side_train.{side}.{SIDE_STEPS} must be a whole number >= 1, "
                    f"got {steps!r}"
                )
            rate = override.get("learning_rate", 1.0)
            if isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate <= 0:
                raise ValueError(
                    f"{where}.side_train.{side}.learning_rate must be a positive number"
                )
        if self.buyer_seats not in BUYER_SEATS:
            raise ValueError(
                f"{where}.buyer_seats must be one of {', '.join(BUYER_SEATS)}, "
                f"got {self.buyer_seats!r}"
            )
        if self.buyer_credit not in BUYER_CREDIT:
            raise ValueError(
                f"{where}.buyer_credit must be one of {', '.join(BUYER_CREDIT)}, "
                f"got {self.buyer_credit!r}"
            )
        _positive_int(where, "warm_start_episodes", self.warm_start_episodes)
        for k, spec in enumerate(self.warm_start_specs):
            if not spec.startswith("scripted:"):
                raise ValueError(f"{where}.warm_start must name scripted agents, got {spec!r}")
            check_spec(spec, self.warm_start_role, f"{where}.warm_start[{k}]")
        if self.prompt not in PROMPT_STYLES:
            raise ValueError(
                f"{where}.prompt must be one of {', '.join(PROMPT_STYLES)}, got {self.prompt!r}"
            )
        if self.steer not in STEERS:
            raise ValueError(
                f"{where}.steer must be one of {', '.join(STEERS)}, got {self.steer!r}"
            )
        if self.steer != "none" and self.train.use_vllm:
            raise ValueError(
                f"{where}.steer = {self.steer!r} runs on the hf sampler and back-end; with "
                "train.use_vllm = true set steer = 'none'"
            )
        if self.warm_start_talk not in WARM_START_TALK:
            raise ValueError(
                f"{where}.warm_start_talk must be scripted or short, got {self.warm_start_talk!r}"
            )

    @property
    def warm_start_specs(self) -> list[str]:
        """The warm-start agents (``warm_start`` split on commas)."""
        return [spec.strip() for spec in self.warm_start.split(",") if spec.strip()]

    @property
    def warm_start_role(self) -> str:
        """The role of the agents ``warm_start`` names: buyers for side = buyer, else sellers."""
        return "buyer" if self.side == "buyer" else "seller"

    @property
    def warm_start_roles(self) -> tuple[str, ...]:
        """The seats the warm start fits: the learner's roles, so a learner that plays both
        sides also learns the buyers' moves from the same episodes."""
        return self.roles

    def train_for(self, side: str) -> TrainConfig:
        """The training settings of ``side``: ``train`` with ``side_train[side]`` on top."""
        override = {k: v for k, v in self.side_train.get(side, {}).items() if k != SIDE_STEPS}
        if not override:
            return self.train
        return dataclasses.replace(self.train, grpo={**self.train.grpo, **override})

    def steps_for(self, side: str) -> int:
        """Optimizer steps of a generation that trains ``side``: its ``side_train`` value,
        else ``steps_per_generation``."""
        return int(self.side_train.get(side, {}).get(SIDE_STEPS, self.steps_per_generation))

    @property
    def most_steps(self) -> int:
        """The most steps any generation takes: the stride of the generations' scenario
        slices, so no two generations share a training scenario whichever side they train."""
        return max(self.steps_for(side) for side in self.roles)

    def steps_through(self, generation: int) -> int:
        """Optimizer steps of generations 1 .. ``generation`` together (a checkpoint's step)."""
        return sum(self.steps_for(self.side_of(g)) for g in range(1, generation + 1))

    def side_of(self, generation: int) -> str:
        """The side trained in ``generation`` (1-based): ``both`` alternates, seller first."""
        if self.side == "both":
            return "seller" if generation % 2 == 1 else "buyer"
        return self.side

    @property
    def roles(self) -> tuple[str, ...]:
        """The roles the learner's checkpoints play."""
        return ROLES if self.side in ("both", "self-play") else (self.side,)


@dataclass(frozen=True)
class LeagueConfig:
    """A league: initial populations, one learner, generations of train-evaluate-rate."""

    name: str = field(metadata=_help("League name; its tournaments and rows are stored under it."))
    sellers: tuple[str, ...] = field(metadata=_help("Initial seller population (agent specs)."))
    buyers: tuple[str, ...] = field(metadata=_help("Initial buyer population (agent specs)."))
    learner: LearnerConfig = field(metadata=_help("[league.learner]"))
    preset: str = field(default="in-distribution", metadata=_help("Market preset."))
    market: Mapping[str, Any] = field(
        default_factory=dict, metadata=_help("Preset fields to override ([league.market]).")
    )
    generations: int = field(default=2, metadata=_help("Generations to run."))
    seed: int = field(
        default=0,
        metadata=_help(
            "Seeds everything the league samples: the tiny model, its copy pretraining and warm "
            "start, training scenarios, opponent draws, rollouts, LoRA initialisation; "
            "evaluation samples are seeded per episode."
        ),
    )
    seeds: tuple[int, ...] = field(
        default=(),
        metadata=_help(
            "Run the recipe once per seed (leagues <name>-seed<k> in one database, files in "
            "seed-<k>; leagues.seeds); empty: once, with `seed`. `--seeds` overrides it."
        ),
    )
    eval_seed: int = field(
        default=-1, metadata=_help("Seed of the evaluation scenarios; -1: seed + 1_000_003.")
    )
    catalog: str | None = field(default=None, metadata=_help("Catalogue path; None: default."))
    train_split: str = field(default="train", metadata=_help("Catalogue split for training."))
    eval_split: str = field(default="test", metadata=_help("Held-out split for evaluation."))
    folder: str = field(
        default="",
        metadata=_help(
            "Checkpoints and trainer state; empty: runs/<name> beside the database (<name> "
            "when the database already sits in a folder called runs)."
        ),
    )
    bootstrap_rounds: int = field(
        default=200, metadata=_help("Bootstrap resamples for rating intervals.")
    )
    cpu_threads: int = field(
        default=0,
        metadata=_help(
            "torch threads on CPU; 0 keeps torch's default. 1 is fastest for tiny models on a "
            "busy machine (threads of small ops stall when the cores are shared)."
        ),
    )
    executor: str = field(
        default="local",
        metadata=_help(
            "Where evaluation rounds play: local, or ray (model-holding actors, docs/scaling.md)."
        ),
    )
    ray_address: str = field(
        default="", metadata=_help("Ray cluster for executor ray; empty: RAY_ADDRESS, else local.")
    )
    workers: int = field(
        default=1, metadata=_help("Evaluation workers: processes (local), actors per model (ray).")
    )

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("league.name must be a non-empty string")
        if any(c in self.name for c in "/\\"):
            raise ValueError(f"league.name {self.name!r} must not contain a path separator")
        for role, specs in (("seller", self.sellers), ("buyer", self.buyers)):
            if not specs:
                raise ValueError(f"league.{role}s must list at least one agent spec")
            if len(set(specs)) != len(specs):
                raise ValueError(f"league.{role}s lists a spec twice")
            for i, spec in enumerate(specs):
                check_spec(spec, role, f"league.{role}s[{i}]")
        for name in ("generations", "bootstrap_rounds", "cpu_threads"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"league.{name} must be an integer >= 0, got {value!r}")
        if self.generations < 1:
            raise ValueError("league.generations must be >= 1")
        if self.executor not in EXECUTORS:
            raise ValueError(f"league.executor must be one of {', '.join(EXECUTORS)}")
        _positive_int("league", "workers", self.workers)
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"league.seed must be an integer >= 0, got {self.seed!r}")
        if not isinstance(self.eval_seed, int) or self.eval_seed < -1:
            raise ValueError("league.eval_seed must be an integer >= 0, or -1 for the default")
        for name in ("train_split", "eval_split"):
            if getattr(self, name) not in SPLITS:
                raise ValueError(f"league.{name} must be one of {', '.join(SPLITS)}")
        try:
            market = self.market_config()
        except ValueError as exc:
            message = str(exc)
            if not message.startswith("league.market"):
                message = f"league.preset / league.market: {message}"
            raise ValueError(message) from None
        if self.learner.side in ("buyer", "both", "self-play") and market.num_buyers < 1:
            raise ValueError("a buyer learner needs a market with at least one buyer")
        per_step = self.learner.train.scenarios_per_step
        if self.learner.buyer_seats == "all" and per_step % market.num_buyers:
            raise ValueError(
                f"league.learner.buyer_seats = 'all' trains the {market.num_buyers} buyer seats "
                "of each scenario in one step: the groups per step (train."
                "per_device_train_batch_size x train.gradient_accumulation_steps / "
                f"train.num_generations = {per_step}) must be a multiple of {market.num_buyers}"
            )
        train = self.train_market_config()
        for name in ("num_buyers", "num_products"):
            if getattr(train, name) != getattr(market, name):
                raise ValueError(
                    f"league.learner.train_market.{name} must equal the evaluation market's "
                    f"({getattr(market, name)}): a checkpoint plays the seats it was trained in"
                )
        if self.learner.prompt == "compact" and market.num_products > 1:
            raise ValueError(
                "league.learner.prompt = 'compact' is written for single-product markets; use "
                "'full' with several products"
            )

    def market_config(self) -> MarketConfig:
        """The preset with the ``[league.market]`` overrides applied: the evaluation market."""
        return market_config(self.preset, self.market, "league.market")

    def train_market_config(self) -> MarketConfig:
        """The market of training and warm-start scenarios: the evaluation market with the
        ``[league.learner.train_market]`` overrides on top."""
        merged = {**self.market, **self.learner.train_market}
        return market_config(self.preset, merged, "league.learner.train_market")

    def learning_rate(self, generation: int) -> float:
        """The learning rate generation ``generation`` (1-based) trains at, by
        ``learner.lr_schedule``."""
        side = self.learner.side_of(generation)
        rate = float(self.learner.train_for(side).grpo["learning_rate"])
        if self.learner.lr_schedule == "constant":
            return rate
        left = max(self.generations - generation + 1, 1)
        return rate * left / self.generations

    @property
    def evaluation_seed(self) -> int:
        return self.seed + 1_000_003 if self.eval_seed == -1 else self.eval_seed

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, as stored with the league (``[league.learner.train]``'s GRPOConfig fields
        beside the league's own, as in the table: :func:`arena.settings.to_json`)."""
        return to_json(self)

    def config_hash(self) -> str:
        """A short hash of everything that shapes the checkpoints (stored as lineage); the
        number of generations and the loggers are left out, so extending a league or logging
        it elsewhere keeps its hash."""
        settings = without_loggers(
            {k: v for k, v in self.to_dict().items() if k not in ("generations", "seeds")}
        )
        text = json.dumps(settings, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @staticmethod
    def from_dict(data: Mapping[str, Any], base: Path | None = None) -> LeagueConfig:
        """Build from the ``[league]`` table (the settings dialect: unknown keys anywhere and bad
        values are errors naming them). Relative ``catalog`` and ``folder`` paths are read from
        ``base`` (the TOML's folder); so is ``learner.model`` when a model folder is there."""
        values = dict(data)
        if base is not None:
            for key in ("catalog", "folder"):
                path = values.get(key)
                if isinstance(path, str) and path and not Path(path).is_absolute():
                    values[key] = str(base / path)
            learner = values.get("learner")
            model = learner.get("model") if isinstance(learner, Mapping) else None
            if _local_model(base, model):
                values["learner"] = {**learner, "model": str(base / model)}  # type: ignore[dict-item]
        return from_mapping(LeagueConfig, values, "league")

    @staticmethod
    def from_toml(path: str | Path) -> LeagueConfig:
        """Read ``[league]`` from a TOML file."""
        file = Path(path)
        values = read_toml_table(file, "league")
        try:
            return LeagueConfig.from_dict(values, base=file.parent.resolve())
        except ValueError as exc:
            raise ValueError(f"{file}: {exc}") from None


def without_loggers(settings: dict[str, Any]) -> dict[str, Any]:
    """League settings without ``learner.train.report_to`` and the ``PLACEMENT`` keys: where the
    step metrics are also logged, or the evaluation runs, changes no result, so it may change
    when a league resumes."""
    train = {k: v for k, v in settings["learner"]["train"].items() if k != "report_to"}
    placed = {k: v for k, v in settings.items() if k not in PLACEMENT}
    return {**placed, "learner": {**settings["learner"], "train": train}}


def _local_model(base: Path, model: Any) -> bool:
    """``model`` names a model folder next to the TOML file (not "tiny", not absolute)."""
    if not isinstance(model, str) or model == TINY or Path(model).is_absolute():
        return False
    return (base / model / "config.json").is_file()
