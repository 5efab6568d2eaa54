"""Where the commands print: the consoles, one-line errors, progress bars.

A mistake the user can fix (a bad option value, spec, config file, database or output path)
prints one ``error: ...`` line on stderr and exits with status 2, never a traceback: library
errors through :func:`guard`, click's own usage errors through :class:`OneLineErrors`. Text that
an agent or a user wrote (messages, specs, names, paths) is printed verbatim, never read as rich
markup: through :func:`say`, ``rich.text.Text`` or :func:`rich.markup.escape`.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
from typer.core import TyperGroup

from tournaments.lock import DatabaseInUse

# Piped output (logs, CI) gets a wide fixed width so tables are not truncated to 80 columns.
console = Console(width=None if sys.stdout.isatty() else 180)
err_console = Console(stderr=True)
T = TypeVar("T")

USER_ERRORS: tuple[type[BaseException], ...] = (
    ValueError,
    OSError,
    KeyError,
    DatabaseInUse,
    sqlite3.DatabaseError,
)
"""What a user's input or environment causes: reported in one line, without a traceback."""

USAGE_STATUS = 2
"""Exit status of every user error (click's own for usage errors)."""

UsageError: type[Exception] = next(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError"
)
"""Click's usage error, as the installed typer raises it (recent typers vendor click)."""


def fail(message: object) -> NoReturn:
    """Print ``error: message`` as one line on stderr and exit with status 2."""
    text = " ".join(line.strip() for line in str(message).splitlines() if line.strip())
    err_console.print(f"[bold red]error:[/] {escape(text)}", highlight=False, soft_wrap=True)
    raise typer.Exit(USAGE_STATUS)


def guard(fn: Callable[[], T]) -> T:
    """Run ``fn``; a user mistake becomes one ``error:`` line and exit status 2."""
    try:
        return fn()
    except USER_ERRORS as exc:
        fail(exc.args[0] if isinstance(exc, KeyError) and exc.args else exc)


def say(text: str) -> None:
    """Print ``text`` verbatim on stdout (no markup, no highlighting)."""
    console.print(text, markup=False, highlight=False, soft_wrap=True)


class OneLineErrors(TyperGroup):
    """The top command group: click's usage errors (an option's bad value, an unknown option
    or command, a missing argument) in the one-line form of :func:`fail`."""

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().make_context(*args, **kwargs)
        except UsageError as exc:
            _usage(exc)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except UsageError as exc:
            _usage(exc)


def _usage(exc: Any) -> NoReturn:
    if type(exc).__name__ == "NoArgsIsHelpError":
        raise exc  # click shows the help: not an error
    where = exc.ctx.command_path if exc.ctx is not None else "arena"
    fail(f"{exc.format_message()} (see {where} --help)")


def progress() -> Progress:
    """A progress bar on stderr, so stdout keeps only the results; transient: it is gone when
    the work ends (the command then prints what was done), and an error stays one line."""
    return Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    )
