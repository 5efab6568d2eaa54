"""League configuration: frozen dataclasses read from one TOML file.

    [league]                           # LeagueConfig: populations, market, generations
    name = "tiny-demo"
    preset = "in-distribution"
    generations = 2
    seed = 0
    sellers = ["scripted:satisficer", "scripted:prober"]
    buyers = ["scripted:time", "scripted:tit-for-tat"]

    [league.learner]                   # LearnerConfig (leagues.learner_config): who learns
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
model folder; a relative path naming a model folder next to the TOML file is used as is (one
that leaves that folder, ``../runs/bases/<hash>/warm-start``, must name one, or the config is
refused); ``"tiny"`` or any other relative path means "the project's tiny test model at that
path inside the league folder, built there if absent" (:mod:`leagues.models`), so an example
league runs on a fresh clone.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents import check_spec
from arena.catalog import SPLITS
from arena.config import MarketConfig
from arena.settings import about as _help
from arena.settings import check_positive_int as _positive_int
from arena.settings import from_mapping, to_json
from leagues.learner_config import BUYER_AIDS, SINGLE_PRODUCT_AIDS, TINY, LearnerConfig
from tournaments.config import market_config, read_toml_table
from tournaments.runner import EXECUTORS

PLACEMENT = ("executor", "ray_address", "workers", "overlap_evaluation")
"""Where a league's evaluation runs: changes no result, so it may change when a league resumes."""


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
    overlap_evaluation: bool = field(
        default=False,
        metadata=_help(
            "Play generation g's evaluation in a background process while generation g+1 "
            "trains, where g+1's meta-solver is uniform (it reads no evaluation); the same "
            "episodes and ratings (leagues.rounds). Local executor, on workers - 1 processes "
            "(at least one); the last generation's on all workers."
        ),
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
        if self.overlap_evaluation and self.executor != "local":
            raise ValueError(
                "league.overlap_evaluation plays rounds in a local background process; with "
                f"executor = {self.executor!r} the actors already play beside the learner: set "
                "overlap_evaluation = false"
            )
        if self.overlap_evaluation and self.learner.train.use_vllm:
            raise ValueError(
                "league.overlap_evaluation would start a second vLLM engine beside the trainer's "
                "on the same device: set overlap_evaluation = false with learner.train.use_vllm"
            )
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
        for aid in SINGLE_PRODUCT_AIDS:
            if getattr(self.learner, aid) and market.num_products > 1:
                raise ValueError(
                    f"league.learner.{aid} is written for single-product markets (one budget); "
                    f"set {aid} = {BUYER_AIDS[aid]} with several products"
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
                values["learner"] = {**learner, "model": str((base / model).resolve())}  # type: ignore[dict-item]
            elif isinstance(model, str) and ".." in Path(model).parts:
                raise ValueError(
                    f"league.learner.model: no model folder at {base / model} (a relative path "
                    "that leaves the TOML file's folder must name a built model: run the league "
                    "that builds it first, or give 'tiny')"
                )
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
