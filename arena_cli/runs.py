"""The writing commands: ``arena tournament run`` and ``arena league run``.

Each holds its database's writer lock for the whole run (:mod:`tournaments.lock`): a second run
on the same file stops at once with one line naming the first (pid, host, what it runs), while
``arena ratings`` and ``arena report`` may read the file meanwhile.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer

from arena_cli.console import console, guard
from arena_cli.options import WriteDbOpt, writable_file
from leagues.config import LeagueConfig
from leagues.league import run_league
from leagues.summary import LeagueSummary
from tournaments.config import TournamentConfig
from tournaments.runner import EXECUTORS, TournamentSummary, run_tournament


def _database(db: Path | None, name: str) -> Path:
    """The ``--db`` file, by default ``<name>.db`` here, checked writable before any work."""
    path = db if db is not None else Path(f"{name}.db")
    writable_file(path, "--db")
    return path


def tournament_run(
    config_path: Annotated[Path, typer.Argument(help="Tournament TOML file.")],
    db: WriteDbOpt = None,
    workers: Annotated[int, typer.Option(min=1, help="Parallel worker processes.")] = 2,
    executor: Annotated[str, typer.Option(help=" or ".join(EXECUTORS) + ".")] = "local",
    ray_address: Annotated[
        str | None, typer.Option(help="Ray cluster address (default: RAY_ADDRESS or local).")
    ] = None,
    chunk_size: Annotated[int, typer.Option(min=1, help="Episodes per worker task.")] = 32,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
) -> None:
    """Run (or resume) a round-robin tournament, storing every episode."""

    def run() -> TournamentSummary:
        config = TournamentConfig.from_toml(config_path)
        return run_tournament(
            config,
            _database(db, config.name),
            workers=workers,
            executor=executor,
            progress=progress,
            chunk_size=chunk_size,
            ray_address=ray_address,
        )

    console.print(guard(run).table())


def league_run(
    config_path: Annotated[Path, typer.Argument(help="League TOML file.")],
    db: WriteDbOpt = None,
    ray_address: Annotated[
        str | None,
        typer.Option(help='Evaluate on the Ray cluster at this address (sets executor = "ray").'),
    ] = None,
) -> None:
    """Run (or resume) a league: train, evaluate, rate, repeat."""

    def run() -> LeagueSummary:
        config = LeagueConfig.from_toml(config_path)
        if ray_address:
            config = dataclasses.replace(config, executor="ray", ray_address=ray_address)
        return run_league(config, _database(db, config.name))

    console.print(guard(run))
