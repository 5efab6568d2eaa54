"""The writer lock: one run per database, released by the kernel whatever becomes of its holder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tournaments.lock import DatabaseInUse, lock_path, writer_lock
from tournaments.runner import run_tournament
from tournaments.store import load_records

from .test_runner import SMALL

HOLD = """
import multiprocessing, sys, time
from tournaments.lock import writer_lock
with writer_lock(sys.argv[1], "tournament held-by-test"):
    worker = None
    if sys.argv[2] == "fork":  # a pool worker forked while the lock is held
        worker = multiprocessing.get_context("fork").Process(target=time.sleep, args=(600,))
        worker.start()
    print("locked", worker.pid if worker else 0, flush=True)
    time.sleep(600)
"""


def hold_in_subprocess(db: Path, fork: bool = False) -> tuple[subprocess.Popen, int]:
    """A process holding the lock of ``db`` (and the pid of its forked worker, 0 if none)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(db), "fork" if fork else "-"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert proc.stdout is not None
    word, worker = proc.stdout.readline().split()
    assert word == "locked"
    return proc, int(worker)


def test_a_second_holder_is_refused_with_the_first_ones_pid_and_purpose(tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    with writer_lock(db, "tournament first") as path:
        assert path == lock_path(db) == tmp_path / "results.db.lock"
        with pytest.raises(DatabaseInUse) as info, writer_lock(db, "tournament second"):
            pass
        message = str(info.value)
        assert f"database {db} is in use by another run (pid {os.getpid()} on " in message
        assert "tournament first, since" in message
    assert not lock_path(db).exists()
    with writer_lock(db, "tournament second"):
        pass


def test_the_lock_of_a_killed_process_is_taken_over(tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    holder, _ = hold_in_subprocess(db)
    try:
        refused = pytest.raises(DatabaseInUse, match=f"pid {holder.pid} .*held-by-test")
        with refused, writer_lock(db, "tournament second"):
            pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    assert lock_path(db).exists(), "SIGKILL leaves the file behind: the case under test"
    with writer_lock(db, "tournament second"):
        assert "tournament second" in lock_path(db).read_text()


def test_a_worker_forked_by_a_killed_holder_does_not_keep_the_lock(tmp_path: Path) -> None:
    """SIGKILL leaves the lock file; the holder's forked worker, still running, must not keep
    the lock alive through its inherited descriptor."""
    db = tmp_path / "results.db"
    holder, worker = hold_in_subprocess(db, fork=True)
    try:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        os.kill(worker, 0)  # the worker lives on
        # The worker drops its inherited descriptor as soon as it runs after the fork; on a
        # loaded machine that can be a moment after the holder died, not more.
        deadline = time.monotonic() + 20
        while True:
            try:
                with writer_lock(db, "tournament next"):
                    break
            except DatabaseInUse:
                assert time.monotonic() < deadline, "the forked worker kept the lock"
                time.sleep(0.1)
    finally:
        os.kill(worker, signal.SIGKILL)


def test_a_tournament_on_a_locked_database_stops_before_storing_anything(tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    with writer_lock(db, "league other"):
        started = time.perf_counter()
        with pytest.raises(DatabaseInUse, match="league other"):
            run_tournament(SMALL, db, progress=False)
        assert time.perf_counter() - started < 5
    assert not db.exists()
    run_tournament(SMALL, db, progress=False)
    assert len(load_records(db)) > 0
    assert not lock_path(db).exists()
