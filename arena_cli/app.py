"""The ``arena`` command tree: each command lives in the module of its group, this one only names
them. Commands parse arguments and call library functions, nothing more.

* :mod:`arena_cli.play` (``play``), :mod:`arena_cli.evaluation` (``eval``);
* :mod:`arena_cli.results`: the read-only ``ratings`` and ``report``;
* :mod:`arena_cli.runs`: the writing ``tournament run`` and ``league run``;
* :mod:`arena_cli.episodes` (``episodes``) and :mod:`arena_cli.replay` (``replay``): stored
  episodes, listed and replayed counterfactually; :mod:`arena_cli.human` plays ``play --seller
  human``.

Expected errors print one ``error:`` line and exit with status 2 (:mod:`arena_cli.console`).
"""

from __future__ import annotations

import sys

import typer

from arena_cli.console import OneLineErrors, err_console
from arena_cli.episodes import episodes_command
from arena_cli.evaluation import eval_command
from arena_cli.play import play, show_transcript
from arena_cli.replay import replay_command
from arena_cli.results import ratings, report
from arena_cli.runs import league_run, tournament_run
from arena_cli.serve import serve

app = typer.Typer(
    cls=OneLineErrors,
    add_completion=False,
    no_args_is_help=True,
    help="bargain-arena: LLM negotiation markets, tournaments and leagues.",
)
tournament_app = typer.Typer(no_args_is_help=True, help="Round-robin tournaments.")
league_app = typer.Typer(no_args_is_help=True, help="Leagues of trained checkpoints.")
app.add_typer(tournament_app, name="tournament")
app.add_typer(league_app, name="league")

app.command()(play)
app.command("eval")(eval_command)
app.command()(ratings)
app.command()(report)
app.command("episodes")(episodes_command)
app.command("replay")(replay_command)
tournament_app.command("run")(tournament_run)
league_app.command("run")(league_run)
app.command()(serve)

__all__ = ["app", "main", "show_transcript"]


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        err_console.print("interrupted; finished work is kept")
        sys.exit(130)


if __name__ == "__main__":
    main()
