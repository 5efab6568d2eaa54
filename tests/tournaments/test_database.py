"""Opening results files: readers never change a file, and a file that is not a results
database is named as such, by writers and readers alike."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
import sqlite_utils

from tournaments.schema import MIGRATIONS, SCHEMA_VERSION
from tournaments.store import Store, load_records

from .test_store import play


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file of ``folder`` with its bytes: what "nothing changed" is checked against."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def foreign_database(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    conn.execute("INSERT INTO invoices (total) VALUES (9.5)")
    conn.commit()
    conn.close()
    return path


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "is empty, not an arena results database"),
        (b"hello, not a database at all\n" * 10, "is not an SQLite database"),
        (None, "is an SQLite database but not an arena results database (tables invoices"),
    ],
    ids=["empty", "not-sqlite", "foreign-sqlite"],
)
def test_a_reader_names_a_file_that_is_not_a_results_database_and_leaves_it_alone(
    tmp_path: Path, content: bytes | None, message: str
) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    path = folder / "results.db"
    if content is None:
        foreign_database(path)
    else:
        path.write_bytes(content)
    before = snapshot(folder)
    with pytest.raises(ValueError, match=re.escape(f"results.db {message}")):
        Store.open(path, read_only=True)
    with pytest.raises(ValueError, match="not an"):
        load_records(path)
    assert snapshot(folder) == before


@pytest.mark.parametrize("kind", ["not-sqlite", "foreign-sqlite"])
def test_a_writer_refuses_a_foreign_file_before_changing_it(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "results.db"
    if kind == "not-sqlite":
        path.write_text("a,b\n1,2\n")
    else:
        foreign_database(path)
    before = path.read_bytes()
    with pytest.raises(ValueError, match=r"results\.db is .*not an arena results database"):
        Store.open(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.db"]


def test_a_writer_takes_an_empty_file_and_a_reader_a_missing_one_is_refused(
    tmp_path: Path,
) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    with Store.open(empty) as store:
        assert store.schema_version() == SCHEMA_VERSION
    with pytest.raises(FileNotFoundError, match=r"missing\.db does not exist"):
        Store.open(tmp_path / "missing.db", read_only=True)
    assert not (tmp_path / "missing.db").exists()
    with pytest.raises(ValueError, match="is a folder"):
        Store.open(tmp_path, read_only=True)


def test_a_reader_cannot_write(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    Store.open(path).close()
    with Store.open(path, read_only=True) as store, pytest.raises(sqlite3.OperationalError):
        store.tournament_id("t", {})


def test_a_reader_upgrades_an_old_schema_in_memory_and_leaves_the_file_as_it_was(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v1.db"
    old = sqlite_utils.Database(path)
    MIGRATIONS[0](old)
    old.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '1')")
    old.execute("INSERT INTO tournaments (name, config, created) VALUES ('t', '{}', 'then')")
    old.conn.commit()
    old.close()
    before = snapshot(tmp_path)
    with Store.open(path, read_only=True) as store:
        assert store.schema_version() == SCHEMA_VERSION
        assert store.payoffs([1]) == {}
        assert "league_runs" in store.db.table_names()
    assert load_records(path) == []
    assert snapshot(tmp_path) == before


def test_a_reader_sees_what_a_writer_committed_while_the_writer_is_open(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    records = play("in-distribution", "scripted:prober", 4)
    with Store.open(path) as writer:
        tid = writer.tournament_id("t", {})
        writer.add_episodes(tid, records[:2])
        assert len(load_records(path)) == 2
        writer.add_episodes(tid, records[2:])
        with Store.open(path, read_only=True) as reader:
            assert {r.key for r in reader.load_records()} == {r.key for r in records}
