"""The learner of a league (``[league.learner]``): its model, side, schedule, warm start, start
checkpoints and per-side settings, checked when read (:class:`LearnerConfig`). The league around
it, and the TOML dialect both are read from, is :mod:`leagues.config`."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agents import check_spec
from agents.prompts import PROMPT_STYLES
from agents.specs import SpecError, parse_spec
from agents.steering import LADDERED, check_steer
from arena.money import check_ladder
from arena.seats import ROLES
from arena.settings import about as _help
from arena.settings import check_positive_int as _positive_int
from leagues.side_train import (
    SIDE_LEAGUE_KEYS,
    SIDE_TRAIN_KEYS,
    check_side_league_key,
    check_side_train,
)
from leagues.tiny import TinyConfig
from leagues.train_config import TrainConfig

SIDES = ("seller", "buyer", "both", "self-play")
LR_SCHEDULES = ("constant", "linear")
"""Values of ``learner.lr_schedule``: the learning rate across generations."""
TINY = "tiny"
"""``model = "tiny"``: build the project's tiny random chat model into the league folder."""


WARM_START_TALK = ("scripted", "short", "share")
BUYER_SEATS = ("first", "all")
"""Values of ``learner.buyer_seats``: where a training buyer sits among several buyers."""
BUYER_CREDIT = ("seat", "side")
"""Values of ``learner.buyer_credit``: whose reward a buyer seat's group is scored by."""
BUYER_AIDS = {
    "ladder": "0", "budget_hint": "false", "list_hint": "false", "round_hint": "false",
    "share_cue": "false",
}  # fmt: skip
"""The learner's buyer aids (``LearnerConfig`` fields and agent options of the same names), each
with the value that turns it off: when set, part of the base (the warm start reads them) and of
every spec of the learner."""
SINGLE_PRODUCT_AIDS = ("ladder", "budget_hint", "list_hint", "share_cue")
"""The aids that read one budget or one list price: single-product markets only."""


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
    opponents_explore: float = field(
        default=0.0,
        metadata=_help(
            "Share of the opponent mixture spread evenly over the members drawn from "
            "(opponents_from), the rest drawn by the meta-solver (PSRO's exploration): 0 keeps "
            "the solver's mixture, 1 is uniform; each of those n opponents gets at least "
            "opponents_explore / n, so nash cannot put all its weight on one opponent."
        ),
    )
    opponents_from: str = field(
        default="all",
        metadata=_help(
            "The members training opponents are drawn from: all (the other side's whole "
            "population), models (its model agents only, the league's checkpoints and fixed "
            "hf/vllm/openai entries; scripted agents still play the evaluations and anchor the "
            "ratings) or scripted (its scripted agents only: the side trains against the fixed "
            "anchors while the other lineage's checkpoints still play its evaluations); while "
            "the other side has none of those, all."
        ),
    )
    shared_replies: tuple[int, ...] = field(
        default=(0,),
        metadata=_help(
            "Tree rollouts: a GRPO group's episodes share their first n learner replies (drawn "
            "with the same random numbers, so the same moves against deterministic opponents, "
            "and trained on by none) and branch after them, so the group's advantages compare "
            "only the later replies: the credit of a turn, not of the whole episode (VinePPO's "
            "Monte Carlo values at a state, as GRPO groups). The groups of a step cycle through "
            "the list: (0,) never shares; (0, 3) shares the first three replies in every "
            "other group."
        ),
    )
    exploring_starts: str = field(
        default="none",
        metadata=_help(
            "Exploring starts at the bid (buyer side, steer = 'ladder' or 'share'): none, or at "
            "each GRPO group's first free bid after its shared replies, episode k is held to the "
            "k-th of the reply's moves (a [BUY] on each ladder rung below the budget, a DEAL at a "
            "standing offer below it) in an order drawn per group, those tokens trained as the "
            "policy's, so the group's rewards compare moves the policy seldom samples "
            "(leagues.branch); episode trains every reply after the branch, move only the held "
            "reply."
        ),
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
    ladder: int = field(
        default=0,
        metadata=_help(
            "The learner's budget ladder when it buys, in training and evaluation: its prompt "
            "lists offers at 90%, 80%, ... of its budget, this many tenths down (0: none; "
            "at most 9), prices a small model can copy; agents.prompts.ladder_line."
        ),
    )
    budget_hint: bool = field(
        default=False,
        metadata=_help(
            "When the learner buys, in training and evaluation, each of its turns says whether "
            "its budget covers the seller's standing offer (agents.prompts.offer_line); the "
            "decision to take it stays the learner's."
        ),
    )
    list_hint: bool = field(
        default=False,
        metadata=_help(
            "When the learner buys, in training and evaluation, each of its turns says how far "
            "the seller's standing offer lies below list price (agents.prompts.list_line); the "
            "decision to take it stays the learner's."
        ),
    )
    round_hint: bool = field(
        default=False,
        metadata=_help(
            "When the learner buys, in training and evaluation, its turn says in words when the "
            "seller's next message to it is its last, or that it was (agents.prompts.last_line); "
            "the bid stays the learner's."
        ),
    )
    share_cue: bool = field(
        default=False,
        metadata=_help(
            "Under steer = 'share', when the learner buys, its Thought opens with 'They hold "
            "list.' or 'They came down.' (the seller's offer at list or below it) right before "
            "the share digit it draws, in training, evaluation and the warm start "
            "(agents.steering.share_cue); needs steer = 'share'."
        ),
    )
    steer: str = field(
        default="none",
        metadata=_help(
            "Steered decoding of the learner, in training and evaluation: none; deal (a "
            "seller's [DEAL] is written at the standing bid it takes); legal (deal, and a "
            "target drawn at an inactive channel is drawn again among the active ones); or "
            "protocol (legal, and every line's field label, a buyer's too); or ladder "
            "(protocol, and a buyer's [BUY] price drawn among its ladder's rungs and its "
            "budget; needs ladder = N); or share (protocol, and a buyer's move one digit of its "
            "Thought, the tenths of its budget it offers or 0 for none, the price written from "
            "it; needs ladder = N and warm_start_talk = 'share'). Forced "
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
            "5e-4, temperature = 1.0, steps_per_generation = 12, opponents = 'nash'. Keys: "
            + ", ".join((*SIDE_TRAIN_KEYS, *SIDE_LEAGUE_KEYS))
            + " (what shapes a step or a checkpoint stays the league's)."
        ),
    )
    start: Mapping[str, str] = field(
        default_factory=dict,
        metadata=_help(
            "A trained checkpoint a side's lineage starts from instead of the base model, by "
            "side, as an agent spec (another league's checkpoint, seed 000 Section 3.3): "
            "[league.learner.start] buyer = 'hf:runs/bases/<hash>/warm-start?lora=runs/"
            "buyer-seed0/gen-003-buyer/adapter'. Its model is that side's base, its adapter "
            "the first parent; it is rated as that side's `base`; decoding stays the league's."
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
    warm_start_buyers: tuple[str, ...] = field(
        default=(),
        metadata=_help(
            "The scripted buyers the warm start's sellers play (side = seller or both; with "
            "both, the buyer moves the base imitates), e.g. ['scripted:random?ladder=9']: a "
            "base that knows every move and no strategy; empty: the league's buyers."
        ),
    )
    warm_start_talk: str = field(
        default="scripted",
        metadata=_help(
            "The Talk lines fitted on: scripted (as the agents wrote them), short (one short "
            "sentence naming the action, so a small model spends its capacity on the moves) or "
            "share (short, and each buyer move's Thought the one steer = 'share' writes: "
            "'Offer 70% of my budget.'; goes with that steer)."
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
        for key in SIDE_LEAGUE_KEYS:
            check_side_league_key(f"{where}.{key}", key, getattr(self, key))
        for name in ("eval_episodes", "warm_start_steps", "eval_batch_size"):
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
        for name, example in (("side_train", "{'buyer': {'learning_rate': 5e-4}}"),
                              ("start", "{'seller': 'hf:<model>?lora=<adapter>'}")):  # fmt: skip
            if not isinstance(getattr(self, name), Mapping):
                raise ValueError(
                    f"{where}.{name} must be a table keyed by side, e.g. {example}; "
                    f"got {getattr(self, name)!r}"
                )
        check_side_train(self.side_train, self.side, self.roles, where)
        for side, spec in self.start.items():
            if side not in self.roles or self.side == "self-play":
                raise ValueError(
                    f"{where}.start.{side}: this learner trains no {side} lineage of its own "
                    f"(side = {self.side!r}); name a side it trains (seller or buyer)"
                )
            start_checkpoint(spec, f"{where}.start.{side}")
        if self.warm_start and set(self.roles) <= set(self.start):
            raise ValueError(
                f"{where}.warm_start: every side starts from {where}.start's checkpoints, so no "
                "base model is warmed up; remove warm_start"
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
        if self.warm_start_buyers and (self.warm_start_role != "seller" or not self.warm_start):
            raise ValueError(
                f"{where}.warm_start_buyers names the buyers a seller warm start plays: it "
                "needs warm_start and side = 'seller' or 'both'; remove it"
            )
        for k, spec in enumerate(self.warm_start_buyers):
            if not spec.startswith("scripted:"):
                raise ValueError(
                    f"{where}.warm_start_buyers must name scripted agents, got {spec!r}"
                )
            check_spec(spec, "buyer", f"{where}.warm_start_buyers[{k}]")
        if self.prompt not in PROMPT_STYLES:
            raise ValueError(
                f"{where}.prompt must be one of {', '.join(PROMPT_STYLES)}, got {self.prompt!r}"
            )
        try:
            check_ladder(self.ladder)
        except ValueError as exc:
            raise ValueError(f"{where}.ladder: {exc}") from None
        try:
            check_steer(self.steer, self.ladder)
        except ValueError as exc:
            hint = f" ({where}.ladder = N)" if self.steer in LADDERED else ""
            raise ValueError(f"{where}.steer: {exc}{hint}") from None
        if self.steer != "none" and self.train.use_vllm:
            raise ValueError(
                f"{where}.steer = {self.steer!r} runs on the hf sampler and back-end; with "
                "train.use_vllm = true set steer = 'none'"
            )
        explorers = [s for s in self.roles if self.side_setting(s, "exploring_starts") != "none"]
        if "seller" in explorers or (explorers and self.steer not in LADDERED):
            raise ValueError(
                f"{where}.exploring_starts explores a buyer's bids on its ladder: set it under "
                f"[{where}.side_train.buyer], with {where}.steer = 'ladder' or 'share'"
            )
        if self.share_cue and self.steer != "share":
            raise ValueError(
                f"{where}.share_cue = true cues the share digit; set {where}.steer = 'share' "
                "or leave share_cue off"
            )
        if self.warm_start_talk not in WARM_START_TALK:
            raise ValueError(
                f"{where}.warm_start_talk must be one of {', '.join(WARM_START_TALK)}, got "
                f"{self.warm_start_talk!r}"
            )
        if self.warm_start and (self.steer == "share") != (self.warm_start_talk == "share"):
            raise ValueError(
                f"{where}: steer = 'share' and warm_start_talk = 'share' go together (the warm "
                "start fits the Thought the steer writes); set both, or neither"
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
        override = {
            k: v for k, v in self.side_train.get(side, {}).items() if k not in SIDE_LEAGUE_KEYS
        }
        if not override:
            return self.train
        return dataclasses.replace(self.train, grpo={**self.train.grpo, **override})

    def side_setting(self, side: str, key: str) -> Any:
        """A league setting of ``SIDE_LEAGUE_KEYS`` for ``side``: its ``side_train`` value, else
        the league's (RLlib's per-module override over the shared default)."""
        if key not in SIDE_LEAGUE_KEYS:
            raise KeyError(f"{key!r} is not a per-side league setting ({SIDE_LEAGUE_KEYS})")
        return self.side_train.get(side, {}).get(key, getattr(self, key))

    def steps_for(self, side: str) -> int:
        """Optimizer steps of a generation that trains ``side``."""
        return int(self.side_setting(side, "steps_per_generation"))

    def opponents_for(self, side: str) -> str:
        """The meta-solver that draws ``side``'s training opponents."""
        return str(self.side_setting(side, "opponents"))

    def opponents_from_for(self, side: str) -> str:
        """The members ``side`` draws its training opponents from (``OPPONENT_POOLS``)."""
        return str(self.side_setting(side, "opponents_from"))

    def shared_replies_for(self, side: str) -> tuple[int, ...]:
        """How many learner replies the GRPO groups of ``side`` share, cycled over its groups."""
        return tuple(self.side_setting(side, "shared_replies"))

    def opponents_explore_for(self, side: str) -> float:
        """The exploration share of ``side``'s opponent mixture."""
        return float(self.side_setting(side, "opponents_explore"))

    def opponent_rule(self, side: str) -> str:
        """How ``side``'s training opponents are drawn, for the generation log: the solver, its
        exploration share and its pool where they are not the defaults."""
        rule = self.opponents_for(side)
        if self.opponents_explore_for(side):
            rule += f" (explore {self.opponents_explore_for(side):.2f})"
        if self.opponents_from_for(side) != "all":
            rule += f" over {self.opponents_from_for(side)}"
        return rule

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


def start_checkpoint(spec: Any, where: str) -> tuple[str, str | None]:
    """(model folder, adapter folder or None) of a ``learner.start`` spec: ``hf:`` or
    ``vllm:`` with the model as its name and the adapter as ``lora``."""
    if not isinstance(spec, str):
        raise ValueError(f"{where} must be an agent spec string, got {spec!r}")
    try:
        parsed = parse_spec(spec)
    except SpecError as exc:
        raise ValueError(f"{where}: {exc}") from None
    if parsed.kind not in ("hf", "vllm"):
        raise ValueError(
            f"{where}: a start is a model checkpoint (hf:<model>?lora=<adapter>), got {spec!r}"
        )
    return parsed.name, parsed.params.get("lora") or None
