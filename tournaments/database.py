"""Opening a results database file, as its writer or read-only, with errors that name the file.

A results database is an SQLite file whose ``meta`` table holds its ``schema_version``
(:mod:`tournaments.schema`). :class:`tournaments.store.Store` opens files through here:

* **writers** (``Store.open(path)``: tournament and league runs) create the file when it is
  missing or empty and switch it to WAL; they refuse a file that is not SQLite, or an SQLite
  file that holds other tables but no ``meta`` (someone else's database), before changing it;
* **readers** (``Store.open(path, read_only=True)``: ``arena ratings``, ``arena report``) open
  with SQLite's ``mode=ro`` and never create or change the file: a missing, empty, non-SQLite
  or non-arena file is an error that says so. Through WAL they read the last committed batch
  while a run is writing. SQLite itself may leave the empty ``-wal`` and ``-shm`` side files
  of a WAL reader beside the database; the next writer removes them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

BUSY_TIMEOUT = 60.0
"""Seconds a connection waits for another process's write lock before giving up."""


def _tables(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
    return [name for (name,) in rows]


def _check_results_tables(conn: sqlite3.Connection, path: Path, empty_ok: bool) -> None:
    """Refuse a file that is not an arena results database (``empty_ok``: an empty one is)."""
    tables = _tables(conn)
    if "meta" in tables:
        return
    if not tables:
        if empty_ok:
            return
        raise ValueError(
            f"{path} is empty, not an arena results database; run a tournament into it first "
            "(arena tournament run CONFIG --db FILE)"
        )
    shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
    raise ValueError(
        f"{path} is an SQLite database but not an arena results database (tables {shown}; no "
        "meta table); give another file"
    )


def _unreadable(path: Path, exc: sqlite3.Error) -> ValueError:
    if "file is not a database" in str(exc):
        return ValueError(f"{path} is not an SQLite database, so not an arena results database")
    return ValueError(f"cannot open results database {path}: {exc}")


def _check_path(path: Path) -> None:
    if path.is_dir():
        raise ValueError(f"{path} is a folder, not a results database file")


def _checked(
    conn: sqlite3.Connection, path: Path, setup: Callable[[sqlite3.Connection], None]
) -> sqlite3.Connection:
    """``conn`` once ``setup`` ran on it; closed (and an SQLite error named) if it failed."""
    try:
        setup(conn)
    except sqlite3.Error as exc:
        conn.close()
        raise _unreadable(path, exc) from None
    except BaseException:
        conn.close()
        raise
    return conn


def connect_writer(path: Path) -> sqlite3.Connection:
    """A read-write connection to ``path`` in WAL mode, the file created when missing."""
    if not path.parent.is_dir():
        raise FileNotFoundError(f"folder {path.parent} of database {path} does not exist")
    _check_path(path)
    try:
        conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT)
    except sqlite3.Error as exc:
        raise _unreadable(path, exc) from None

    def setup(conn: sqlite3.Connection) -> None:
        _check_results_tables(conn, path, empty_ok=True)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")

    return _checked(conn, path, setup)


def connect_reader(path: Path) -> sqlite3.Connection:
    """A read-only connection to the existing arena results database at ``path``."""
    if not path.exists():
        raise FileNotFoundError(f"results database {path} does not exist")
    _check_path(path)
    try:
        conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, timeout=BUSY_TIMEOUT)
    except sqlite3.Error as exc:
        raise _unreadable(path, exc) from None
    return _checked(conn, path, lambda c: _check_results_tables(c, path, empty_ok=False))


def in_memory_copy(conn: sqlite3.Connection) -> sqlite3.Connection:
    """A private in-memory copy of ``conn``'s database (which is closed): a reader upgrades an
    old schema there, leaving the file as it is."""
    copy = sqlite3.connect(":memory:")
    try:
        conn.backup(copy)
    finally:
        conn.close()
    return copy
