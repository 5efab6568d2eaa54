"""Estimates: a sample mean with its standard error, over the episodes a metric counts.

Episodes whose outcome is ``"error"`` (a back-end failure, not a decision of the agent) count for
no metric: the paper reports over "successfully-parsed" episodes (Section 4.1).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from arena.records import EpisodeRecord


@dataclass(frozen=True)
class Estimate:
    """A sample mean with its standard error (sample std with ddof=1 over sqrt(n))."""

    mean: float
    se: float
    n: int

    def as_dict(self) -> dict[str, Any]:
        """``{"mean", "se", "n"}``; an empty estimate's mean and se are ``None`` (JSON null),
        never NaN, so every writer emits strict JSON."""
        if self.n == 0:
            return {"mean": None, "se": None, "n": 0}
        return {"mean": self.mean, "se": self.se, "n": self.n}

    @property
    def value(self) -> float | None:
        """The mean, or None when no episode counted (a table's empty cell)."""
        return None if self.n == 0 or math.isnan(self.mean) else self.mean


def estimate(values: Iterable[float]) -> Estimate:
    """Mean and standard error of ``values``; nan for no values, se 0.0 for one (Table 9)."""
    xs = [float(x) for x in values]
    n = len(xs)
    if n == 0:
        return Estimate(math.nan, math.nan, 0)
    mean = math.fsum(xs) / n
    if n == 1:
        return Estimate(mean, 0.0, 1)
    var = math.fsum((x - mean) ** 2 for x in xs) / (n - 1)
    return Estimate(mean, math.sqrt(var / n), n)


def counted(records: Iterable[EpisodeRecord]) -> list[EpisodeRecord]:
    """The successfully-parsed episodes: every outcome but "error" (Section 4.1)."""
    return [r for r in records if r.result.outcome != "error"]


def error_count(records: Iterable[EpisodeRecord]) -> int:
    """How many episodes ended in a back-end error and were left out of every metric."""
    return sum(r.result.outcome == "error" for r in records)


def mean_over(
    records: Iterable[EpisodeRecord], per_episode: Callable[[EpisodeRecord], float | None]
) -> Estimate:
    """Estimate of ``per_episode`` over counted episodes where it applies (is not None)."""
    values = (per_episode(r) for r in counted(records))
    return estimate(v for v in values if v is not None)


def by_buyer_type(
    records: Iterable[EpisodeRecord],
    per_buyer: Callable[[EpisodeRecord], list[tuple[str, float]]],
) -> dict[str, Estimate]:
    """Estimate per buyer type (spec string) of ``per_buyer`` values over counted episodes."""
    groups: dict[str, list[float]] = {}
    for record in counted(records):
        for spec, value in per_buyer(record):
            groups.setdefault(spec, []).append(value)
    return {spec: estimate(groups[spec]) for spec in sorted(groups)}
