"""One writing run per results database: an advisory lock file beside it.

``arena tournament run`` and ``arena league run`` (:func:`tournaments.runner.run_tournament`
given a path, :func:`leagues.league.run_league`) hold ``<database>.lock`` for the whole run, so a
second run on the same file stops at once with a message naming the holder, instead of playing
the same episodes and failing on the unique key of the first it stores.

The lock is ``flock(LOCK_EX | LOCK_NB)`` on that file, which records the holder (pid, host,
what it runs, since when) for the message. The kernel releases it when the holder's process ends
however it ends (SIGKILL included), so a lock file left by a dead run is stale by construction:
the next run takes it over, no clean-up needed. A finished run removes the file. Processes
forked while the lock is held (a process pool's workers) close their copy of its descriptor, so
a worker outliving its run cannot keep the database locked.

Readers (``arena ratings``, ``arena report``) take no lock: they read the file read-only through
SQLite's WAL while a run writes (:mod:`tournaments.database`). Short writes outside a run (a
script calling :class:`tournaments.store.Store`) are serialized by SQLite itself. POSIX only
(``fcntl``); on a network file system the lock is as good as its ``flock`` support.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path


class DatabaseInUse(RuntimeError):
    """Another run holds the database's writer lock."""


_held: set[int] = set()
"""Descriptors of the locks this process holds."""


def _close_in_child() -> None:
    # The child shares the lock through the inherited descriptor; closing its copy (never
    # LOCK_UN, which would release the parent's lock too) leaves the lock to the parent alone.
    for fd in _held:
        with contextlib.suppress(OSError):
            os.close(fd)
    _held.clear()


os.register_at_fork(after_in_child=_close_in_child)


def lock_path(db_path: str | Path) -> Path:
    """The lock file of the database at ``db_path``: ``<database>.lock``."""
    path = Path(db_path)
    return path.with_name(path.name + ".lock")


@contextlib.contextmanager
def writer_lock(db_path: str | Path, purpose: str) -> Iterator[Path]:
    """Hold the writer lock of the database at ``db_path`` while the block runs; ``purpose``
    (e.g. "tournament demo") is shown to a run refused meanwhile. Raises :class:`DatabaseInUse`
    at once when another process (or another block of this one) holds it."""
    path = lock_path(db_path)
    fd = _acquire(path, Path(db_path), purpose)
    _held.add(fd)
    try:
        yield path
    finally:
        _held.discard(fd)
        # Unlink while still holding: a waiting opener of this inode then sees it is gone.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.close(fd)


def _acquire(path: Path, db_path: Path, purpose: str) -> int:
    if not path.parent.is_dir():
        raise FileNotFoundError(f"folder {path.parent} of database {db_path} does not exist")
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            who = os.read(fd, 4096).decode("utf-8", "replace").strip() or "a starting run"
            os.close(fd)
            raise DatabaseInUse(
                f"database {db_path} is in use by another run ({who}); wait for it to finish or "
                "write to another database file"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        # The previous holder may have removed the file between our open and flock: then we
        # locked an orphan inode and must start over on the current file.
        try:
            current = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            current = False
        if current:
            break
        os.close(fd)
    since = datetime.now(timezone.utc).isoformat(timespec="seconds")
    os.ftruncate(fd, 0)
    os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}: {purpose}, since {since}".encode())
    return fd
