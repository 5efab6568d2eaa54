"""Paired comparisons from episode records: who played whom, on what, and who did better.

Three rating roles:

* ``"seller"``: two sellers that met the same buyer lineup on the same scenario are compared on
  their seller reward (higher wins, equal is a tie). Pairing key: (preset, env version, scenario
  seed, scenario index, the buyer spec of every slot).
* ``"buyer"``: two buyer entries that met the same seller on the same scenario are compared on the
  buyer side's reward, the mean buyer reward over all slots. Pairing key: (preset, env version,
  scenario seed, scenario index, seller spec).
* ``"cross"``: every episode is one game between its seller and its buyer entry, scored by the
  seller's share of the realised gains from trade (:func:`arena.metrics.episode_cross_score`,
  docs/metrics.md), so sellers and buyers get ratings on one scale.

A *buyer entry* is what a tournament puts on the buyer side: one spec, or a pool of specs that
each slot draws from with the scenario's own draws (:mod:`tournaments.config`). Records only keep
the spec of every slot, so pass the tournaments' entries as ``buyer_entries`` (see
:func:`tournaments.leaderboard.stored_buyer_entries`): an episode then counts for every entry
whose lineup on that scenario is the episode's lineup, as the runner plays such an episode once
for all of them. Without ``buyer_entries``, an episode's entry is read off its lineup
(:func:`lineup_label`).

Comparisons are taken in play order: scenarios sorted by (seed, index), each pairing having played
them in that order; within a scenario, the given record order. Online Elo and
:func:`tournaments.leaderboard.ratings_over_time` use that order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from agents.driver import buyer_lineup
from agents.human import is_human
from arena import metrics
from arena.buyer_metrics import episode_buyer_side_reward
from arena.metrics import episode_cross_score
from arena.records import EpisodeKey, EpisodeRecord
from arena.rewards import DEFAULT_REWARDS, Rewards
from tournaments.config import pool_label

RATING_ROLES = ("seller", "buyer", "cross")
"""The roles a rating is computed for: the two seats (:data:`arena.seats.ROLES`) and the
cross-role rating that puts sellers and buyers on one scale."""
TIE_TOLERANCE = 1e-9
"""Rewards closer than this are a tie (the same prices give bit-identical rewards anyway)."""

BuyerEntries = Sequence[Sequence[str]]


class Comparison(NamedTuple):
    """One paired comparison: ``score`` is a's score in [0, 1] against b."""

    a: str
    b: str
    score: float
    scenario: tuple[int, int]
    """(seed, index) of the scenario it was played on."""


def player_id(role: str, agent: str) -> str:
    """The rating-player name of ``agent`` in ``role``: role-prefixed, since one spec (e.g.
    ``scripted:time``) can be both a seller and a buyer."""
    return f"{role}:{agent}"


def split_player(player: str) -> tuple[str, str]:
    """(role, agent) of a :func:`player_id`."""
    role, _, agent = player.partition(":")
    return role, agent


def lineup_label(buyers: Sequence[str]) -> str:
    """The entry of a lineup when the tournament's entries are unknown: the spec when every slot
    plays it, else the distinct specs sorted and joined with "|" like a pool label."""
    return pool_label(sorted(set(buyers)))


def buyer_entries_of(record: EpisodeRecord, buyer_entries: BuyerEntries | None = None) -> list[str]:
    """Labels of the buyer entries ``record`` counts for (see the module docstring); no
    entries (None or empty) reads the entry off the lineup."""
    if not buyer_entries:
        return [lineup_label(record.buyers)]
    lineup = tuple(record.buyers)
    labels = [
        pool_label(pool)
        for pool in buyer_entries
        if buyer_lineup(record.scenario, tuple(pool)) == lineup
    ]
    if not labels and any(is_human(spec) for spec in lineup):
        return [lineup_label(lineup)]  # a person's game is an entry of its own (tournaments.human)
    if not labels:
        sc = record.scenario
        raise ValueError(
            f"the lineup {list(lineup)} of seller {record.seller!r} on scenario (seed {sc.seed}, "
            f"index {sc.index}) matches none of the buyer_entries "
            f"{[pool_label(p) for p in buyer_entries]}; pass the entries of every tournament the "
            "records come from, or buyer_entries=None"
        )
    return list(dict.fromkeys(labels))


def distinct_episodes(records: Iterable[EpisodeRecord]) -> list[EpisodeRecord]:
    """Counted episodes (every outcome but "error"), each :class:`EpisodeKey` once (the first):
    a match stored twice, e.g. by a pool and a fixed entry that drew the same lineup in separate
    runs, counts once. Every leaderboard, rating and payoff table reads them, so episodes played
    under different rewards are refused here (:func:`reward_setting`), never pooled."""
    seen: set[EpisodeKey] = set()
    out = []
    for record in metrics.counted(records):
        key = record.key
        if key not in seen:
            seen.add(key)
            out.append(record)
    reward_setting(out)
    return out


def reward_setting(records: Iterable[EpisodeRecord]) -> Rewards:
    """The one reward setting ``records`` were played under (the defaults for none); records
    under several are an error: their rewards are different quantities."""
    counts = Counter(r.rewards for r in records)
    if len(counts) > 1:
        found = "; ".join(f"{rewards.describe()} ({n} episodes)" for rewards, n in counts.items())
        raise ValueError(
            f"these episodes were played under {len(counts)} reward settings ({found}); rewards "
            "under different settings are never pooled: rate one setting at a time (arena "
            "ratings --tournament NAME), or store each setting in its own database"
        )
    return next(iter(counts), DEFAULT_REWARDS)


def _play_order(records: Iterable[EpisodeRecord]) -> list[EpisodeRecord]:
    """Distinct counted episodes sorted stably by scenario (seed, index)."""
    return sorted(distinct_episodes(records), key=lambda r: (r.scenario.seed, r.scenario.index))


def _outcome(x: float, y: float) -> float:
    if abs(x - y) <= TIE_TOLERANCE:
        return 0.5
    return 1.0 if x > y else 0.0


def _paired(
    items: Iterable[tuple[tuple[Any, ...], str, float, tuple[int, int]]],
) -> list[Comparison]:
    """Comparisons between players that share a pairing key; ``items`` are (key, player, value,
    scenario) in play order. A player's first value under a key counts, repeats are ignored."""
    groups: dict[tuple[Any, ...], dict[str, float]] = {}
    out = []
    for key, player, value, scenario in items:
        group = groups.setdefault(key, {})
        if player in group:
            continue
        for other, other_value in group.items():
            if player < other:
                out.append(Comparison(player, other, _outcome(value, other_value), scenario))
            else:
                out.append(Comparison(other, player, _outcome(other_value, value), scenario))
        group[player] = value
    return out


def _scenario(record: EpisodeRecord) -> tuple[int, int]:
    return (record.scenario.seed, record.scenario.index)


def _base_key(record: EpisodeRecord) -> tuple[Any, ...]:
    sc = record.scenario
    return (record.preset, record.env_version, sc.seed, sc.index)


def comparisons(
    records: Iterable[EpisodeRecord], role: str, buyer_entries: BuyerEntries | None = None
) -> list[Comparison]:
    """Every comparison of ``role`` in play order; players are :func:`player_id` names."""
    check_role(role)
    ordered = _play_order(records)
    if role == "seller":
        return _paired(
            (
                (*_base_key(r), tuple(r.buyers)),
                player_id("seller", r.seller),
                r.result.seller_reward,
                _scenario(r),
            )
            for r in ordered
        )
    if role == "buyer":
        return _paired(
            (
                (*_base_key(r), r.seller),
                player_id("buyer", label),
                episode_buyer_side_reward(r),
                _scenario(r),
            )
            for r in ordered
            for label in buyer_entries_of(r, buyer_entries)
        )
    out = []
    for r in ordered:
        score = episode_cross_score(r)
        if score is None:
            raise AssertionError("error episodes are filtered out before scoring")
        for label in buyer_entries_of(r, buyer_entries):
            out.append(
                Comparison(
                    player_id("seller", r.seller), player_id("buyer", label), score, _scenario(r)
                )
            )
    return out


def check_role(role: str) -> None:
    if role not in RATING_ROLES:
        raise ValueError(f"role must be one of {', '.join(RATING_ROLES)}; got {role!r}")
