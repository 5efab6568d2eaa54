"""The read-only commands: ``arena ratings`` and ``arena report``.

They open the results file read-only (``Store.open(path, read_only=True)``): a missing, empty or
foreign file is an error that says so and stays as it is, and a database that a tournament or
league run is writing can be read at any time (WAL): they show the episodes committed so far.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from arena_cli.console import console, guard, say
from arena_cli.options import JsonOpt, ReadDbOpt, writable_file, writable_folder
from leagues.report import league_sections
from tournaments.browser import DEFAULT_CAP
from tournaments.comparisons import RATING_ROLES
from tournaments.leaderboard import (
    add_names,
    leaderboard,
    render_table,
    stored_anchor,
    stored_lineups,
    stored_names,
)
from tournaments.ratings import RatingConfig
from tournaments.report import write_report
from tournaments.store import load_records
from tournaments.usage import add_usage, check_prices, parse_prices, stored_usage

PRICE_HELP = (
    "SPEC=IN,OUT: an agent's dollars per million prompt and completion tokens (repeatable); "
    "adds the cost per 1000 episodes."
)
PriceOpt = Annotated[list[str] | None, typer.Option(help=PRICE_HELP)]


def ratings(
    db: ReadDbOpt,
    role: Annotated[str, typer.Option(help="seller, buyer or cross.")] = "seller",
    json_path: JsonOpt = None,
    tournament: Annotated[str | None, typer.Option(help="Only this tournament.")] = None,
    anchor: Annotated[
        str | None,
        typer.Option(
            help="Agent spec (or buyer entry) pinned at 1000; default: the role's first "
            "scripted agent in the stored tournaments. 'none': ratings average 1000."
        ),
    ] = None,
    price: PriceOpt = None,
) -> None:
    """Bradley-Terry ratings with bootstrap intervals, Elo, the paper's metrics, and model
    tokens (and cost, given prices) per episode."""

    def run() -> list[dict[str, Any]]:
        if role not in RATING_ROLES:
            raise ValueError(f"--role must be seller, buyer or cross, not {role!r}")
        writable_file(json_path, "--json")
        records = load_records(db, tournament=tournament)
        _, entries = stored_lineups(db, tournament)
        pinned = stored_anchor(db, role, tournament) if anchor is None else anchor
        if anchor is not None and anchor.lower() == "none":
            pinned = None
        rows = leaderboard(records, role, RatingConfig(), entries, pinned)
        usage, prices = stored_usage(db, tournament), parse_prices(price or [])
        check_prices(prices, usage)
        add_usage(rows, records, role, entries, usage, prices)
        add_names(rows, stored_names(db))
        return rows

    rows = guard(run)
    console.print(render_table(rows))
    if json_path is not None:
        guard(lambda: json_path.write_text(json.dumps(rows, indent=2, allow_nan=False)))
        say(f"wrote {json_path}")


def report(
    db: ReadDbOpt,
    out: Annotated[Path, typer.Option(help="Output folder for index.html and PNGs.")],
    price: PriceOpt = None,
    episodes_per_pairing: Annotated[
        int, typer.Option(help="Most episodes of a pairing in the episode browser (a sample).")
    ] = DEFAULT_CAP,
) -> None:
    """Write an HTML report with plots and an episode browser (open OUT/index.html)."""

    def run() -> Path:
        writable_folder(out, "--out")
        return write_report(db, out, lambda out_dir: league_sections(db, out_dir), RatingConfig(),
                            parse_prices(price or []), episodes_per_pairing)  # fmt: skip

    say(f"wrote {guard(run)}")
