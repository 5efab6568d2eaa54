"""Counterfactual replays of stored episodes (``arena replay``): what if another agent had taken
a seat after turn k?

Each stored episode is replayed exactly through turn ``k`` (:mod:`agents.counterfactual` defines
turns and checks the prefix), the chosen seats go to their new agents, the kept seats to their
original agents in the state they had, and the batched engine plays the rest
(:func:`agents.engine.drive_episodes`, so LLM takeovers of many episodes share batches). The
result puts the original and the counterfactual outcome side by side; over many episodes,
:func:`paired_summary` gives the mean reward difference with a paired 95% interval.

Stored counterfactuals (:func:`store_counterfactuals`) go to a tournament of their own, ``replays
of <tournament>``, each with ``parent_id`` (the episode it branched from) and ``from_turn``; they
are left out of ratings and reports unless that tournament is named: a replay is no match of
its players.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents import check_spec
from agents.counterfactual import mismatches, prefix_length, start_counterfactual
from agents.driver import Episode
from agents.engine import drive_episodes
from arena.estimates import estimate
from arena.records import EpisodeRecord
from arena.seats import SELLER, buyer_index, buyer_seat
from tournaments.episodes import (
    EpisodeFilter,
    StoredEpisode,
    list_episodes,
    load_episodes,
    stored_market,
)
from tournaments.rows import encode_episode
from tournaments.schema import ADD_USAGE, EPISODE_COLUMNS, TURN_COLUMNS, payoff
from tournaments.store import ADD_PAYOFF, Store

Z95 = 1.959963984540054
"""The normal quantile of a two-sided 95% interval."""


@dataclass(frozen=True)
class Takeover:
    """Which seats go to which agents, after which turn."""

    from_turn: int = field(
        metadata={
            "help": "Replay the recorded messages through this seller turn (0: the buyers' "
            "openings only); the new agents play from the next turn on."
        }
    )
    seller: str | None = field(default=None, metadata={"help": "The seller's new agent spec."})
    buyers: tuple[tuple[int, str], ...] = field(
        default=(),
        metadata={"help": "(buyer number, spec): the new agent of buyer_<number>."},
    )

    def __post_init__(self) -> None:
        if isinstance(self.from_turn, bool) or not isinstance(self.from_turn, int):
            raise ValueError(f"from_turn must be an integer >= 0; got {self.from_turn!r}")
        if self.from_turn < 0:
            raise ValueError(f"from_turn must be >= 0 (0: after the openings); got "
                             f"{self.from_turn}")  # fmt: skip
        if self.seller is None and not self.buyers:
            raise ValueError("name a new agent for the seller or for a buyer (--seller SPEC, "
                             "--buyer 2=SPEC)")  # fmt: skip
        numbers = [n for n, _ in self.buyers]
        if any(n < 1 for n in numbers) or len(set(numbers)) != len(numbers):
            raise ValueError(f"buyer numbers must be distinct and >= 1; got {numbers}")
        if self.seller is not None:
            check_spec(self.seller, "seller", "--seller")
        for number, spec in self.buyers:
            check_spec(spec, "buyer", f"--buyer {number}")

    def seats(self) -> dict[str, str]:
        """seat -> new agent spec."""
        taken = {} if self.seller is None else {SELLER: self.seller}
        taken.update({buyer_seat(n - 1): spec for n, spec in self.buyers})
        return taken

    @property
    def seat(self) -> str:
        """The seat whose reward is compared: the seller's when it is taken over, else the
        first buyer's taken over."""
        return SELLER if self.seller is not None else buyer_seat(min(self.buyers)[0] - 1)

    def describe(self) -> str:
        return ", ".join(f"{seat}={spec}" for seat, spec in self.seats().items())


def parse_buyer_takeover(text: str) -> tuple[int, str]:
    """``"2=scripted:time"`` -> ``(2, "scripted:time")`` (``--buyer`` on the command line)."""
    number, sep, spec = text.partition("=")
    if not sep or not number.strip().isdigit() or not spec.strip():
        raise ValueError(f"--buyer {text!r} must look like NUMBER=SPEC, e.g. 2=scripted:time")
    return int(number), spec.strip()


def seat_reward(record: EpisodeRecord, seat: str) -> float:
    """The reward of ``seat`` in the episode."""
    if seat == SELLER:
        return record.result.seller_reward
    return record.result.buyer_rewards[buyer_index(seat)]


@dataclass(frozen=True)
class Counterfactual:
    """One stored episode and its counterfactual replay."""

    parent: StoredEpisode
    record: EpisodeRecord
    takeover: Takeover
    replayed: int
    """Recorded messages reproduced exactly before the takeover."""
    mismatches: int
    """Prefix turns where a kept scripted agent would now say something else (0 normally)."""
    stored_id: int | None = None

    @property
    def difference(self) -> float:
        """Counterfactual minus original reward of the compared seat."""
        seat = self.takeover.seat
        return seat_reward(self.record, seat) - seat_reward(self.parent.record, seat)


def replay(
    store: Store,
    episodes: Sequence[StoredEpisode],
    takeover: Takeover,
    max_concurrent: int = 64,
    on_episode: Callable[[EpisodeRecord], None] | None = None,
) -> list[Counterfactual]:
    """Replay every episode with ``takeover``; each must have a seller turn after
    ``takeover.from_turn`` (:func:`replayable` picks those)."""
    markets = {e.tournament_id: stored_market(store, e.tournament_id) for e in episodes}
    seats = takeover.seats()
    lengths = [prefix_length(e.record.result.turns, takeover.from_turn) for e in episodes]
    differing: dict[int, int] = {}

    def start(order: int) -> Episode:
        stored = episodes[order]
        return start_counterfactual(
            markets[stored.tournament_id], stored.record, takeover.from_turn, seats
        )

    def release(order: int, episode: Episode) -> None:
        differing[order] = mismatches(episode)

    records, _ = drive_episodes(len(episodes), start, max_concurrent, on_episode, release)
    return [
        Counterfactual(e, r, takeover, n, differing[i])
        for i, (e, r, n) in enumerate(zip(episodes, records, lengths, strict=True))
    ]


def replayable(episodes: Sequence[StoredEpisode], from_turn: int) -> list[StoredEpisode]:
    """The episodes with a seller turn after ``from_turn`` and their messages stored."""
    return [
        e for e in episodes if e.record.result.turns and e.record.result.seller_turns > from_turn
    ]


def select(store: Store, chosen: EpisodeFilter) -> list[StoredEpisode]:
    """The stored episodes a filter selects, opened (``--episodes-from``)."""
    rows, _ = list_episodes(store, chosen)
    return load_episodes(store, [row.id for row in rows])


def replay_tournament(store: Store, parent_tournament_id: int) -> int:
    """The tournament that holds the replays of a tournament's episodes (created if new)."""
    name, text = store.db.execute(
        "SELECT name, config FROM tournaments WHERE id = ?", [parent_tournament_id]
    ).fetchone()
    parent = json.loads(text)
    config = {"replays_of": name, "preset": parent["preset"], "market": parent.get("market", {})}
    return store.tournament_id(f"replays of {name}", config)


def add_counterfactual(store: Store, tournament_id: int, item: Counterfactual) -> tuple[int, bool]:
    """Store one counterfactual with its turns, usage and payoff, linked to its parent: (its
    id, True). The same replay (parent, turn, players) already stored is kept as it is:
    (the stored one's id, False)."""
    e = encode_episode(item.record)
    columns = ("tournament_id", *EPISODE_COLUMNS, "parent_id", "from_turn")
    row = (tournament_id, *e.row, item.parent.id, item.takeover.from_turn)
    conn = store.db.conn
    try:
        with store.transaction():
            episode_id = conn.execute(
                f"INSERT INTO episodes ({', '.join(columns)}) VALUES "
                f"({', '.join('?' * len(columns))})",
                row,
            ).lastrowid
            conn.executemany(
                f"INSERT INTO turns (episode_id, {', '.join(TURN_COLUMNS)}) "
                f"VALUES ({', '.join('?' * (len(TURN_COLUMNS) + 1))})",
                ((episode_id, *t) for t in e.turns),
            )
            conn.executemany(ADD_USAGE, ((episode_id, *u) for u in e.usage))
            if item.record.result.outcome != "error":
                buyers = e.row[EPISODE_COLUMNS.index("buyers")]
                sums = payoff(item.record)
                conn.execute(ADD_PAYOFF, (tournament_id, item.record.seller, buyers, 1, *sums))
    except sqlite3.IntegrityError:
        found = conn.execute(
            "SELECT id FROM episodes WHERE tournament_id = ? AND parent_id = ? AND from_turn = ? "
            "AND seller = ? AND buyers = ?",
            (tournament_id, item.parent.id, item.takeover.from_turn, item.record.seller,
             e.row[EPISODE_COLUMNS.index("buyers")]),
        ).fetchone()  # fmt: skip
        if found is None:
            raise
        return int(found[0]), False
    return int(episode_id), True  # type: ignore[arg-type]


def store_counterfactuals(
    store: Store, items: Sequence[Counterfactual]
) -> tuple[list[Counterfactual], int]:
    """Store every counterfactual under ``replays of <its parent's tournament>``: the items with
    their stored ids, and how many were new (a replay stored before keeps its first copy)."""
    tournaments: dict[int, int] = {}
    stored, new = [], 0
    for item in items:
        parent_tournament = item.parent.tournament_id
        if parent_tournament not in tournaments:
            tournaments[parent_tournament] = replay_tournament(store, parent_tournament)
        episode_id, added = add_counterfactual(store, tournaments[parent_tournament], item)
        new += added
        stored.append(dataclasses.replace(item, stored_id=episode_id))
    return stored, new


def paired_summary(items: Sequence[Counterfactual], skipped: int = 0) -> dict[str, Any]:
    """Mean rewards of the compared seat before and after, the mean paired difference with its
    standard error and 95% interval (mean +/- 1.96 se of the per-episode differences), and the
    outcome counts; JSON-ready (undefined numbers None)."""
    seat = items[0].takeover.seat if items else SELLER
    original = estimate(seat_reward(i.parent.record, seat) for i in items)
    replayed = estimate(seat_reward(i.record, seat) for i in items)
    diff = estimate(i.difference for i in items)
    low = high = None
    if diff.n >= 2 and math.isfinite(diff.se):
        low, high = diff.mean - Z95 * diff.se, diff.mean + Z95 * diff.se

    def outcomes(records: list[EpisodeRecord]) -> dict[str, int]:
        counts: dict[str, int] = {}
        for r in records:
            counts[r.result.outcome] = counts.get(r.result.outcome, 0) + 1
        return counts

    return {
        "seat": seat,
        "episodes": len(items),
        "skipped": skipped,
        "original_reward": original.value,
        "counterfactual_reward": replayed.value,
        "difference": diff.value,
        "difference_se": diff.se if diff.n >= 2 else None,
        "ci95": None if low is None else [low, high],
        "original_outcomes": outcomes([i.parent.record for i in items]),
        "counterfactual_outcomes": outcomes([i.record for i in items]),
        "mismatches": sum(i.mismatches for i in items),
    }
