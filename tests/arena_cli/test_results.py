"""``arena ratings`` and ``arena report``: read-only, readable while a run writes, and one-line
errors."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from .cli import arena, foreign_sqlite, one_error, running_tournament, tournament_toml, write


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results database of a small tournament ("t")."""
    folder = tmp_path_factory.mktemp("stored")
    db = folder / "t.db"
    result = arena("tournament", "run", str(tournament_toml(folder)), "--db", str(db))
    assert result.exit_code == 0, result.output
    return db


def bad_databases(folder: Path) -> dict[Path, str]:
    """Files that are not results databases, with what the error must say of each."""
    empty = folder / "empty.db"
    empty.touch()
    return {
        folder / "missing.db": "missing.db does not exist",
        write(folder / "notes.db", "not sqlite\n" * 20): "notes.db is not an SQLite database",
        empty: "empty.db is empty, not an arena results database",
        foreign_sqlite(folder / "other.db"): "other.db is an SQLite database but not an arena",
        folder: "is a folder, not a results database file",
    }


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def test_ratings_bad_inputs_print_one_error_line_and_change_no_file(
    tmp_path: Path, stored: Path
) -> None:
    bad = bad_databases(tmp_path)
    before = files(tmp_path)
    for db, needle in bad.items():
        assert needle in one_error("ratings", "--db", str(db)), db
    assert files(tmp_path) == before, "a read-only command created or changed a file"
    assert not (tmp_path / "missing.db").exists()
    cases = {
        ("--role", "king"): "--role must be seller, buyer or cross, not 'king'",
        ("--tournament", "nope"): "no tournament named 'nope'",
        ("--anchor", "scripted:time"): "is not among the rated players",
        ("--json", str(tmp_path / "no" / "r.json")): f"folder {tmp_path / 'no'} does not exist",
        ("--json", str(tmp_path)): "is a folder; give a file name",
        ("--bogus",): "No such option: --bogus",
    }
    for args, needle in cases.items():
        assert needle in one_error("ratings", "--db", str(stored), *args), args
    assert "Missing option '--db'" in one_error("ratings")


def test_report_bad_inputs_print_one_error_line_and_change_no_file(
    tmp_path: Path, stored: Path
) -> None:
    bad = bad_databases(tmp_path)
    before = files(tmp_path)
    for db, needle in bad.items():
        assert needle in one_error("report", "--db", str(db), "--out", str(tmp_path / "r")), db
    assert files(tmp_path) == before
    a_file = write(tmp_path / "page.html", "")
    cases = {
        ("--out", str(a_file)): "--out " + str(a_file) + " is a file; give a folder",
        ("--out", str(a_file / "sub")): f"{a_file} is a file, so the folder cannot be made",
    }
    for args, needle in cases.items():
        assert needle in one_error("report", "--db", str(stored), *args), args
    assert "Missing option '--out'" in one_error("report", "--db", str(stored))


@pytest.mark.slow
def test_ratings_and_report_read_a_database_while_a_tournament_writes_it(tmp_path: Path) -> None:
    """Readers see the batches committed so far (WAL), never a lock error, while a real
    `arena tournament run` in another process keeps writing."""
    with running_tournament(tmp_path) as (writer, db):
        seen: list[int] = []
        deadline = time.monotonic() + 120  # a loaded machine writes slowly; readers keep reading
        while len(seen) < 3 or seen[-1] == seen[0]:
            assert time.monotonic() < deadline, f"the readers saw no new episodes: {seen}"
            out = tmp_path / "ratings.json"
            result = arena("ratings", "--db", str(db), "--json", str(out))
            assert result.exit_code == 0, result.output
            seen.append(sum(row["episodes"] for row in json.loads(out.read_text())))
        result = arena("report", "--db", str(db), "--out", str(tmp_path / "site"))
        assert result.exit_code == 0, result.output
        assert (tmp_path / "site" / "index.html").is_file()
        assert writer.poll() is None, "the tournament must still be writing for this to mean much"
    assert 0 < seen[0] < seen[-1] and seen == sorted(seen)
