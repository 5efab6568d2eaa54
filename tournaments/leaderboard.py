"""Leaderboards from stored episodes: paired comparisons, ratings and the paper's metrics.

Everything here is a pure function of a list of :class:`EpisodeRecord` (what
:func:`tournaments.store.load_records` returns), so ``arena ratings`` and ``arena report`` always
show the same numbers for the same database. docs/tournaments.md states every definition.

Three rating roles:

* ``"seller"``: two sellers that met the same buyer lineup on the same scenario are compared on
  their seller reward (higher wins, equal is a tie). Pairing key: (preset, env version, scenario
  seed, scenario index, the buyer spec of every slot).
* ``"buyer"``: two buyer entries that met the same seller on the same scenario are compared on the
  buyer side's reward, the mean buyer reward over all slots. Pairing key: (preset, env version,
  scenario seed, scenario index, seller spec).
* ``"cross"``: every episode is one game between its seller and its buyer entry, scored by the
  seller's share of the realised gains from trade (:func:`cross_score`), so sellers and buyers
  get ratings on one scale.

A *buyer entry* is what a tournament puts on the buyer side: one spec, or a pool of specs that
each slot draws from with the scenario's own draws (:mod:`tournaments.config`). Records only keep
the spec of every slot, so pass the tournaments' entries as ``buyer_entries`` (see
:func:`stored_buyer_entries`): an episode then counts for every entry whose lineup on that
scenario is the episode's lineup, as the runner plays such an episode once for all of them.
Without ``buyer_entries``, an episode's entry is read off its lineup (:func:`lineup_label`).

Comparisons are taken in play order: scenarios sorted by (seed, index), each pairing having played
them in that order; within a scenario, the given record order. Online Elo and
:func:`ratings_over_time` use that order.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from arena import metrics
from arena.money import cents
from arena.records import EpisodeRecord
from tournaments.config import pool_label
from tournaments.match import buyer_lineup
from tournaments.ratings import RatingConfig, bradley_terry_ratings, elo_ratings

if TYPE_CHECKING:
    from rich.table import Table

ROLES = ("seller", "buyer", "cross")
TIE_TOLERANCE = 1e-9
"""Rewards closer than this are a tie (the same prices give bit-identical rewards anyway)."""

BuyerEntries = Sequence[Sequence[str]]

SELLER_METRICS: tuple[tuple[str, Callable[[list[EpisodeRecord]], metrics.Estimate]], ...] = (
    ("reward", metrics.reward),
    ("deal_rate", metrics.deal_rate),
    ("surplus_extraction_ratio", metrics.surplus_extraction_ratio),
    ("deal_on_top_buyer_rate", metrics.deal_on_top_buyer_rate),
    ("sell_below_cost_error_rate", metrics.sell_below_cost_error_rate),
    ("sell_above_cost_accuracy", metrics.sell_above_cost_accuracy),
    ("distinct_buyers_engaged", metrics.distinct_buyers_engaged),
)
"""Per-seller row metrics (means over the seller's episodes, paper Section 4.1)."""

MULTI_PRODUCT_METRICS: tuple[tuple[str, Callable[[list[EpisodeRecord]], metrics.Estimate]], ...] = (
    ("matching_quality", metrics.matching_quality),
    ("optimal_pair_share", metrics.optimal_pair_share),
    ("deals_per_episode", metrics.deals_per_episode),
)
"""Added to seller rows when the episodes sell several products (issue 6)."""

COLUMNS: tuple[tuple[str, str], ...] = (
    ("reward", "Reward"),
    ("deal_rate", "Deal Rate"),
    ("surplus_extraction_ratio", "Surplus Extr."),
    ("deal_on_top_buyer_rate", "Top Buyer"),
    ("sell_below_cost_error_rate", "Below Cost"),
    ("matching_quality", "Matching"),
    ("optimal_pair_share", "Opt. Pairs"),
    ("deals_per_episode", "Deals/Ep"),
    ("buyer_surplus_extraction", "Buyer Surplus"),
    ("seller_reward", "Seller Reward"),
    ("cross_score", "Cross Score"),
)
"""Metric columns of :func:`render_table`, (row key, header); a row without the key shows blank."""


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
    if not labels:
        sc = record.scenario
        raise ValueError(
            f"the lineup {list(lineup)} of seller {record.seller!r} on scenario (seed {sc.seed}, "
            f"index {sc.index}) matches none of the buyer_entries "
            f"{[pool_label(p) for p in buyer_entries]}; pass the entries of every tournament the "
            "records come from, or buyer_entries=None"
        )
    return list(dict.fromkeys(labels))


def side_buyer_reward(record: EpisodeRecord) -> float:
    """The buyer side's reward in an episode: the mean buyer reward over all slots (buyers
    without a deal count 0, a penalised violator -1; Section 13.2 rewards)."""
    rewards = record.result.buyer_rewards
    return math.fsum(rewards) / len(rewards)


def cross_score(record: EpisodeRecord) -> float | None:
    """The seller's score against the buyer side, in [0, 1]; None for an "error" episode.

    A seller violation scores 0 and a (penalised) buyer violation 1; a no-deal is a draw, 0.5.
    A deal at price P with the dealt buyer's budget B and cost C scores the seller's share of the
    realised gains from trade, clip((P - C) / (B - C), 0, 1), averaged over the episode's deals;
    when B <= C there are no gains to share and the seller took everything: 1.
    """
    res = record.result
    if res.outcome == "error":
        return None
    if res.violation_by is not None:
        return 0.0 if res.violation_by == "seller" else 1.0
    if not res.deals:
        return 0.5
    shares = []
    for deal in res.deals:
        cost = record.scenario.products[deal.product].cost
        budget = record.scenario.valuations[deal.buyer][deal.product]
        if cents(budget) <= cents(cost):
            shares.append(1.0)
        else:
            shares.append(min(1.0, max(0.0, (deal.price - cost) / (budget - cost))))
    return math.fsum(shares) / len(shares)


def episode_identity(record: EpisodeRecord) -> tuple[Any, ...]:
    """What makes two records the same match: (preset, env version, seller, buyer spec per
    slot, scenario seed, scenario index)."""
    sc = record.scenario
    return (
        record.preset,
        record.env_version,
        record.seller,
        tuple(record.buyers),
        sc.seed,
        sc.index,
    )


def distinct_episodes(records: Iterable[EpisodeRecord]) -> list[EpisodeRecord]:
    """Counted episodes (every outcome but "error"), each :func:`episode_identity` once (the
    first): a match stored twice, e.g. by a pool and a fixed entry that drew the same lineup in
    separate ``play_many`` calls, counts once."""
    seen: set[tuple[Any, ...]] = set()
    out = []
    for record in metrics.counted(records):
        key = episode_identity(record)
        if key not in seen:
            seen.add(key)
            out.append(record)
    return out


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
    _check_role(role)
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
                side_buyer_reward(r),
                _scenario(r),
            )
            for r in ordered
            for label in buyer_entries_of(r, buyer_entries)
        )
    out = []
    for r in ordered:
        score = cross_score(r)
        if score is None:
            raise AssertionError("error episodes are filtered out before scoring")
        for label in buyer_entries_of(r, buyer_entries):
            out.append(
                Comparison(
                    player_id("seller", r.seller), player_id("buyer", label), score, _scenario(r)
                )
            )
    return out


def _check_role(role: str) -> None:
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}; got {role!r}")


def _value(estimate: metrics.Estimate) -> float | None:
    """A metric mean for a JSON row: None when undefined (no applicable episode)."""
    return None if estimate.n == 0 or math.isnan(estimate.mean) else estimate.mean


def _finite(x: float) -> float | None:
    return None if math.isnan(x) else x


def seller_metrics(records: Sequence[EpisodeRecord]) -> dict[str, Any]:
    """The paper's per-seller metrics as plain means (None when undefined) for a row."""
    row: dict[str, Any] = {name: _value(fn(list(records))) for name, fn in SELLER_METRICS}
    if any(r.scenario.num_products > 1 for r in records):
        row |= {name: _value(fn(list(records))) for name, fn in MULTI_PRODUCT_METRICS}
    row["deal_buyer_rank_distribution"] = metrics.deal_buyer_rank_distribution(records)
    return row


def buyer_metrics(records: Sequence[EpisodeRecord]) -> dict[str, Any]:
    """Per-buyer-entry metrics: the side's reward (mean over slots), deal rate, the closing
    buyers' surplus extraction (Section 13.2) and the seller reward conceded."""
    counted = metrics.counted(records)
    return {
        "reward": _value(metrics.estimate(side_buyer_reward(r) for r in counted)),
        "deal_rate": _value(metrics.deal_rate(counted)),
        "buyer_surplus_extraction": _value(metrics.buyer_reward(counted)),
        "seller_reward": _value(metrics.reward(counted)),
    }


def _players_and_episodes(
    records: Sequence[EpisodeRecord], role: str, buyer_entries: BuyerEntries | None
) -> dict[str, list[EpisodeRecord]]:
    """Every player of ``role`` (cross: both roles) with its counted episodes."""
    episodes: dict[str, list[EpisodeRecord]] = {}
    for r in distinct_episodes(records):
        if role in ("seller", "cross"):
            episodes.setdefault(player_id("seller", r.seller), []).append(r)
        if role in ("buyer", "cross"):
            for label in buyer_entries_of(r, buyer_entries):
                episodes.setdefault(player_id("buyer", label), []).append(r)
    return episodes


def leaderboard(
    records: Iterable[EpisodeRecord],
    role: str,
    config: RatingConfig = RatingConfig(),
    buyer_entries: BuyerEntries | None = None,
) -> list[dict[str, Any]]:
    """Leaderboard rows, best first: Bradley-Terry rating with bootstrap interval, online Elo,
    comparison counts and the role's metrics.

    Keys: ``agent`` (spec or entry label), ``role``, ``rating``, ``ci_low``, ``ci_high``,
    ``games`` (comparisons), ``wins`` (score sum), ``elo``, ``episodes``, then the metrics
    (:func:`seller_metrics` or :func:`buyer_metrics`; cross rows add ``cross_score``, the mean
    score from the player's side). Every value is JSON-ready: undefined numbers are None, e.g.
    the rating of a player with no comparison, or the bounds when ``config.bootstrap_rounds`` is 0.
    """
    _check_role(role)
    records = list(records)
    comps = comparisons(records, role, buyer_entries)
    fitted: dict[str, Any] = {}
    elo: dict[str, float] = {}
    if len({c.a for c in comps} | {c.b for c in comps}) >= 2:
        a, b, score = [c.a for c in comps], [c.b for c in comps], [c.score for c in comps]
        fitted = {row.player: row for row in bradley_terry_ratings(a, b, score, config)}
        elo = elo_ratings(a, b, score, config)
    rows = []
    for player, episodes in _players_and_episodes(records, role, buyer_entries).items():
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
            "episodes": len(episodes),
        }
        row.update(seller_metrics(episodes) if kind == "seller" else buyer_metrics(episodes))
        if role == "cross":
            scores = [s for s in (cross_score(r) for r in episodes) if s is not None]
            if kind == "buyer":
                scores = [1.0 - s for s in scores]
            row["cross_score"] = _value(metrics.estimate(scores))
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
) -> dict[str, Any]:
    """Bradley-Terry ratings fitted on growing prefixes of the scenario list, for a plot.

    The scenarios that produced comparisons are sorted by (seed, index) and cut at ``points``
    evenly spaced prefix lengths; each prefix gets a fit without bootstrap. Returns
    ``{"role", "scenarios": [prefix lengths], "series": [{"agent", "role", "ratings"}]}``; a
    rating is None while the player has no comparison (or fewer than two players have one).
    """
    _check_role(role)
    if not isinstance(points, int) or isinstance(points, bool) or points < 1:
        raise ValueError(f"points must be an integer >= 1; got {points!r}")
    comps = comparisons(records, role, buyer_entries)
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
            rows = bradley_terry_ratings(
                [c.a for c in prefix], [c.b for c in prefix], [c.score for c in prefix], quick
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
    means = [[_value(metrics.estimate(cells.get((s, b), ()))) for b in buyers] for s in sellers]
    counts = [[len(cells.get((s, b), ())) for b in buyers] for s in sellers]
    return {"sellers": sellers, "buyers": buyers, "mean_seller_reward": means, "episodes": counts}


def stored_buyer_entries(db: str | Path, tournament: str | None = None) -> list[tuple[str, ...]]:
    """The buyer entries of the tournaments stored in ``db`` (or of the one named), each once,
    in storage order: pass them as ``buyer_entries`` so pool episodes count for their pool."""
    from tournaments.store import Store

    if not Path(db).is_file():
        raise FileNotFoundError(f"results database {db} does not exist")
    with Store.open(db) as store:
        if tournament is None:
            rows = store.db.execute("SELECT config FROM tournaments ORDER BY id").fetchall()
        else:
            rows = store.db.execute(
                "SELECT config FROM tournaments WHERE name = ?", [tournament]
            ).fetchall()
            if not rows:
                raise KeyError(f"no tournament named {tournament!r} in {db}")
    entries: dict[tuple[str, ...], None] = {}
    for (text,) in rows:
        config = json.loads(text)
        for entry in config.get("buyers", ()):
            pool = (entry,) if isinstance(entry, str) else tuple(entry)
            entries.setdefault(pool, None)
    return list(entries)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def render_table(rows: Sequence[dict[str, Any]], title: str | None = None) -> Table:
    """The leaderboard as a rich table: rank, agent, role, rating with interval, Elo, games,
    then the metric columns any row has."""
    from rich.table import Table

    table = Table(title=title)
    for header in ("#", "Agent", "Role", "Rating", "CI", "Elo", "Games", "Episodes"):
        table.add_column(header, justify="left" if header in ("Agent", "Role") else "right")
    shown = [(key, header) for key, header in COLUMNS if any(key in row for row in rows)]
    for _, header in shown:
        table.add_column(header, justify="right")
    for rank, row in enumerate(rows, start=1):
        rating = "-" if row["rating"] is None else f"{row['rating']:.0f}"
        if row["ci_low"] is None or row["ci_high"] is None:
            interval = "-"
        else:
            interval = f"[{row['ci_low']:.0f}, {row['ci_high']:.0f}]"
        elo = "-" if row["elo"] is None else f"{row['elo']:.0f}"
        cells = [str(rank), row["agent"], row["role"], rating, interval, elo]
        cells += [str(row["games"]), str(row["episodes"])]
        cells += [_fmt(row[key]) if key in row else "" for key, _ in shown]
        table.add_row(*cells)
    return table
