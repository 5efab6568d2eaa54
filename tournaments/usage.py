"""Model tokens and their cost: per episode and agent, for leaderboards, pairings and reports.

Every seat's prompt and completion tokens of an episode are stored in ``episode_usage``
(:mod:`tournaments.schema`); :func:`stored_usage` reads them by episode key, so they join the
records a leaderboard is computed from. A player's tokens per episode are the mean, over the
episodes its leaderboard row counts, of its side's tokens: the seller seat for a seller, every
buyer seat for a buyer entry. With a price table (``--price SPEC=IN,OUT``, dollars per million
prompt and completion tokens) the cost is priced seat by seat with the seat's agent's prices,
and shown per thousand episodes; a seat that used tokens without a price makes the cost unknown
(None). Scripted agents use no tokens and cost nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arena.records import EpisodeKey, EpisodeRecord
from arena.seats import SELLER
from tournaments.comparisons import BuyerEntries, player_id
from tournaments.leaderboard import players_and_episodes
from tournaments.store import KEY_COLUMNS, Store, stored_key

SeatUsage = dict[str, tuple[str, int, int]]
"""seat -> (agent spec, prompt tokens, completion tokens) of one episode."""
Usage = Mapping[EpisodeKey, SeatUsage]


@dataclass(frozen=True)
class Price:
    """Dollars per million tokens."""

    prompt: float
    completion: float

    def cost(self, tokens_in: int, tokens_out: int) -> float:
        return (tokens_in * self.prompt + tokens_out * self.completion) / 1e6


def parse_prices(texts: Iterable[str]) -> dict[str, Price]:
    """``["openai:gpt-4o-mini=0.15,0.60"]`` -> spec -> :class:`Price` (``--price``)."""
    prices: dict[str, Price] = {}
    for text in texts:
        spec, sep, numbers = text.rpartition("=")
        parts = numbers.split(",")
        try:
            values = [float(p) for p in parts]
        except ValueError:
            values = []
        if (
            not sep
            or not spec.strip()
            or len(values) != 2
            or not all(math.isfinite(v) and v >= 0 for v in values)
        ):
            raise ValueError(f"--price {text!r} must look like SPEC=IN,OUT with dollars per "
                             "million prompt and completion tokens, e.g. "
                             "openai:gpt-4o-mini=0.15,0.60")  # fmt: skip
        prices[spec.strip()] = Price(*values)
    return prices


def stored_usage(
    db: str | Path | Store, tournament: str | None = None
) -> dict[EpisodeKey, SeatUsage]:
    """The tokens of every stored episode (replays left out) that used a model, by key; an
    episode stored twice counts its first copy, as the leaderboards do."""
    if not isinstance(db, Store):
        with Store.open(db) as store:
            return stored_usage(store, tournament)
    where, params = "e.parent_id IS NULL", []
    if tournament is not None:
        where += " AND e.tournament_id = (SELECT id FROM tournaments WHERE name = ?)"
        params.append(tournament)
    rows = db.db.execute(
        f"SELECT e.id, u.seat, u.agent, u.tokens_in, u.tokens_out, {KEY_COLUMNS} FROM "
        f"episode_usage u JOIN episodes e ON e.id = u.episode_id WHERE {where} ORDER BY e.id",
        params,
    )
    usage: dict[EpisodeKey, SeatUsage] = {}
    first: dict[EpisodeKey, int] = {}
    for episode_id, seat, agent, t_in, t_out, *stored in rows:
        key = stored_key(*stored)
        if first.setdefault(key, episode_id) == episode_id:
            usage.setdefault(key, {})[seat] = (agent, t_in, t_out)
    return usage


def check_prices(prices: Mapping[str, Price], usage: Usage) -> None:
    """Every priced spec is an agent that used tokens in the data; a typo is an error."""
    used = sorted({spec for seats in usage.values() for spec, _, _ in seats.values()})
    unknown = sorted(set(prices) - set(used))
    if unknown:
        raise ValueError(f"--price names {', '.join(unknown)}, which used no tokens here; agents "
                         f"with tokens: {', '.join(used) or 'none'}")  # fmt: skip


def side_usage(
    seats: SeatUsage, side: str, prices: Mapping[str, Price]
) -> tuple[int, float | None]:
    """(tokens, cost or None) of one side of an episode: ``seller``, ``buyer`` or ``both``."""
    tokens, cost = 0, 0.0
    for seat, (spec, t_in, t_out) in seats.items():
        if side != "both" and (seat == SELLER) != (side == SELLER):
            continue
        tokens += t_in + t_out
        price = prices.get(spec)
        if price is None:
            if t_in or t_out:
                cost = math.nan
        else:
            cost += price.cost(t_in, t_out)
    return tokens, None if math.isnan(cost) else cost


def usage_summary(
    records: Sequence[EpisodeRecord], usage: Usage, side: str, prices: Mapping[str, Price]
) -> dict[str, Any]:
    """``tokens_per_episode`` (rounded) and ``cost_per_1k_episodes`` (None if unknown) of one
    side over ``records``."""
    tokens, cost = 0, 0.0
    for record in records:
        t, c = side_usage(usage.get(record.key, {}), side, prices)
        tokens += t
        cost = math.nan if c is None else cost + c
    n = max(len(records), 1)
    return {
        "tokens_per_episode": round(tokens / n),
        "cost_per_1k_episodes": None if math.isnan(cost) else 1000 * cost / n,
    }


def add_usage(
    rows: Sequence[dict[str, Any]],
    records: Sequence[EpisodeRecord],
    role: str,
    buyer_entries: BuyerEntries | None,
    usage: Usage,
    prices: Mapping[str, Price],
) -> None:
    """Add ``tokens_per_episode`` and ``cost_per_1k_episodes`` to leaderboard rows of ``role``
    (over the episodes each row counts); nothing when no episode used a model and no price is
    given."""
    if not usage and not prices:
        return
    by_player = players_and_episodes(records, role, buyer_entries)
    for row in rows:
        episodes = by_player.get(player_id(row["role"], row["agent"]), [])
        row.update(usage_summary(episodes, usage, row["role"], prices))
