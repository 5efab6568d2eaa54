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
from tournaments.leaderboard import leaderboard, render_table, stored_anchor, stored_lineups
from tournaments.ratings import RatingConfig
from tournaments.report import write_report
from tournaments.store import load_records

ROLES = ("seller", "buyer", "cross")


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
) -> None:
    """Bradley-Terry ratings with bootstrap intervals, Elo, and the paper's metrics."""

    def run() -> list[dict[str, Any]]:
        if role not in ROLES:
            raise ValueError(f"--role must be seller, buyer or cross, not {role!r}")
        writable_file(json_path, "--json")
        records = load_records(db, tournament=tournament)
        _, entries = stored_lineups(db, tournament)
        pinned = stored_anchor(db, role, tournament) if anchor is None else anchor
        if anchor is not None and anchor.lower() == "none":
            pinned = None
        return leaderboard(records, role, RatingConfig(), entries, pinned)

    rows = guard(run)
    console.print(render_table(rows))
    if json_path is not None:
        guard(lambda: json_path.write_text(json.dumps(rows, indent=2, allow_nan=False)))
        say(f"wrote {json_path}")


def report(
    db: ReadDbOpt,
    out: Annotated[Path, typer.Option(help="Output folder for index.html and PNGs.")],
) -> None:
    """Write an HTML report with plots."""

    def run() -> Path:
        writable_folder(out, "--out")
        return write_report(db, out, extra_sections=lambda out_dir: league_sections(db, out_dir))

    say(f"wrote {guard(run)}")
