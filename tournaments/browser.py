"""The report's episode browser: from the leaderboard or the payoff table to a pairing's episodes,
and to one episode's transcript, private values and bargaining-zone chart, from files alone.

Written next to ``index.html`` (:func:`write_browser`)::

    episodes.html          the page; its code is browser.js (and browser.css), shipped in
                           tournaments/static/, hand-written, no library, no network
    data/pairings.js       every pairing: seller, buyer entry, episode and outcome counts, mean
                           seller reward, tokens and cost per episode
    data/pairing-<k>.js    the pairing's episodes, at most ``cap`` of them (a sample, see below)
    data/episode-<id>.js   one episode: players, private values, result, messages, charts

The data files are scripts that add to ``window.arenaData``; the page loads a pairing's or an
episode's file only when it is opened, with a ``<script src>`` element, since browsers refuse
``fetch()`` of ``file://`` URLs and a script element is allowed. A pairing with more than
``cap`` episodes is sampled, and its page says so: every outcome keeps a share of the sample
in proportion to its count (at least ``cap // 20`` episodes, or all it has), and within an
outcome the episodes are spread evenly over the reward range, best and worst included. The
sample is a pure function of the stored episodes. Episode ids are the database's, so
``arena replay --episode <id>`` opens the same episode.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from arena.metrics import METRICS
from arena.money import format_price
from arena.observations import action_text
from arena.records import EpisodeKey, EpisodeRecord
from arena.seats import SELLER, buyer_seat
from arena.settings import check_positive_int
from tournaments.comparisons import BuyerEntries, buyer_entries_of
from tournaments.store import Store
from tournaments.usage import Price, SeatUsage, Usage, side_usage, usage_summary
from tournaments.zone_chart import zone_charts

T = TypeVar("T")
DEFAULT_CAP = 200
STATIC = ("browser.js", "browser.css")


@dataclass(frozen=True)
class Pairing:
    """A seller and a buyer entry, with their stored episodes (each key once)."""

    index: int
    seller: str
    buyers: str
    """The buyer entry's label."""
    records: tuple[EpisodeRecord, ...]


def agent_href(role: str, agent: str) -> str:
    """The browser's page of a seller spec or buyer entry label."""
    return f"episodes.html#{role}={quote(agent, safe='')}"


def pairings(records: Sequence[EpisodeRecord], entries: BuyerEntries | None) -> list[Pairing]:
    """Every (seller, buyer entry) with its episodes (each key once, errors included), sorted
    like the payoff table."""
    cells: dict[tuple[str, str], dict[EpisodeKey, EpisodeRecord]] = {}
    for record in records:
        for label in buyer_entries_of(record, entries):
            cells.setdefault((record.seller, label), {}).setdefault(record.key, record)
    return [
        Pairing(k, seller, label, tuple(cells[(seller, label)].values()))
        for k, (seller, label) in enumerate(sorted(cells))
    ]


def sample(
    items: Sequence[T], cap: int, outcome: Callable[[T], str], reward: Callable[[T], float]
) -> list[T]:
    """At most ``cap`` items: every outcome in proportion to its count (at least ``cap // 20``
    or all it has), each spread evenly over its reward range (module docstring)."""
    if len(items) <= cap:
        return list(items)
    groups: dict[str, list[T]] = {}
    for item in items:
        groups.setdefault(outcome(item), []).append(item)
    floor = max(1, cap // 20)
    quota = {
        name: min(len(g), max(floor, round(cap * len(g) / len(items))))
        for name, g in groups.items()
    }
    while sum(quota.values()) > cap:
        quota[max(quota, key=lambda n: (quota[n], n))] -= 1
    while sum(quota.values()) < cap:
        open_groups = [n for n in quota if quota[n] < len(groups[n])]
        quota[max(open_groups, key=lambda n: (len(groups[n]) - quota[n], n))] += 1
    picked: list[T] = []
    for name in sorted(groups):
        ordered = sorted(groups[name], key=reward)
        q = quota[name]
        if q == 1:
            picked.append(ordered[len(ordered) // 2])
        elif q > 1:
            picked += [ordered[round(i * (len(ordered) - 1) / (q - 1))] for i in range(q)]
    return picked


def _seat_tokens(seats: SeatUsage, seat: str) -> int:
    spec_in_out = seats.get(seat)
    return 0 if spec_in_out is None else spec_in_out[1] + spec_in_out[2]


def episode_data(
    record: EpisodeRecord, episode_id: int, tournament: str, seats: SeatUsage, db_name: str
) -> dict[str, Any]:
    """What the browser shows of one episode; prices are rendered here."""
    sc, res = record.scenario, record.result
    multi = sc.num_products > 1

    def per_product(values: Sequence[float]) -> str:
        if not multi:
            return format_price(values[0])
        return ", ".join(f"{p + 1}: {format_price(v)}" for p, v in enumerate(values))

    players = [
        {
            "seat": SELLER,
            "agent": record.seller,
            "private": f"cost {per_product(sc.costs)}",
            "opening": "",
            "reward": res.seller_reward,
            "tokens": _seat_tokens(seats, SELLER),
        }
    ]
    for i, spec in enumerate(record.buyers):
        first = sc.first_offers[i]
        players.append({
            "seat": buyer_seat(i),
            "agent": spec,
            "private": f"budget {per_product(sc.valuations[i])}",
            "opening": "" if first is None else f"{format_price(first)} (regulated)",
            "reward": res.buyer_rewards[i],
            "tokens": _seat_tokens(seats, buyer_seat(i)),
        })  # fmt: skip
    turns, turn = [], 0
    for t in res.turns:
        turn += t.agent == SELLER
        turns.append({"turn": turn, "seat": t.agent, "to": t.to, "text": t.text,
                      "action": action_text(t), "valid": t.valid, "reason": t.reason or "",
                      "tokens": t.tokens_in + t.tokens_out})  # fmt: skip
    deals = [
        {"buyer": buyer_seat(d.buyer), "price": format_price(d.price), "product": d.product + 1,
         "turn": d.turn, "closed_by": d.closed_by}
        for d in res.deals
    ]  # fmt: skip
    violation = ""
    if res.violation:
        violation = f"{res.violation} by {res.violation_by} ({res.violation_reason})"
    return {
        "id": episode_id,
        "tournament": tournament,
        "preset": record.preset,
        "scenario": f"seed {sc.seed}, index {sc.index}",
        "seller": record.seller,
        "buyers": list(record.buyers),
        "products": [
            {
                "title": p.title,
                "list_price": format_price(p.list_price),
                "cost": format_price(p.cost),
            }
            for p in sc.products
        ],
        "players": players,
        "outcome": res.outcome,
        "termination": res.termination,
        "deals": deals,
        "violation": violation,
        "error": res.error or "",
        "seller_turns": res.seller_turns,
        "turns": turns,
        "charts": zone_charts(record),
        "replay": f"arena replay --db {db_name} --episode {episode_id} --from-turn "
        f"{max(0, min(3, res.seller_turns - 1))} --seller SPEC",
    }


def _summary(record: EpisodeRecord, episode_id: int, tournament: str, seats: SeatUsage) -> dict:
    res = record.result
    deal = res.deal
    return {
        "id": episode_id,
        "tournament": tournament,
        "scenario": record.scenario.index,
        "seed": record.scenario.seed,
        "outcome": res.outcome,
        "reward": res.seller_reward,
        "price": "" if deal is None else format_price(deal.price),
        "buyer": "" if deal is None else buyer_seat(deal.buyer),
        "turns": res.seller_turns,
        "tokens": side_usage(seats, "both", {})[0],
    }


def _script(path: Path, target: str, value: Any) -> None:
    """A data file: ``window.arenaData`` gains ``value`` at ``target``."""
    text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    path.write_text(
        "window.arenaData = window.arenaData || {pairing: {}, episode: {}};\n"
        f"window.arenaData{target} = {text};\n",
        encoding="utf-8",
    )


@dataclass(frozen=True)
class Links:
    """Where the report's tables link to in the browser."""

    pairings: Mapping[tuple[str, str], str]
    """(seller, buyer entry label) -> href."""

    def agent(self, role: str, agent: str) -> str:
        return agent_href(role, agent)


def check_cap(cap: int) -> None:
    check_positive_int("", "episodes per pairing", cap)


def write_browser(
    db: Path,
    out: Path,
    records: Sequence[EpisodeRecord],
    entries: BuyerEntries | None,
    usage: Usage,
    prices: Mapping[str, Price],
    cap: int = DEFAULT_CAP,
) -> Links:
    """Write the browser's page and data files into ``out`` (module docstring)."""
    check_cap(cap)
    with Store.open(db, read_only=True) as store:
        ids = store.episode_ids()
    data_dir = out / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    for name in STATIC:
        text = (resources.files("tournaments") / "static" / name).read_text(encoding="utf-8")
        (out / name).write_text(text, encoding="utf-8")
    (out / "episodes.html").write_text(PAGE, encoding="utf-8")
    written: set[int] = set()
    index = []
    for pairing in pairings(records, entries):
        chosen = sample(pairing.records, cap, lambda r: r.result.outcome,
                        lambda r: r.result.seller_reward)  # fmt: skip
        rows = []
        for record in chosen:
            episode_id, tournament = ids[record.key]
            seats = usage.get(record.key, {})
            rows.append(_summary(record, episode_id, tournament, seats))
            if episode_id not in written:
                detail = episode_data(record, episode_id, tournament, seats, db.name)
                _script(data_dir / f"episode-{episode_id}.js", f".episode[{episode_id}]", detail)
                written.add(episode_id)
        _script(data_dir / f"pairing-{pairing.index}.js", f".pairing[{pairing.index}]", rows)
        outcomes: dict[str, int] = {}
        for r in pairing.records:
            outcomes[r.result.outcome] = outcomes.get(r.result.outcome, 0) + 1
        index.append({
            "id": pairing.index,
            "seller": pairing.seller,
            "buyers": pairing.buyers,
            "episodes": len(pairing.records),
            "sampled": len(chosen),
            "outcomes": outcomes,
            "mean_reward": METRICS["reward"].over(pairing.records).value,
            "deal_rate": METRICS["deal_rate"].over(pairing.records).value,
            **usage_summary(pairing.records, usage, "both", prices),
        })  # fmt: skip
    _script(data_dir / "pairings.js", ".index", {"db": db.name, "cap": cap, "pairings": index})
    return Links({(p["seller"], p["buyers"]): f"episodes.html#pairing={p['id']}" for p in index})


PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>bargain-arena episodes</title>
<link rel="stylesheet" href="browser.css">
</head>
<body>
<nav><a href="index.html">Report</a> · <a href="episodes.html#all">All pairings</a></nav>
<main id="app"><p>Loading…</p></main>
<noscript><p>The episode browser needs JavaScript.</p></noscript>
<script src="data/pairings.js"></script>
<script src="browser.js"></script>
</body>
</html>
"""
