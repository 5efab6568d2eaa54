"""What a step's GRPO groups score: TRL's reward function, and the groups that train nothing.

The rollout (:mod:`leagues.rollout`) carries each entry's verifiable reward in its
``learner_reward`` column; TRL's reward function hands it back, and logs the batch's training
metrics over its distinct episodes (a self-play episode serves several entries) with the count of
groups whose rewards are all equal (GRPO's advantage is 0 for every member: no gradient) and of
those dynamic sampling replayed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from arena import metrics

ZERO_ADVANTAGE = "zero_advantage_groups"
"""Logged per step: the batch's GRPO groups whose rewards are all equal (they train nothing)."""

RESAMPLED = "resampled_groups"
"""Logged per step: the batch's GRPO groups replayed on a fresh scenario (dynamic sampling)."""


def batch_means(
    episodes: Sequence[str], values: dict[str, Sequence[float | None]]
) -> dict[str, float]:
    """Per-metric means over distinct episodes, skipping None; metrics with no value left out."""
    first: dict[str, int] = {}
    for position, episode in enumerate(episodes):
        first.setdefault(episode, position)
    means = {}
    for name, column in values.items():
        xs = [column[p] for p in first.values() if column[p] is not None]
        if xs:
            means[name] = math.fsum(xs) / len(xs)
    return means


def flat_groups(prompts: Sequence[Any], rewards: Sequence[float | None]) -> list[str]:
    """GRPO groups (entries with the same dataset prompt), in order of first entry, that train
    nothing: all their scored rewards are equal, or fewer than two are scored (errored episodes
    carry no reward). TRL's advantage is then 0 for every member, and so is the gradient."""
    groups: dict[str, set[float]] = {}
    scored: dict[str, int] = {}
    for prompt, reward in zip(prompts, rewards, strict=True):
        key = str(prompt)
        groups.setdefault(key, set())
        if reward is not None:
            groups[key].add(reward)
            scored[key] = scored.get(key, 0) + 1
    return [key for key, values in groups.items() if len(values) <= 1 or scored.get(key, 0) < 2]


def zero_advantage_groups(prompts: Sequence[Any], rewards: Sequence[float | None]) -> int:
    """How many GRPO groups train nothing (:func:`flat_groups`)."""
    return len(flat_groups(prompts, rewards))


def learner_reward(
    prompts: list[Any],
    completions: list[Any],
    learner_reward: list[float | None],
    episode: list[str],
    log_metric: Callable[[str, float], None] | None = None,
    resampled: list[bool] | None = None,
    **metrics_columns: Any,
) -> list[float | None]:
    """TRL reward function: the learner's verifiable reward, carried by the rollout.

    Logs, through TRL's ``log_metric``, the training metrics of the batch's distinct episodes,
    ``zero_advantage_groups`` (the batch's groups with nothing to learn from, after dynamic
    sampling) and ``resampled_groups`` (groups dynamic sampling replayed); on several processes,
    the mean over processes of each one's count.
    """
    if log_metric is not None:
        names = [m.name for m in metrics.group(metrics.TRAINING)]
        columns = {name: metrics_columns[name] for name in names if name in metrics_columns}
        for name, value in batch_means(episode, columns).items():
            log_metric(name, value)
        log_metric(ZERO_ADVANTAGE, float(zero_advantage_groups(prompts, learner_reward)))
        replayed = {str(p) for p, r in zip(prompts, resampled or [], strict=False) if r}
        log_metric(RESAMPLED, float(len(replayed)))
    return list(learner_reward)
