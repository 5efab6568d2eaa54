"""``arena replay``: a stored episode replayed exactly through turn k, then other agents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from arena.money import format_price
from arena.observations import action_text
from arena.records import EpisodeRecord
from arena.settings import field_help
from arena_cli.console import console, guard, progress, say
from arena_cli.episodes import lineup, open_store
from arena_cli.options import writable_file
from tournaments.episodes import EpisodeFilter, load_episode
from tournaments.replay import (
    Counterfactual,
    Takeover,
    paired_summary,
    parse_buyer_takeover,
    replay,
    replayable,
    seat_reward,
    select,
    store_counterfactuals,
)


def _help(name: str) -> str:
    return field_help(Takeover, name)


def outcome_cells(record: EpisodeRecord, seat: str) -> list[str]:
    """The side-by-side rows of one episode (see :func:`side_by_side`)."""
    res = record.result
    deal = res.deal
    return [
        record.seller,
        lineup(record.buyers),
        f"{res.outcome} ({res.termination})",
        f"{seat_reward(record, seat):+.3f}",
        f"{res.seller_reward:+.3f}",
        "" if deal is None else format_price(deal.price),
        "" if deal is None else f"buyer_{deal.buyer + 1}",
        str(res.seller_turns),
        str(sum(t.tokens_in + t.tokens_out for t in res.turns)),
    ]


def side_by_side(item: Counterfactual) -> Table:
    seat = item.takeover.seat
    table = Table(title=f"episode {item.parent.id} from turn {item.takeover.from_turn}")
    table.add_column("")
    table.add_column("original", justify="right")
    table.add_column("counterfactual", justify="right")
    labels = ["seller", "buyers", "outcome", f"reward ({seat})", "seller reward", "price",
              "buyer", "seller turns", "new tokens"]  # fmt: skip
    rows = zip(outcome_cells(item.parent.record, seat), outcome_cells(item.record, seat),
               strict=True)  # fmt: skip
    for label, (before, after) in zip(labels, rows, strict=True):
        table.add_row(label, Text(before), Text(after))
    return table


def continuation(item: Counterfactual) -> list[str]:
    """The counterfactual's messages after the replayed prefix, one line each."""
    lines, turn = [], item.takeover.from_turn
    for t in item.record.result.turns[item.replayed :]:
        turn += t.agent == "seller"
        action = action_text(t) or "(invalid)"
        reason = "" if t.valid else f"  rejected: {t.reason}"
        lines.append(f"turn {turn}  {t.agent} -> {t.to}: {action}{reason}")
    return lines


def replay_command(
    db: Annotated[Path, typer.Option(help="SQLite results file; replays are stored in it.")],
    from_turn: Annotated[int, typer.Option("--from-turn", help=_help("from_turn"))],
    episode: Annotated[
        int | None, typer.Option(help="The stored episode's id (see `arena episodes`).")
    ] = None,
    episodes_from: Annotated[
        str | None,
        typer.Option(
            "--episodes-from",
            help="Replay every episode of a filter, e.g. 'seller=scripted:satisficer "
            "outcome=no_deal' (keys: " + ", ".join(EpisodeFilter.__dataclass_fields__) + ").",
        ),
    ] = None,
    seller: Annotated[str | None, typer.Option(help=_help("seller"))] = None,
    buyer: Annotated[
        list[str] | None,
        typer.Option(help="NUMBER=SPEC: buyer_<NUMBER>'s new agent (repeatable)."),
    ] = None,
    store: Annotated[bool, typer.Option(help="Store the counterfactuals in --db.")] = True,
    max_concurrent: Annotated[int, typer.Option(help="Episodes in flight at once.")] = 64,
    json_path: Annotated[Path | None, typer.Option("--json", help="Write results JSON.")] = None,
) -> None:
    """Replay stored episodes exactly through turn k, hand seats to other agents, and compare
    the outcomes (one episode side by side; many with a paired interval)."""

    def run() -> tuple[list[Counterfactual], int, int]:
        if (episode is None) == (episodes_from is None):
            raise ValueError("give either --episode ID or --episodes-from FILTER")
        writable_file(json_path, "--json")
        takeover = Takeover(from_turn, seller, tuple(parse_buyer_takeover(b) for b in buyer or ()))
        with open_store(db) as results:
            if episode is not None:
                items = replay(results, [load_episode(results, episode)], takeover)
                skipped = 0
            else:
                chosen = select(results, EpisodeFilter.parse(episodes_from or ""))
                ready = replayable(chosen, from_turn)
                if not ready:
                    raise ValueError(f"none of the {len(chosen)} selected episodes has a seller "
                                     f"turn after turn {from_turn}")  # fmt: skip
                skipped = len(chosen) - len(ready)
                with progress() as bar:
                    task = bar.add_task("replays", total=len(ready))
                    items = replay(results, ready, takeover, max_concurrent,
                                   lambda _r: bar.advance(task))  # fmt: skip
            new = 0
            if store:
                items, new = store_counterfactuals(results, items)
        return items, skipped, new

    items, skipped, new = guard(run)
    for item in items:
        if item.mismatches:
            console.print(f"[yellow]note:[/] episode {item.parent.id}: {item.mismatches} "
                          "replayed turn(s) differ from what the kept scripted agents say "
                          "today")  # fmt: skip
    if episode is not None:
        (item,) = items
        console.print(f"replayed {item.replayed} recorded messages exactly (openings and seller "
                      f"turns 1-{from_turn}); then {item.takeover.describe()}")  # fmt: skip
        for line in continuation(item):
            say(line)
        console.print(side_by_side(item))
    summary = paired_summary(items, skipped)
    if episode is None:
        console.print(summary_table(summary))
    if store:
        ids = ", ".join(str(i.stored_id) for i in items[:5]) + (", ..." if len(items) > 5 else "")
        say(
            f"stored {new} new counterfactual(s), {len(items) - new} already stored: "
            f"episode(s) {ids} (`arena episodes --replays`)"
        )
    if json_path is not None:
        data: dict[str, Any] = {"summary": summary, "episodes": [_pair(i) for i in items]}
        json_path.write_text(json.dumps(data, indent=2, allow_nan=False))
        say(f"wrote {json_path}")


def _pair(item: Counterfactual) -> dict[str, Any]:
    seat = item.takeover.seat
    return {
        "episode": item.parent.id,
        "stored_id": item.stored_id,
        "replayed_messages": item.replayed,
        "original": {"reward": seat_reward(item.parent.record, seat),
                     "outcome": item.parent.record.result.outcome},
        "counterfactual": {"reward": seat_reward(item.record, seat),
                           "outcome": item.record.result.outcome},
        "difference": item.difference,
    }  # fmt: skip


def summary_table(summary: dict[str, Any]) -> Table:
    seat = summary["seat"]
    table = Table(
        title=f"{summary['episodes']} episodes replayed ({summary['skipped']} skipped: no seller "
        "turn after the takeover point or no stored messages)"
    )
    table.add_column("")
    table.add_column("original", justify="right")
    table.add_column("counterfactual", justify="right")
    table.add_column("difference (95% CI, paired)", justify="right")
    interval = summary["ci95"]
    diff = summary["difference"]
    cell = "-" if diff is None else f"{diff:+.3f}"
    if interval is not None:
        cell += f" [{interval[0]:+.3f}, {interval[1]:+.3f}]"
    table.add_row(f"mean reward ({seat})", f"{summary['original_reward']:+.3f}",
                  f"{summary['counterfactual_reward']:+.3f}", cell)  # fmt: skip
    for outcome in ("deal", "no_deal", "violation", "error"):
        before = summary["original_outcomes"].get(outcome, 0)
        after = summary["counterfactual_outcomes"].get(outcome, 0)
        if before or after:
            table.add_row(outcome, str(before), str(after), f"{after - before:+d}")
    return table
