"""A learner's per-side settings (``[league.learner.side_train.<side>]``): the keys a side may
set over the league's values and their checks, one check per key whichever table sets it. RLlib's
per-module overrides are the model: how much a module trains, against which policies, with which
optimiser and sampling settings; what shapes a step or a checkpoint stays the league's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from arena.seats import ROLES
from arena.settings import check_positive_int as _positive_int
from leagues.sampling import META_SOLVERS

SIDE_TRAIN_KEYS = (
    "learning_rate", "temperature", "top_p", "top_k", "beta", "epsilon", "epsilon_high",
    "loss_type", "scale_rewards", "max_grad_norm", "weight_decay", "warmup_steps",
    "warmup_ratio", "lr_scheduler_type",
)  # fmt: skip
"""``learner.side_train`` keys: TRL's optimisation and sampling settings; the batch shape,
completion length, sampler and adapter stay the league's."""
SIDE_LEAGUE_KEYS = (
    "steps_per_generation", "opponents", "opponents_explore", "opponents_from", "shared_replies",
    "exploring_starts",
)  # fmt: skip
"""The league settings ``learner.side_train`` also takes: a side's optimizer steps per generation
and the meta-solver its training opponents are drawn by, its exploration share and the members it
draws from (RLlib's per-module overrides include how much each module trains and against which
policies), how many replies its GRPO groups share before they branch, and whether they explore
at the branch."""
EXPLORING_STARTS = ("none", "episode", "move")
"""``exploring_starts``: none; held moves with every reply after the branch trained; or with
only the held reply trained (:mod:`leagues.branch`)."""
OPPONENT_POOLS = ("all", "models", "scripted")
"""``opponents_from``: the other side's whole population, its model agents only, or its scripted
agents only."""


def check_side_train(
    side_train: Mapping[str, Any], learner_side: str, roles: tuple[str, ...], where: str
) -> None:
    """Refuse a ``side_train`` table a learner of ``learner_side`` (training ``roles``) cannot
    use: an unknown side or key, a side it never trains, a bad value; ``where`` names the
    table in the error."""
    for side, override in side_train.items():
        if side not in ROLES:
            raise ValueError(f"{where}.side_train.{side}: a side is seller or buyer, got {side!r}")
        if learner_side == "self-play":
            raise ValueError(
                f"{where}.side_train: self-play trains both seats in one step; set "
                "[league.learner.train] instead"
            )
        if side not in roles:
            raise ValueError(
                f"{where}.side_train.{side}: this learner never trains the {side} "
                f"(side = {learner_side!r}); remove the table"
            )
        if not isinstance(override, Mapping):
            raise ValueError(f"{where}.side_train.{side} must be a table of settings")
        for key in override:
            if key not in (*SIDE_TRAIN_KEYS, *SIDE_LEAGUE_KEYS):
                raise ValueError(
                    f"{where}.side_train.{side}.{key}: not a per-side setting; one of "
                    f"{', '.join((*SIDE_TRAIN_KEYS, *SIDE_LEAGUE_KEYS))} (set the others in "
                    "[league.learner.train])"
                )
        for key in SIDE_LEAGUE_KEYS:  # the league's own: LearnerConfig checks them
            if key in override:
                check_side_league_key(f"{where}.side_train.{side}.{key}", key, override[key])
        rate = override.get("learning_rate", 1.0)
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate <= 0:
            raise ValueError(f"{where}.side_train.{side}.learning_rate must be a positive number")


def check_side_league_key(where: str, key: str, value: Any) -> None:
    """Refuse a bad value of one of ``SIDE_LEAGUE_KEYS``, the league's or a side's, naming
    ``where``: one check per key, whichever table it is set in."""
    if key == "steps_per_generation":
        _positive_int("", where, value)
    elif key in ("opponents", "opponents_from"):
        allowed = META_SOLVERS if key == "opponents" else OPPONENT_POOLS
        if value not in allowed:
            raise ValueError(f"{where} must be one of {', '.join(allowed)}, got {value!r}")
    elif key == "shared_replies":
        if (
            not isinstance(value, (list, tuple))
            or not value
            or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in value)
        ):
            raise ValueError(
                f"{where} must be a non-empty list of reply counts >= 0, e.g. [0, 3] (every "
                f"other group shares its first three learner replies), got {value!r}"
            )
    elif key == "exploring_starts":
        if value not in EXPLORING_STARTS:
            raise ValueError(f"{where} must be one of {', '.join(EXPLORING_STARTS)}, got {value!r}")
    elif key == "opponents_explore":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise ValueError(
                f"{where} must be a number from 0 (the meta-solver's mixture) to 1 (uniform), "
                f"got {value!r}"
            )
    else:
        raise KeyError(f"{key!r} is not a per-side league setting ({SIDE_LEAGUE_KEYS})")
