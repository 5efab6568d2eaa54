"""Does a league learn? Held-out figures of its checkpoints, paired against the base, and the
learning targets, read back from the league's evaluation episodes.

Every seller of a league (the base, each checkpoint, the scripted sellers) plays the same
held-out scenarios against the same buyer entries, with the same per-request sampling seeds, so
a checkpoint's gain over the base is a mean of paired differences (:func:`paired`); buyers are
paired the same way against the same sellers. ``benchmarks/bench_learning.py`` prints these
figures for one league, and :mod:`leagues.seeds` across the leagues of several seeds.
"""

from __future__ import annotations

import fnmatch
import itertools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from arena.buyer_metrics import episode_buyer_side_reward, episode_buyer_violation
from arena.estimates import estimate
from arena.metrics import episode_deal, episode_deal_on_top_buyer, episode_violation
from arena.records import EpisodeRecord
from leagues.state import league_leaderboard, league_ratings, league_records
from tournaments.store import Store

EpisodeMetric = Callable[[EpisodeRecord], float | None]
FIGURES: dict[str, dict[str, EpisodeMetric]] = {
    "seller": {
        "reward": lambda r: r.result.seller_reward,
        "deal_rate": episode_deal,
        "top_buyer_rate": episode_deal_on_top_buyer,
        "violation_rate": episode_violation,
    },
    "buyer": {
        "reward": episode_buyer_side_reward,
        "deal_rate": episode_deal,
        "top_buyer_rate": episode_deal_on_top_buyer,
        "violation_rate": episode_buyer_violation,
    },
}
"""Held-out figures per role (the top-buyer rate counts deals only). The seller's violation rate
counts every episode a violation ended (its own, or a penalised buyer's: Sec 3.2); the buyer's
only those its own side ended."""

GAIN_TARGET = 0.10
"""The last checkpoint's paired held-out reward gain over its base that counts as learning."""
COEVOLUTION_GAIN_TARGET = 0.05
"""Co-evolution's bar for each lineage (issue 19): the paired gain over the base at two standard
errors, read strictly (gain - 2 SE >= 0.05), since each lineage's opponents also moved."""
VIOLATION_TARGET = 0.10
"""The most held-out violations a trained seller may commit (the paper's Phase 1 ends near 0)."""


def by_agent(records: Sequence[EpisodeRecord], role: str) -> dict[str, dict[tuple, EpisodeRecord]]:
    """Each agent's evaluation episodes, keyed so that two agents' keys pair the same scenario
    and the same opponents: a seller by (scenario, buyer lineup); a buyer (filling every buyer
    seat) by (scenario, seller)."""
    out: dict[str, dict[tuple, EpisodeRecord]] = {}
    for record in records:
        if record.result.outcome == "error":
            continue
        scenario = (record.scenario.seed, record.scenario.index)
        if role == "seller":
            out.setdefault(record.seller, {})[(*scenario, record.buyers)] = record
        elif len(set(record.buyers)) == 1:
            out.setdefault(record.buyers[0], {})[(*scenario, record.seller)] = record
    return out


def paired(
    mine: Mapping[tuple, EpisodeRecord], base: Mapping[tuple, EpisodeRecord], metric: EpisodeMetric
) -> dict[str, float]:
    """An agent's mean of ``metric`` and its gain over the base on the episodes both played
    (where the metric applies to both), each with its standard error."""
    own = estimate(v for v in map(metric, mine.values()) if v is not None)
    diffs = []
    for key, record in mine.items():
        if key in base:
            a, b = metric(record), metric(base[key])
            if a is not None and b is not None:
                diffs.append(a - b)
    gain = estimate(diffs)
    return {"mean": own.mean, "se": own.se, "n": own.n, "gain": gain.mean, "gain_se": gain.se}


def matches(spec: str, label: str, patterns: Sequence[str]) -> bool:
    """Whether an agent, by its spec or its label, matches one of the shell-style
    ``patterns`` (``fnmatch``: ``hf:*`` is every model, ``gen-3-buyer`` one checkpoint)."""
    return any(fnmatch.fnmatchcase(x, p) for p in patterns for x in (spec, label))


def opponent_filter(opponents: Sequence[str], labels: Mapping[str, str]) -> Callable[[str], bool]:
    """Whether an opponent's spec matches ``opponents`` (:func:`matches`, by spec or by its
    label in ``labels``): the one test :func:`facing` and the entry filter of :func:`held_out`
    share."""
    return lambda spec: matches(spec, labels.get(spec, spec), opponents)


def facing(
    records: Sequence[EpisodeRecord], role: str, faced: Callable[[str], bool]
) -> list[EpisodeRecord]:
    """The episodes in which every opponent of ``role`` (a seller's buyers, seat by seat; a
    buyer's seller) passes ``faced`` (:func:`opponent_filter`)."""
    if role == "seller":
        return [r for r in records if all(map(faced, r.buyers))]
    return [r for r in records if faced(r.seller)]


def held_out(
    store: Store,
    league: str,
    role: str = "seller",
    opponents: Sequence[str] = (),
    reference: str = "base",
) -> list[dict[str, Any]]:
    """One row per agent of ``role`` in the league, in generation order (scripted agents
    last): its held-out figures, paired against ``reference`` (the agent of that label or
    spec, or a pattern that matches it alone; by default the base), and its rating after the
    last generation (``rating``, ``ci_low``, ``ci_high``; None where unrated).

    With ``opponents`` (patterns, :func:`matches`) only the episodes facing those opponents
    count, and the ratings are refitted on them with the league's rating settings: how the
    league's sellers fare against, say, another league's trained buyers alone (the hand-off,
    issue 19)."""
    records, entries = league_records(store, league)
    agents = {
        a["spec"]: a
        for a in store.db.query("SELECT spec, label, generation FROM agents WHERE role = ?", [role])
    }
    labels = {spec: a["label"] for spec, a in agents.items()}
    if opponents:
        others = store.db.query("SELECT spec, label FROM agents WHERE role != ?", [role])
        faced = opponent_filter(opponents, {a["spec"]: a["label"] for a in others})
        records = facing(records, role, faced)
        if role == "seller":  # the buyer entries faced; a buyer board keeps its entries
            entries = [e for e in entries if all(map(faced, e))]
        if not records:
            raise ValueError(
                f"no held-out episode of league {league!r} faces opponents matching "
                f"{', '.join(opponents)}; name them by label or spec (shell patterns allowed)"
            )
        ratings = refitted(store, league, records, entries, role)
    else:
        last = max((r["generation"] for r in league_ratings(store, league)), default=0)
        ratings = ratings_after(store, league, last, role)
    players = by_agent(records, role)
    base = players[reference_of(players, reference, role, labels, f" of league {league!r}")]
    rows = []
    for spec, episodes in players.items():
        agent = agents.get(spec, {"label": spec, "generation": None})
        row: dict[str, Any] = {
            "agent": agent["label"],
            "spec": spec,
            "generation": agent["generation"],
            "rating": {k: ratings.get(spec, {}).get(k) for k in ("rating", "ci_low", "ci_high")},
        }
        for name, metric in FIGURES[role].items():
            row[name] = paired(episodes, base, metric)
        rows.append(row)
    return sorted(rows, key=lambda r: (r["generation"] is None, r["generation"] or 0, r["agent"]))


def reference_of(
    players: Mapping[str, Any],
    reference: str,
    role: str,
    labels: Mapping[str, str] | None = None,
    where: str = "",
) -> str:
    """The one agent of ``players`` whose spec or label matches the pattern ``reference``
    (:func:`matches`): the agent gains are paired against. Zero or several is an error that
    lists the choices."""
    labels = labels or {}
    found = [spec for spec in players if matches(spec, labels.get(spec, spec), [reference])]
    if len(found) != 1:
        raise ValueError(
            f"reference {reference!r} matches {len(found)} {role}s{where}, not one; choose one "
            f"of {', '.join(sorted(labels.get(s, s) for s in players))}"
        )
    return found[0]


def coevolving(store: Store, league: str) -> bool:
    """Whether ``league`` trains both sides (``learner.side = "both"``, as first stored): its
    lineages are judged by co-evolution's bar (:func:`targets`)."""
    row = store.db.execute("SELECT config FROM league_runs WHERE name = ?", [league]).fetchone()
    return row is not None and json.loads(row[0]).get("learner", {}).get("side") == "both"


def refitted(
    store: Store,
    league: str,
    records: Sequence[EpisodeRecord],
    entries: Sequence[tuple[str, ...]],
    role: str,
) -> dict[str, Any]:
    """Ratings of ``role`` refitted on ``records`` the way the league rates
    (:func:`leagues.state.league_leaderboard` with its stored settings), by agent as
    :func:`ratings_after` gives them. The anchor is the league's, among the sellers still on
    the board."""
    row = store.db.execute("SELECT config FROM league_runs WHERE name = ?", [league]).fetchone()
    stored = json.loads(row[0])
    on_board = {r.seller for r in records}
    sellers = [s for s in stored["sellers"] if s in on_board]
    board = league_leaderboard(
        records, entries, role, sellers, stored["bootstrap_rounds"], stored["seed"]
    )
    return {r["agent"]: r for r in board}


def ratings_after(store: Store, league: str, generation: int, role: str) -> dict[str, Any]:
    """Ratings of ``role`` after ``generation``, by agent spec (a buyer by its entry label,
    which for an entry of one spec is the spec)."""
    return {
        r["agent"]: r
        for r in league_ratings(store, league)
        if r["generation"] == generation and r["role"] == role
    }


def targets(
    rows: Sequence[dict[str, Any]], role: str, coevolution: bool = False
) -> dict[str, bool]:
    """The learning bar of one league (rows from :func:`held_out`): the last checkpoint gains
    ``GAIN_TARGET`` over the base (paired), its rating interval lies above the base's, ratings
    rise generation over generation, the newest checkpoint rates above its parent; sellers also:
    at most ``VIOLATION_TARGET`` held-out violations, and (the stretch) a rating interval above
    ``scripted:satisficer``'s. A lineage of a co-evolution league (``coevolution``, see
    :func:`coevolving`) is judged by co-evolution's own bar instead: newest above its parent,
    interval above the base's, gain - 2 SE >= ``COEVOLUTION_GAIN_TARGET``."""
    learner = sorted((r for r in rows if r["generation"]), key=lambda r: r["generation"])
    if not learner:
        return {}
    base = next(r for r in rows if r["agent"] == "base")
    last = learner[-1]
    parent = learner[-2] if len(learner) > 1 else base

    def rating(row: dict[str, Any], key: str = "rating") -> float | None:
        return row["rating"].get(key)

    above_base = (rating(last, "ci_low") or -math.inf) > (rating(base, "ci_high") or math.inf)
    above_parent = (rating(last) or -math.inf) > (rating(parent) or math.inf)
    if coevolution:
        gain = last["reward"]
        return {
            "gain_at_two_se": gain["gain"] - 2 * gain["gain_se"] >= COEVOLUTION_GAIN_TARGET,
            "interval_above_base": above_base,
            "newest_above_parent": above_parent,
        }
    rises = [rating(base), *map(rating, learner)]
    out = {
        "gain_over_base": last["reward"]["gain"] >= GAIN_TARGET,
        "interval_above_base": above_base,
        "ratings_rise": all(
            a is not None and b is not None and b > a for a, b in itertools.pairwise(rises)
        ),
        "newest_above_parent": above_parent,
    }
    if role == "seller":
        satisficer = next((r for r in rows if r["spec"] == "scripted:satisficer"), None)
        out["violations_at_most_target"] = last["violation_rate"]["mean"] <= VIOLATION_TARGET
        out["interval_above_satisficer"] = satisficer is not None and (
            rating(last, "ci_low") or -math.inf
        ) > (rating(satisficer, "ci_high") or rating(satisficer) or math.inf)
    return out
