"""Helpers of the CLI tests: invoke ``arena`` in process, check the one-line error contract, run
a real tournament in a subprocess."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from typer.testing import CliRunner, Result

from arena_cli import app
from tournaments.store import Store

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]


def arena(*args: str) -> Result:
    """Run ``arena ARGS`` in this process, on a wide terminal."""
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})


def one_error(*args: str) -> str:
    """Run ``arena ARGS`` and return its error line, asserting the contract of every user error:
    exit status 2, exactly one non-empty output line, ``error: ...``, and no traceback."""
    result = arena(*args)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2, f"arena {' '.join(args)} -> {result.exit_code}\n{result.output}"
    assert isinstance(result.exception, SystemExit), result.exception
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def foreign_sqlite(path: Path) -> Path:
    """An SQLite file of someone else's: a table, no arena ``meta``."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.commit()
    conn.close()
    return path


TOURNAMENT = """[tournament]
name = "t"
episodes = {episodes}
sellers = ["scripted:prober", "scripted:satisficer"]
buyers = ["scripted:time"]
keep_turns = {keep_turns}
"""


def tournament_toml(folder: Path, episodes: int = 6, keep_turns: bool = True) -> Path:
    text = TOURNAMENT.format(episodes=episodes, keep_turns=str(keep_turns).lower())
    return write(folder / "t.toml", text)


def stored_episodes(db: Path) -> int:
    """Episodes committed to ``db`` so far, read as another process would (0 before any)."""
    try:
        with Store.open(db, read_only=True) as store:
            return store.db.execute("SELECT COUNT(*) FROM episodes").fetchone()[0]
    except (FileNotFoundError, ValueError):
        return 0


@contextlib.contextmanager
def running_tournament(folder: Path) -> Iterator[tuple[subprocess.Popen, Path]]:
    """A real ``arena tournament run`` writing ``folder/t.db`` in a subprocess, far from done
    (200,000 episodes), once its first episodes are committed; killed on exit."""
    toml = tournament_toml(folder, episodes=100_000, keep_turns=False)
    db = folder / "t.db"
    command = [sys.executable, "-m", "arena_cli", "tournament", "run", str(toml), "--db", str(db),
               "--workers", "1", "--chunk-size", "16", "--no-progress"]  # fmt: skip
    writer = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        deadline = time.monotonic() + 120
        while stored_episodes(db) == 0:
            if writer.poll() is not None:
                raise AssertionError(f"the writer stopped: {writer.stderr.read()}")
            assert time.monotonic() < deadline, "the writer stored nothing in 120 s"
            time.sleep(0.2)
        yield writer, db
    finally:
        writer.kill()
        writer.wait(timeout=60)
