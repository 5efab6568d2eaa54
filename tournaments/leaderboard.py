"""Leaderboards from stored episodes: ratings of the paired comparisons, and the paper's metrics.

Everything here is a pure function of a list of :class:`EpisodeRecord` (what
:func:`tournaments.store.load_records` returns), so ``arena ratings`` and ``arena report`` always
show the same numbers for the same database. docs/tournaments.md states every definition; the
comparisons themselves (rating roles, buyer entries, play order) are
:mod:`tournaments.comparisons`.

Ratings are anchored: one reference agent, by default the first scripted agent of the role, is
pinned at the initial rating (:func:`default_anchor`), so ratings from growing sets of episodes,
a league's generations for one, stay on one scale.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from agents.specs import is_scripted
from arena import metrics
from arena.buyer_metrics import buyer_surplus_extractions, episode_buyer_side_reward
from arena.estimates import estimate
from arena.metrics import episode_cross_score
from arena.records import EpisodeRecord
from arena.settings import check_positive_int
from tournaments.comparisons import (
    BuyerEntries,
    buyer_entries_of,
    check_role,
    comparisons,
    distinct_episodes,
    lineup_label,
    player_id,
    split_player,
)
from tournaments.config import pool_label
from tournaments.ratings import RatingConfig, bradley_terry_ratings, elo_ratings
from tournaments.store import Store

SELLER_GROUPS = frozenset({metrics.LEADERBOARD, metrics.MULTI_PRODUCT})
"""Registry groups whose metrics appear on seller rows."""

BUYER_COLUMNS: tuple[tuple[str, str], ...] = (
    ("buyer_surplus_extraction", "Buyer Surplus"),
    ("seller_reward", "Seller Reward"),
)
"""Buyer-entry row values besides reward and deal rate, (row key, header)."""


USAGE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("tokens_per_episode", "Tokens/Ep"),
    ("cost_per_1k_episodes", "$/1k Ep"),
)
"""Model usage columns, on rows that :func:`tournaments.usage.add_usage` filled."""


def columns() -> list[tuple[str, str]]:
    """Metric columns of :func:`render_table`, (row key, header): the registry's seller metrics
    that have a short header (multi-product ones included), the buyer columns, the cross score,
    the model usage. A row without the key shows blank."""
    shown = [m for m in metrics.METRICS.values() if m.short and m.groups & SELLER_GROUPS]
    return [
        *((m.name, m.short) for m in shown),
        *BUYER_COLUMNS,
        ("cross_score", "Cross Score"),
        *USAGE_COLUMNS,
    ]


def _finite(x: float) -> float | None:
    return None if math.isnan(x) else x


def seller_metrics(records: Sequence[EpisodeRecord]) -> dict[str, Any]:
    """The paper's per-seller metrics as plain means (None when undefined) for a row."""
    shown = metrics.group(metrics.LEADERBOARD)
    if any(r.scenario.num_products > 1 for r in records):
        shown += metrics.group(metrics.MULTI_PRODUCT)
    row: dict[str, Any] = {m.name: m.over(records).value for m in shown}
    row["deal_buyer_rank_distribution"] = metrics.deal_buyer_rank_distribution(records)
    return row


def buyer_metrics(records: Sequence[EpisodeRecord]) -> dict[str, Any]:
    """Per-buyer-entry metrics: the side's reward (mean over slots, under the market's buyer
    reward), deal rate, the closing buyers' surplus extraction (Table 12's metric from prices,
    whatever the reward; Section 13.2) and the seller reward conceded."""
    counted = metrics.counted(records)
    surplus = (v for r in counted for _, v in buyer_surplus_extractions(r))
    return {
        "reward": estimate(episode_buyer_side_reward(r) for r in counted).value,
        "deal_rate": metrics.METRICS["deal_rate"].over(counted).value,
        "buyer_surplus_extraction": estimate(surplus).value,
        "seller_reward": metrics.METRICS["reward"].over(counted).value,
    }


def players_and_episodes(
    records: Sequence[EpisodeRecord], role: str, buyer_entries: BuyerEntries | None
) -> dict[str, list[EpisodeRecord]]:
    """Every player of ``role`` (cross: both roles) with its counted episodes: the episodes
    its leaderboard row summarises."""
    episodes: dict[str, list[EpisodeRecord]] = {}
    for r in distinct_episodes(records):
        if role in ("seller", "cross"):
            episodes.setdefault(player_id("seller", r.seller), []).append(r)
        if role in ("buyer", "cross"):
            for label in buyer_entries_of(r, buyer_entries):
                episodes.setdefault(player_id("buyer", label), []).append(r)
    return episodes


AUTO = "auto"
"""``anchor=AUTO``: pin the role's first scripted agent (:func:`default_anchor`)."""


def default_anchor(role: str, sellers: Sequence[str], entries: Sequence[str]) -> str | None:
    """The agent pinned at the initial rating by default: the first scripted seller (seller
    and cross boards) or the first buyer entry made of scripted specs only (buyer board); None
    when there is none (the ratings then average the initial rating)."""
    if role in ("seller", "cross"):
        found = next((s for s in sellers if is_scripted(s)), None)
        if found is not None or role == "seller":
            return found
    return next((e for e in entries if all(is_scripted(s) for s in e.split("|"))), None)


def anchor_player(
    records: Sequence[EpisodeRecord],
    role: str,
    anchor: str | None,
    buyer_entries: BuyerEntries | None = None,
) -> str | None:
    """The rating player named by ``anchor``: a spec (seller) or entry label (buyer; a cross
    board takes a seller if one has that name), :data:`AUTO` for :func:`default_anchor` over
    the sellers and entries in order of appearance, None for no anchor."""
    if anchor == AUTO:
        sellers = list(dict.fromkeys(r.seller for r in records))
        if buyer_entries:
            entries = [pool_label(pool) for pool in buyer_entries]
        else:
            entries = list(dict.fromkeys(lineup_label(r.buyers) for r in records))
        anchor = default_anchor(role, sellers, entries)
    if anchor is None:
        return None
    if role == "buyer" or (role == "cross" and not any(r.seller == anchor for r in records)):
        return player_id("buyer", anchor)
    return player_id("seller", anchor)


def _pinning(config: RatingConfig, player: str | None) -> RatingConfig:
    return config if player is None else dataclasses.replace(config, anchor=player)


def leaderboard(
    records: Iterable[EpisodeRecord],
    role: str,
    config: RatingConfig = RatingConfig(),
    buyer_entries: BuyerEntries | None = None,
    anchor: str | None = AUTO,
) -> list[dict[str, Any]]:
    """Leaderboard rows, best first: Bradley-Terry rating with bootstrap interval, online Elo,
    comparison counts and the role's metrics.

    ``anchor`` pins one player at ``config.initial`` (:func:`anchor_player`; by default the
    role's first scripted agent), so ratings from growing record sets compare; None centres the
    ratings on ``config.initial`` instead.

    Keys: ``agent`` (spec or entry label), ``role``, ``rating``, ``ci_low``, ``ci_high``,
    ``games`` (comparisons), ``wins`` (score sum), ``elo``, ``anchor`` (the pinned player),
    ``episodes``, then the metrics (:func:`seller_metrics` or :func:`buyer_metrics`; cross rows
    add ``cross_score``, the mean score from the player's side). Every value is JSON-ready:
    undefined numbers are None, e.g. the rating of a player with no comparison, or the bounds
    when ``config.bootstrap_rounds`` is 0.
    """
    check_role(role)
    records = list(records)
    comps = comparisons(records, role, buyer_entries)
    fitted: dict[str, Any] = {}
    elo: dict[str, float] = {}
    players = {c.a for c in comps} | {c.b for c in comps}
    pinned = anchor_player(records, role, anchor, buyer_entries)
    if anchor == AUTO and pinned not in players:
        pinned = None  # a default anchor that never played pins nothing; a named one is refused
    if len(players) >= 2:
        config = _pinning(config, pinned)
        a, b, score = [c.a for c in comps], [c.b for c in comps], [c.score for c in comps]
        fitted = {row.player: row for row in bradley_terry_ratings(a, b, score, config)}
        elo = elo_ratings(a, b, score, config)
    rows = []
    for player, episodes in players_and_episodes(records, role, buyer_entries).items():
        kind, agent = split_player(player)
        fit = fitted.get(player)
        row: dict[str, Any] = {
            "agent": agent,
            "role": kind,
            "rating": None if fit is None else fit.rating,
            "ci_low": None if fit is None else _finite(fit.ci_low),
            "ci_high": None if fit is None else _finite(fit.ci_high),
            "games": 0 if fit is None else fit.games,
            "wins": 0.0 if fit is None else fit.wins,
            "elo": elo.get(player),
            "anchor": fit is not None and player == pinned,
            "episodes": len(episodes),
        }
        row.update(seller_metrics(episodes) if kind == "seller" else buyer_metrics(episodes))
        if role == "cross":
            scores = [s for s in (episode_cross_score(r) for r in episodes) if s is not None]
            if kind == "buyer":
                scores = [1.0 - s for s in scores]
            row["cross_score"] = estimate(scores).value
        rows.append(row)
    return sorted(rows, key=_rank_key)


def _rank_key(row: dict[str, Any]) -> tuple[Any, ...]:
    rated = row["rating"] is not None
    return (not rated, -row["rating"] if rated else 0.0, row["role"], row["agent"])


def ratings_over_time(
    records: Iterable[EpisodeRecord],
    role: str,
    points: int = 10,
    config: RatingConfig = RatingConfig(),
    buyer_entries: BuyerEntries | None = None,
    anchor: str | None = AUTO,
) -> dict[str, Any]:
    """Bradley-Terry ratings fitted on growing prefixes of the scenario list, for a plot.

    The scenarios that produced comparisons are sorted by (seed, index) and cut at ``points``
    evenly spaced prefix lengths; each prefix gets a fit without bootstrap, with the
    leaderboard's anchor pinned once it has played (before that, centred). Returns
    ``{"role", "scenarios": [prefix lengths], "series": [{"agent", "role", "ratings"}]}``; a
    rating is None while the player has no comparison (or fewer than two players have one).
    """
    check_role(role)
    check_positive_int("", "points", points)
    records = list(records)
    comps = comparisons(records, role, buyer_entries)
    pinned = anchor_player(records, role, anchor, buyer_entries)
    scenarios = sorted({c.scenario for c in comps})
    position = {s: k for k, s in enumerate(scenarios)}
    cuts = sorted({math.ceil(len(scenarios) * (k + 1) / points) for k in range(points)} - {0})
    players = sorted({c.a for c in comps} | {c.b for c in comps})
    series: dict[str, list[float | None]] = {p: [] for p in players}
    quick = dataclasses.replace(config, bootstrap_rounds=0)
    for cut in cuts:
        prefix = [c for c in comps if position[c.scenario] < cut]
        present = {c.a for c in prefix} | {c.b for c in prefix}
        fitted: dict[str, float] = {}
        if len(present) >= 2:
            fit = _pinning(quick, pinned if pinned in present else None)
            rows = bradley_terry_ratings(
                [c.a for c in prefix], [c.b for c in prefix], [c.score for c in prefix], fit
            )
            fitted = {row.player: row.rating for row in rows}
        for p in players:
            series[p].append(fitted.get(p))
    return {
        "role": role,
        "scenarios": cuts,
        "series": [
            {"agent": split_player(p)[1], "role": split_player(p)[0], "ratings": series[p]}
            for p in players
        ],
    }


def payoff_matrix(
    records: Iterable[EpisodeRecord], buyer_entries: BuyerEntries | None = None
) -> dict[str, Any]:
    """Mean seller reward of every (seller, buyer entry) pairing, for the heatmap.

    ``{"sellers": [...], "buyers": [...], "mean_seller_reward": rows x columns (None where the
    pairing has no episode), "episodes": same shape}``; sellers and entries sorted by name.
    """
    cells: dict[tuple[str, str], list[float]] = {}
    for r in distinct_episodes(records):
        for label in buyer_entries_of(r, buyer_entries):
            cells.setdefault((r.seller, label), []).append(r.result.seller_reward)
    sellers = sorted({s for s, _ in cells})
    buyers = sorted({b for _, b in cells})
    means = [[estimate(cells.get((s, b), ())).value for b in buyers] for s in sellers]
    counts = [[len(cells.get((s, b), ())) for b in buyers] for s in sellers]
    return {"sellers": sellers, "buyers": buyers, "mean_seller_reward": means, "episodes": counts}


def stored_lineups(
    db: str | Path, tournament: str | None = None
) -> tuple[list[str], list[tuple[str, ...]]]:
    """The sellers and the buyer entries of the tournaments stored in ``db`` (or of the one
    named), each once, in storage and config order: the entries make pool episodes count for
    their pool, and both give the default rating anchor (:func:`default_anchor`). The file is
    opened read-only."""
    with Store.open(db, read_only=True) as store:
        if tournament is None:
            rows = store.db.execute("SELECT config FROM tournaments ORDER BY id").fetchall()
        else:
            rows = store.db.execute(
                "SELECT config FROM tournaments WHERE name = ?", [tournament]
            ).fetchall()
            if not rows:
                raise KeyError(f"no tournament named {tournament!r} in {db}")
    sellers: dict[str, None] = {}
    entries: dict[tuple[str, ...], None] = {}
    for (text,) in rows:
        config = json.loads(text)
        for seller in config.get("sellers", ()):
            sellers.setdefault(seller, None)
        for entry in config.get("buyers", ()):
            pool = (entry,) if isinstance(entry, str) else tuple(entry)
            entries.setdefault(pool, None)
    return list(sellers), list(entries)


def stored_buyer_entries(db: str | Path, tournament: str | None = None) -> list[tuple[str, ...]]:
    """The buyer entries of :func:`stored_lineups`: pass them as ``buyer_entries`` so pool
    episodes count for their pool."""
    return stored_lineups(db, tournament)[1]


def stored_anchor(db: str | Path, role: str, tournament: str | None = None) -> str | None:
    """The default anchor of a stored database: the role's first scripted agent in the order
    the tournaments list them (:func:`default_anchor`)."""
    sellers, entries = stored_lineups(db, tournament)
    return default_anchor(role, sellers, [pool_label(e) for e in entries])


def stored_names(db: str | Path) -> dict[tuple[str, str], str]:
    """The names agents were registered under, by (spec, role), where a name was given (a
    league's ``base`` and ``gen-3-seller``); the file is opened read-only."""
    with Store.open(db, read_only=True) as store:
        rows = store.db.execute("SELECT spec, role, label FROM agents").fetchall()
    return {(spec, role): label for spec, role, label in rows if label and label != spec}


def add_names(rows: Sequence[dict[str, Any]], names: dict[tuple[str, str], str]) -> None:
    """Give each leaderboard row its registered ``name`` (the spec when none was given), so a
    ratings file can be read by name."""
    for row in rows:
        row["name"] = names.get((row["agent"], row["role"]), row["agent"])


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def render_table(rows: Sequence[dict[str, Any]], title: str | None = None) -> Table:
    """The leaderboard as a rich table: rank, agent, role, rating with interval, Elo, games,
    then the metric columns any row has. Every cell is plain text, never rich markup."""
    table = Table(title=None if title is None else Text(title))
    for header in ("#", "Agent", "Role", "Rating", "CI", "Elo", "Games", "Episodes"):
        table.add_column(header, justify="left" if header in ("Agent", "Role") else "right")
    shown = [(key, header) for key, header in columns() if any(key in row for row in rows)]
    for _, header in shown:
        table.add_column(header, justify="right")
    for rank, row in enumerate(rows, start=1):
        rating = "-" if row["rating"] is None else f"{row['rating']:.0f}"
        if row["ci_low"] is None or row["ci_high"] is None:
            interval = "-"
        else:
            interval = f"[{row['ci_low']:.0f}, {row['ci_high']:.0f}]"
        elo = "-" if row["elo"] is None else f"{row['elo']:.0f}"
        agent = row["agent"] if row.get("name", row["agent"]) == row["agent"] else row["name"]
        cells = [str(rank), agent, row["role"], rating, interval, elo]
        cells += [str(row["games"]), str(row["episodes"])]
        cells += [_fmt(row[key]) if key in row else "" for key, _ in shown]
        table.add_row(*(Text(cell) for cell in cells))
    return table
