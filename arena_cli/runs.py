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
from leagues.seeds import run_seeds, seeds_table
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
    chunk_size: Annotated[
        int,
        typer.Option(
            min=1,
            help="Most episodes a worker task plays at once (the episodes are cut into equal "
            "chunks, a multiple of --workers).",
        ),
    ] = 32,
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
    seeds: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated league seeds, e.g. 0,1,2: the recipe once per seed "
            "(leagues <name>-seed<k>), then the figures across seeds. Default: the config's "
            "`seeds`, else its `seed`."
        ),
    ] = None,
    ray_address: Annotated[
        str | None,
        typer.Option(help='Evaluate on the Ray cluster at this address (sets executor = "ray").'),
    ] = None,
) -> None:
    """Run (or resume) a league: train, evaluate, rate, repeat (per seed)."""

    def run() -> tuple[LeagueConfig, list[LeagueSummary]]:
        config = LeagueConfig.from_toml(config_path)
        if ray_address:
            config = dataclasses.replace(config, executor="ray", ray_address=ray_address)
        chosen = None if seeds is None else parse_seeds(seeds)
        return config, run_seeds(config, _database(db, config.name), chosen)

    config, summaries = guard(run)
    for summary in summaries:
        console.print(summary)
    if len(summaries) > 1:  # each side the learner trains: a buyer league's gains are a buyer's
        path, names = Path(summaries[0].db_path), [s.name for s in summaries]
        for role in config.learner.roles:
            console.print(guard(lambda role=role: seeds_table(path, names, role)))


def parse_seeds(text: str) -> list[int]:
    """``--seeds 0,1,2`` as integers, or an error naming the option."""
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise typer.BadParameter(
            f"{text!r}: give integers separated by commas, e.g. 0,1,2", param_hint="--seeds"
        ) from None
