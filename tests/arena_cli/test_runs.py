"""``arena tournament run`` and ``arena league run``: one-line errors before any work, and one
run per database at a time."""

from __future__ import annotations

from pathlib import Path

import pytest

from .cli import (
    REPO,
    arena,
    foreign_sqlite,
    one_error,
    running_tournament,
    stored_episodes,
    tournament_toml,
    write,
)

LEAGUE = REPO / "examples" / "tiny-league.toml"


def test_tournament_run_bad_inputs_print_one_error_line(tmp_path: Path) -> None:
    good = tournament_toml(tmp_path)
    db = str(tmp_path / "t.db")
    configs = {
        write(tmp_path / "syntax.toml", "[tournament\nname ="): "syntax.toml is not valid TOML",
        tmp_path / "missing.toml": "cannot read tournament config",
        write(tmp_path / "preset.toml", good.read_text() + 'preset = "galaxy"\n'): (
            "unknown preset 'galaxy'"
        ),
        write(
            tmp_path / "spec.toml", good.read_text().replace("scripted:time", "scripted:nobody")
        ): "tournament.buyers[0][0]: unknown scripted buyer 'nobody'",
        write(tmp_path / "seed.toml", good.read_text() + "seed = -1\n"): (
            "tournament.seed must be >= 0, got -1"
        ),
        write(tmp_path / "key.toml", good.read_text() + "colour = 1\n"): "colour",
    }
    for config, needle in configs.items():
        assert needle in one_error("tournament", "run", str(config), "--db", db), config
    (tmp_path / "folder.db").mkdir()
    options = {
        ("--db", str(write(tmp_path / "n.db", "x" * 200))): "n.db is not an SQLite database",
        ("--db", str(foreign_sqlite(tmp_path / "f.db"))): "f.db is an SQLite database but not an",
        ("--db", str(tmp_path / "no" / "t.db")): f"folder {tmp_path / 'no'} does not exist",
        ("--db", str(tmp_path / "folder.db")): "folder.db is a folder; give a file name",
        ("--workers", "0"): "Invalid value for '--workers'",
        ("--chunk-size", "0"): "Invalid value for '--chunk-size'",
        ("--executor", "slurm"): "executor must be one of local, ray, got 'slurm'",
    }
    for args, needle in options.items():
        assert needle in one_error("tournament", "run", str(good), "--db", db, *args), args
    assert not Path(db).exists(), "no failed run may leave a database behind"
    assert "Missing argument" in one_error("tournament", "run")


def test_league_run_bad_inputs_print_one_error_line(tmp_path: Path) -> None:
    good = LEAGUE.read_text()
    configs = {
        write(tmp_path / "syntax.toml", "[league\n"): "syntax.toml is not valid TOML",
        tmp_path / "missing.toml": "cannot read league config",
        write(tmp_path / "t.toml", "[tournament]\n"): "unknown table(s) tournament; use [league]",
        write(tmp_path / "preset.toml", good.replace('"in-distribution"', '"galaxy"')): (
            "unknown preset 'galaxy'"
        ),
        write(tmp_path / "spec.toml", good.replace('"scripted:prober"', '"scripted:nobody"')): (
            "league.sellers[1]: unknown scripted seller 'nobody'"
        ),
        write(tmp_path / "ex.toml", good.replace("[league]\n", '[league]\nexecutor = "slurm"\n')): (
            "league.executor must be one of local, ray"
        ),
    }
    db = str(tmp_path / "l.db")
    for config, needle in configs.items():
        assert needle in one_error("league", "run", str(config), "--db", db), config
    options = {
        ("--db", str(write(tmp_path / "n.db", "x" * 200))): "n.db is not an SQLite database",
        ("--db", str(tmp_path / "no" / "l.db")): f"folder {tmp_path / 'no'} does not exist",
    }
    for args, needle in options.items():
        assert needle in one_error("league", "run", str(LEAGUE), *args), args
    assert not Path(db).exists()


def test_league_run_ray_address_evaluates_on_that_cluster(tmp_path, monkeypatch) -> None:
    import arena_cli.runs as runs

    seen = []
    monkeypatch.setattr(runs, "run_seeds", lambda config, db, seeds: seen.append(config) or [])
    arena("league", "run", str(LEAGUE), "--db", str(tmp_path / "l.db"), "--ray-address", "h:6379")
    arena("league", "run", str(LEAGUE), "--db", str(tmp_path / "l.db"))
    assert [(c.executor, c.ray_address) for c in seen] == [("ray", "h:6379"), ("local", "")]


@pytest.mark.slow
def test_a_second_run_on_a_database_in_use_stops_at_once_naming_the_first(
    tmp_path: Path,
) -> None:
    """It used to play on and die on a unique-key error mid-run."""
    other = write(
        tmp_path / "t2.toml",
        tournament_toml(tmp_path).read_text().replace('name = "t"', 'name = "t2"'),
    )
    with running_tournament(tmp_path) as (writer, db):
        holder = f"is in use by another run (pid {writer.pid} on "
        for command in (["tournament", "run", str(other)], ["league", "run", str(LEAGUE)]):
            line = one_error(*command, "--db", str(db))
            assert holder in line and "tournament t, since" in line, line
        assert writer.poll() is None
    assert not (tmp_path / "runs").exists(), "the refused league created its folder"
    # The killed writer left its lock file: the next run takes the lock over and runs.
    before = stored_episodes(db)
    result = arena("tournament", "run", str(other), "--db", str(db))
    assert result.exit_code == 0, result.output
    assert stored_episodes(db) == before + 12


@pytest.mark.slow
def test_league_run_of_a_buyer_league_over_seeds_sums_up_the_buyers_gains(tmp_path) -> None:
    """It used to end a finished multi-seed buyer league with an error: the table across the
    seeds looked for the base among the sellers."""
    from tests.leagues.leagues import league_config

    text = league_config(tmp_path, "bl", side="buyer").read_text()
    text = text.replace("\ngenerations = 2", "\ngenerations = 1")
    text = text.replace("steps_per_generation = 2", "steps_per_generation = 1\nbase_seed = 0")
    config = write(tmp_path / "bl.toml", text)
    result = arena("league", "run", str(config), "--db", str(tmp_path / "bl.db"), "--seeds", "0,1")
    assert result.exit_code == 0, result.output
    assert "buyer learning across 2 seeds" in result.output
    assert "seller learning across" not in result.output  # a buyer league trains no seller
    assert "gain across seeds" in result.output and "error" not in result.output


def test_league_run_seeds_runs_the_recipe_once_per_seed(tmp_path, monkeypatch) -> None:
    import arena_cli.runs as runs

    seen = []
    monkeypatch.setattr(runs, "run_seeds", lambda config, db, seeds: seen.append(seeds) or [])
    arena("league", "run", str(LEAGUE), "--db", str(tmp_path / "l.db"), "--seeds", "0,1,2")
    arena("league", "run", str(LEAGUE), "--db", str(tmp_path / "l.db"))
    assert seen == [[0, 1, 2], None]  # None: the config's own seeds, else its seed
    message = one_error("league", "run", str(LEAGUE), "--db", str(tmp_path / "l.db"),
                        "--seeds", "0,x")  # fmt: skip
    assert "--seeds" in message and "0,x" in message
