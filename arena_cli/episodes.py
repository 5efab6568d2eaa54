"""``arena episodes``: list stored episodes, to pick one to open in the report or replay."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from arena.settings import field_help
from arena_cli.console import console, guard, say
from arena_cli.options import writable_file
from tournaments.episodes import EpisodeFilter, EpisodeRow, list_episodes
from tournaments.store import Store


def _help(name: str) -> str:
    return field_help(EpisodeFilter, name)


def open_store(db: Path) -> Store:
    """The store at ``db``, which must exist (listing never creates a database)."""
    if not db.is_file():
        raise FileNotFoundError(f"no database at {db}")
    return Store.open(db)


def lineup(buyers: Sequence[str]) -> str:
    """A lineup in few words: ``3 x scripted:time`` when every slot plays one spec."""
    if len(set(buyers)) == 1:
        return f"{len(buyers)} x {buyers[0]}"
    return ", ".join(buyers)


def episodes_table(rows: Sequence[EpisodeRow], title: str) -> Table:
    table = Table(title=title)
    for header in ("id", "tournament", "seller", "buyers", "outcome", "price", "buyer", "reward",
                   "turns", "tokens"):  # fmt: skip
        right = header in ("id", "price", "reward", "turns", "tokens")
        table.add_column(header, justify="right" if right else "left")
    for r in rows:
        price = "" if r.deal_price is None else f"${r.deal_price:,.2f}"
        buyer = "" if r.deal_buyer is None else f"buyer_{r.deal_buyer}"
        tokens = r.tokens_in + r.tokens_out
        name = r.tournament if r.parent_id is None else f"{r.tournament} (of #{r.parent_id})"
        table.add_row(str(r.id), Text(name), Text(r.seller), Text(lineup(r.buyers)), r.outcome,
                      price, buyer,
                      f"{r.seller_reward:+.3f}", str(r.seller_turns),
                      str(tokens) if tokens else "")  # fmt: skip
    return table


def episodes_command(
    db: Annotated[Path, typer.Option(help="SQLite results file.")],
    tournament: Annotated[str | None, typer.Option(help=_help("tournament"))] = None,
    seller: Annotated[str | None, typer.Option(help=_help("seller"))] = None,
    buyer: Annotated[str | None, typer.Option(help=_help("buyer"))] = None,
    outcome: Annotated[str | None, typer.Option(help=_help("outcome"))] = None,
    order: Annotated[str, typer.Option(help=_help("order"))] = "id",
    limit: Annotated[int, typer.Option(help=_help("limit"))] = 50,
    replays: Annotated[bool, typer.Option(help=_help("replays"))] = False,
    json_path: Annotated[Path | None, typer.Option("--json", help="Write rows as JSON.")] = None,
) -> None:
    """List stored episodes (id, tournament, seller, buyers, outcome, price, reward, turns)."""

    def run() -> tuple[list[EpisodeRow], int]:
        writable_file(json_path, "--json")
        chosen = EpisodeFilter(tournament, seller, buyer, outcome, None, None, replays, order,
                               limit)  # fmt: skip
        with open_store(db) as store:
            return list_episodes(store, chosen)

    rows, total = guard(run)
    console.print(episodes_table(rows, f"{len(rows)} of {total} episodes"))
    if json_path is not None:
        data: dict[str, Any] = {"total": total, "episodes": [r.as_dict() for r in rows]}
        json_path.write_text(json.dumps(data, indent=2, allow_nan=False))
        say(f"wrote {json_path}")
