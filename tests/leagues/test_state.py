"""A league's stored state: settings checked on resume, stages with typed plans, and an old
database (league tables made outside the migrations) that upgrades cleanly."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import sqlite_utils

from leagues.config import LeagueConfig
from leagues.metagame import checkpoints
from leagues.plan import GenerationPlan
from leagues.state import (
    finish_stage,
    finished,
    generation_state,
    generations,
    record_step,
    register_league,
    stored_settings,
    training_steps,
)
from tests.leagues.leagues import league_config, scripted_store
from tournaments.config import read_toml_table
from tournaments.schema import MIGRATIONS, SCHEMA_VERSION
from tournaments.store import Store

OLD_TABLES = (  # as leagues/league.py created them before migration 3
    "CREATE TABLE league_runs (name TEXT PRIMARY KEY, config TEXT NOT NULL, created TEXT NOT NULL)",
    "CREATE TABLE league_generations (league TEXT NOT NULL, generation INTEGER NOT NULL, "
    "side TEXT NOT NULL, stage TEXT NOT NULL, plan TEXT NOT NULL, updated TEXT NOT NULL, "
    "PRIMARY KEY (league, generation))",
)


def _raw(tmp_path: Path) -> dict:
    return read_toml_table(league_config(tmp_path), "league")


def test_a_stored_league_with_other_settings_is_refused_but_may_grow(tmp_path):
    store, config = scripted_store(tmp_path)
    register_league(store, config)
    longer = LeagueConfig.from_dict({**_raw(tmp_path), "generations": 5}, base=tmp_path)
    register_league(store, longer)
    with pytest.raises(ValueError, match=r"already stored in .*\(differs in: seed\)"):
        register_league(store, LeagueConfig.from_dict({**_raw(tmp_path), "seed": 9}, base=tmp_path))
    store.close()


def test_a_setting_added_since_the_league_was_stored_keeps_it_resumable(tmp_path):
    store, config = scripted_store(tmp_path)
    stored = stored_settings(config)
    del stored["learner"]["train"]["lora_dropout"]  # as if the field were new in the code
    del stored["eval_seed"]
    store.db.execute(
        "INSERT INTO league_runs VALUES (?, ?, 'then')", [config.name, json.dumps(stored)]
    )
    store.db.conn.commit()
    register_league(store, config)  # defaults: unchanged
    raw = _raw(tmp_path)
    moved = {**raw, "learner": {**raw["learner"], "train": {**raw["learner"]["train"],
                                                             "lora_dropout": 0.1}}}  # fmt: skip
    with pytest.raises(ValueError, match=r"differs in: learner.train.lora_dropout"):
        register_league(store, LeagueConfig.from_dict(moved, base=tmp_path))
    store.close()


def test_stages_finish_in_order_with_their_plans(tmp_path):
    with Store.open(tmp_path / "s.db") as store:
        assert generation_state(store, "t", 1) == (None, None)
        plan = GenerationPlan(label="gen-1-seller", side="seller", opponents=("a",), weights=(1.0,))
        finish_stage(store, "t", 1, "sampled", plan)
        registered = dataclasses.replace(plan, checkpoint={"seller": "hf:/c"})
        finish_stage(store, "t", 1, "registered", registered)
        stage, loaded = generation_state(store, "t", 1)
        assert (stage, loaded) == ("registered", registered)
        assert finished(stage, "trained") and not finished(stage, "evaluated")
        assert [m.spec for m in checkpoints(store, "t", "seller")] == ["hf:/c"]
        assert checkpoints(store, "t", "buyer") == []


def test_a_database_from_before_migration_3_keeps_its_league(tmp_path):
    path = tmp_path / "old.db"
    old = sqlite_utils.Database(path)
    for migrate in MIGRATIONS[:2]:
        migrate(old)
    old.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '2')")
    for ddl in OLD_TABLES:
        old.execute(ddl)
    plan = {"side": "seller", "label": "gen-1-seller", "parent": "hf:/m", "parent_label": "base",
            "parent_adapter": None, "opponents": ["scripted:time"], "weights": [1.0],
            "adapter": "/a", "checkpoint": {"seller": "hf:/c1"}}  # fmt: skip
    old.execute(
        "INSERT INTO league_generations VALUES ('t', 1, 'seller', 'rated', ?, 'then')",
        [json.dumps(plan)],
    )
    old.conn.commit()
    old.close()
    with Store.open(path) as store:
        assert store.schema_version() == SCHEMA_VERSION
        ((g, stage, loaded),) = generations(store, "t")
        assert (g, stage, loaded.checkpoint, loaded.weights) == (1, "rated", {"seller": "hf:/c1"},
                                                                  (1.0,))  # fmt: skip
        assert {"training_steps", "league_ratings", "payoffs"} <= set(store.db.table_names())


def test_a_league_resumes_with_other_loggers_and_keeps_its_hash(tmp_path):
    store, config = scripted_store(tmp_path)
    register_league(store, config)
    raw = _raw(tmp_path)
    train = {**raw["learner"].get("train", {}), "report_to": ["tensorboard", "wandb"]}
    logged = LeagueConfig.from_dict({**raw, "learner": {**raw["learner"], "train": train}},
                                    base=tmp_path)  # fmt: skip
    assert logged.learner.train.report_to == ("tensorboard", "wandb")
    register_league(store, logged)  # where the metrics are also logged changes no result
    assert logged.config_hash() == config.config_hash()
    assert "report_to" not in json.dumps(stored_settings(logged))
    store.close()


def test_a_version_3_database_keeps_its_steps_and_stores_the_training_story_after_upgrade(
    tmp_path,
):
    path = tmp_path / "v3.db"
    old = sqlite_utils.Database(path)
    for migrate in MIGRATIONS[:3]:
        migrate(old)
    old.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '3')")
    old.execute(
        "INSERT INTO training_steps (league, generation, step, league_step, side, reward, logs, "
        "logged) VALUES ('t', 1, 1, 1, 'seller', -0.5, '{}', 'then')"
    )
    old.conn.commit()
    old.close()
    logs = {"reward": 0.25, "violation_rate": 0.125, "zero_advantage_groups": 3.0,
            "sampling/sampling_logp_difference/mean": 2e-7, "deal_rate": 0.5}  # fmt: skip
    with Store.open(path) as store:
        assert store.schema_version() == SCHEMA_VERSION
        record_step(store, "t", 1, "seller", 2, 2, logs)
        rows = training_steps(store, "t")
    assert [(r["step"], r["reward"]) for r in rows] == [(1, -0.5), (2, 0.25)]
    assert rows[0]["violation_rate"] is None and rows[0]["zero_advantage_groups"] is None
    assert (rows[1]["violation_rate"], rows[1]["zero_advantage_groups"]) == (0.125, 3.0)
    assert rows[1]["sampler_logp_diff"] == 2e-7 and rows[1]["deal_rate"] == 0.5
