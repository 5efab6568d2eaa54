"""Schema migrations: an old database opens, upgraded, with every row kept."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

import pytest
import sqlite_utils

from agents.engine import play_vs_pool
from arena.catalog import load_catalog
from arena.config import get_preset
from arena.rewards import DEFAULT_REWARDS
from arena.scenarios import make_scenarios
from tournaments.rows import encode_episode
from tournaments.schema import EPISODE_COLUMNS, MIGRATIONS, SCHEMA_VERSION, TURN_COLUMNS
from tournaments.store import Store

OLD_LEAGUE_TABLE = """CREATE TABLE IF NOT EXISTS league_runs (
    name TEXT PRIMARY KEY, config TEXT NOT NULL, created TEXT NOT NULL)"""


def old_row(old: sqlite_utils.Database, record) -> dict:
    """The episode row of ``record`` as a database of an older schema holds it: only the
    columns its ``episodes`` table has."""
    row = dict(zip(EPISODE_COLUMNS, encode_episode(record).row, strict=True))
    return {c: row[c] for c in old["episodes"].columns_dict if c in row}


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
        assert store.schema_version() == SCHEMA_VERSION == 7
        assert "resampled_groups" in store.db["training_steps"].columns_dict
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
        *play_vs_pool(config, scenarios, "scripted:prober", ["scripted:time"])[0],
        *play_vs_pool(config, scenarios, "scripted:satisficer", ["scripted:time"])[0],
    ]
    path = tmp_path / "v2.db"
    old = sqlite_utils.Database(path)
    for migrate in MIGRATIONS[:2]:
        migrate(old)
    old.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '2')")
    old.execute("INSERT INTO tournaments (name, config, created) VALUES ('t', '{}', 'now')")
    for record in records:
        old["episodes"].insert({"tournament_id": 1, **old_row(old, record)})
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


def with_tokens(record, seller_tokens: tuple[int, int], buyer_tokens: tuple[int, int]):
    """The record as if its seller and buyer_2 were models that spent these tokens a turn."""
    turns = tuple(
        dataclasses.replace(t, tokens_in=seller_tokens[0], tokens_out=seller_tokens[1])
        if t.agent == "seller"
        else dataclasses.replace(t, tokens_in=buyer_tokens[0], tokens_out=buyer_tokens[1])
        if t.agent == "buyer_2"
        else t
        for t in record.result.turns
    )
    return dataclasses.replace(record, result=dataclasses.replace(record.result, turns=turns))


def test_a_version_3_database_gains_usage_backfilled_from_turns_and_replay_links(tmp_path):
    config = get_preset("in-distribution")
    scenarios = make_scenarios(config, load_catalog(), 1, 3)
    played = play_vs_pool(config, scenarios, "scripted:prober", ["scripted:time"])[0]
    records = [with_tokens(r, (100, 20), (50, 5)) for r in played]
    path = tmp_path / "v3.db"
    old = sqlite_utils.Database(path)
    for migrate in MIGRATIONS[:3]:
        migrate(old)
    old.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '3')")
    old.execute("INSERT INTO tournaments (name, config, created) VALUES ('t', '{}', 'now')")
    for episode_id, record in enumerate(records, start=1):
        encoded = encode_episode(record)
        old["episodes"].insert({"id": episode_id, "tournament_id": 1, **old_row(old, record)})
        for turn in encoded.turns:
            values = dict(zip(TURN_COLUMNS, turn, strict=True))
            old["turns"].insert({"episode_id": episode_id, **values})
    old.conn.commit()
    old.close()
    with Store.open(path) as store:
        assert store.schema_version() == SCHEMA_VERSION
        rows = store.db.execute(
            "SELECT episode_id, seat, agent, tokens_in, tokens_out FROM episode_usage "
            "ORDER BY episode_id, seat"
        ).fetchall()
    expected = []
    for episode_id, record in enumerate(records, start=1):
        for seat, spec, per_turn in (("buyer_2", "scripted:time", (50, 5)),
                                     ("seller", "scripted:prober", (100, 20))):  # fmt: skip
            n = sum(t.agent == seat for t in record.result.turns)
            expected.append((episode_id, seat, spec, n * per_turn[0], n * per_turn[1]))
    assert rows == expected


def test_replays_of_two_parents_on_one_scenario_are_two_episodes_but_a_match_stays_unique(
    tmp_path: Path,
) -> None:
    config = get_preset("in-distribution")
    (record,) = play_vs_pool(
        config, make_scenarios(config, load_catalog(), 1, 1), "scripted:prober", ["scripted:time"]
    )[0]
    with Store.open(tmp_path / "k.db") as store:
        tid = store.tournament_id("t", {})
        store.add_episodes(tid, [record])
        columns = ("tournament_id", *EPISODE_COLUMNS, "parent_id", "from_turn")
        row = encode_episode(record).row
        insert = (
            f"INSERT INTO episodes ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
        )
        for parent, turn in ((1, 2), (1, 3), (5, 2)):
            store.db.execute(insert, [tid, *row, parent, turn])
        with pytest.raises(sqlite3.IntegrityError):
            store.db.execute(insert, [tid, *row, 1, 2])
        with pytest.raises(ValueError, match="already stored"):
            store.add_episodes(tid, [record])


def test_a_version_5_database_reads_its_episodes_as_played_under_the_default_rewards(
    tmp_path: Path,
) -> None:
    """Episodes stored before rewards were a setting (no reward columns, records without
    ``rewards``) keep their rows and read back under the defaults, in the row and the key."""
    config = get_preset("bilateral")
    records = play_vs_pool(
        config, make_scenarios(config, load_catalog(), 2, 4), "scripted:prober", ["scripted:time"]
    )[0]
    path = tmp_path / "v5.db"
    old = sqlite_utils.Database(path)
    for migrate in MIGRATIONS[:5]:
        migrate(old)
    old.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '5')")
    old.execute("INSERT INTO tournaments (name, config, created) VALUES ('t', '{}', 'now')")
    for record in records:
        row = old_row(old, record)
        data = json.loads(row["record"])
        del data["rewards"]
        old["episodes"].insert({"tournament_id": 1, **row, "record": json.dumps(data)})
    old.conn.commit()
    old.close()
    with Store.open(path) as store:
        assert store.schema_version() == SCHEMA_VERSION
        names = store.db.execute(
            "SELECT DISTINCT seller_reward_name, buyer_reward_name FROM episodes"
        ).fetchall()
        keys = store.done_keys(1)
        loaded = store.load_records()
    assert names == [tuple(DEFAULT_REWARDS)]
    assert keys == {r.key for r in records}
    assert [r.rewards for r in loaded] == [DEFAULT_REWARDS] * 4
    assert [r.result.buyer_rewards for r in loaded] == [r.result.buyer_rewards for r in records]
