"""Schema migrations: an old database opens, upgraded, with every row kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlite_utils

from agents.engine import play_scenarios
from arena.catalog import load_catalog
from arena.config import get_preset
from arena.scenarios import make_scenarios
from tournaments.schema import MIGRATIONS, SCHEMA_VERSION
from tournaments.store import Store, encode_episode

OLD_LEAGUE_TABLE = """CREATE TABLE IF NOT EXISTS league_runs (
    name TEXT PRIMARY KEY, config TEXT NOT NULL, created TEXT NOT NULL)"""


def test_opening_a_version_1_database_upgrades_it_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old = sqlite_utils.Database(path)
    MIGRATIONS[0](old)
    old.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '1')")
    old.execute(
        "INSERT INTO agents (spec, role, label, created) "
        "VALUES ('scripted:prober', 'seller', 'prober', '2026-01-01T00:00:00+00:00')"
    )
    old.conn.commit()
    assert "generation" not in old["agents"].columns_dict
    old.close()

    with Store.open(path) as store:
        assert store.schema_version() == SCHEMA_VERSION == 4
        assert {"parent", "generation", "step", "config_hash", "path"} <= set(
            store.db["agents"].columns_dict
        )
        agent_id = store.register_agent("scripted:prober", "seller", generation=3, step=1200)
        row = store.agent(agent_id)
    assert row["label"] == "prober"
    assert (row["generation"], row["step"], row["parent"]) == (3, 1200, None)


def test_a_version_2_database_gains_payoffs_backfilled_from_its_episodes(tmp_path: Path) -> None:
    """A database written before payoffs existed (league tables made outside the migrations)
    upgrades to sums equal to those kept as the same episodes are stored today."""
    config = get_preset("in-distribution")
    scenarios = make_scenarios(config, load_catalog(), 0, 6)
    records = [
        *play_scenarios(config, scenarios, "scripted:prober", ["scripted:time"]),
        *play_scenarios(config, scenarios, "scripted:satisficer", ["scripted:time"]),
    ]
    path = tmp_path / "v2.db"
    old = sqlite_utils.Database(path)
    for migrate in MIGRATIONS[:2]:
        migrate(old)
    old.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '2')")
    old.execute("INSERT INTO tournaments (name, config, created) VALUES ('t', '{}', 'now')")
    columns = [c for c in old["episodes"].columns_dict if c not in ("id", "tournament_id")]
    for record in records:
        old["episodes"].insert(
            {"tournament_id": 1, **dict(zip(columns, encode_episode(record).row, strict=True))}
        )
    old.execute(OLD_LEAGUE_TABLE)
    old.execute("INSERT INTO league_runs VALUES ('kept', '{}', 'then')")
    old.conn.commit()
    old.close()

    with Store.open(path) as store:
        assert store.schema_version() == SCHEMA_VERSION
        assert store.db.execute("SELECT name FROM league_runs").fetchall() == [("kept",)]
        assert "training_steps" in store.db.table_names()
        migrated = store.payoffs([1])
    with Store.open(tmp_path / "new.db") as store:
        store.add_episodes(store.tournament_id("t", {}), records)
        stored = store.payoffs([1])
    assert set(migrated) == {("scripted:prober", ("scripted:time",) * 3),
                             ("scripted:satisficer", ("scripted:time",) * 3)}  # fmt: skip
    for key, sums in stored.items():
        assert migrated[key].episodes == sums.episodes == 6
        assert migrated[key] == pytest.approx(sums)
    assert json.loads(json.dumps(list(migrated.values())))
