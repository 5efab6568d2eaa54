"""A league's stored state: settings checked on resume, stages with typed plans, and an old
database (league tables made outside the migrations) that upgrades cleanly."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest
import sqlite_utils

from leagues.config import LeagueConfig
from leagues.metagame import checkpoints
from leagues.plan import GenerationPlan, eval_tournament
from leagues.state import (
    finish_stage,
    finished,
    generation_state,
    generations,
    league_hash,
    league_records,
    record_step,
    register_league,
    stored_settings,
    tournament_generation,
    training_steps,
)
from leagues.train_config import GRPO_DEFAULTS, RENAMED, TrainConfig, migrate_settings
from tests.leagues.leagues import league_config, scripted_store
from tournaments.config import read_toml_table
from tournaments.runner import run_tournament
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
    del stored["learner"]["train"]["lora"]["lora_dropout"]  # as if the field were new in the code
    del stored["eval_seed"]
    store.db.execute(
        "INSERT INTO league_runs VALUES (?, ?, 'then')", [config.name, json.dumps(stored)]
    )
    store.db.conn.commit()
    register_league(store, config)  # defaults: unchanged
    raw = _raw(tmp_path)
    train = {**raw["learner"]["train"], "lora": {"lora_dropout": 0.1}}
    moved = {**raw, "learner": {**raw["learner"], "train": train}}
    with pytest.raises(ValueError, match=r"differs in: learner.train.lora.lora_dropout"):
        register_league(store, LeagueConfig.from_dict(moved, base=tmp_path))
    store.close()


OLD_TRAIN = {  # learner.train as stored before TRL's names: every field of then, report_to aside
    "loss_type": "cispo", "learning_rate": 0.001, "beta": 0.0, "batch_size": 4, "group_size": 2,
    "micro_batch_size": 4, "epsilon": 0.2, "epsilon_high": 6.0, "scale_rewards": "group",
    "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 16, "max_episode_tokens": 0,
    "lora_r": 16, "lora_alpha": 32, "lora_dropout": 0.0, "lora_target_modules": "all-linear",
    "max_grad_norm": 1.0, "weight_decay": 0.0, "lr_scheduler": "constant", "save_steps": 1,
    "gradient_checkpointing": False, "device": "auto", "dtype": "auto", "use_vllm": False,
    "vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.3, "vllm_server_base_url": "",
    "vllm_max_model_length": 0, "vllm_dtype": "auto", "sampler_ratio_min": 0.8,
    "rollout_kv_cache_mib": 1024, "decode_batch_size": 0,
}  # fmt: skip


def _store_old_shape(store: Store, config: LeagueConfig, train: dict) -> str:
    """The league's row as an older version stored it, ``learner.train`` in the old names."""
    stored = stored_settings(config)
    stored["learner"]["train"] = train
    text = json.dumps(stored, sort_keys=True)
    store.db.execute("INSERT INTO league_runs VALUES (?, ?, 'then')", [config.name, text])
    store.db.conn.commit()
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def test_a_league_stored_with_the_old_training_names_resumes_and_keeps_its_hash(tmp_path):
    store, config = scripted_store(tmp_path)  # the same settings, in TRL's names
    expected = _store_old_shape(store, config, OLD_TRAIN)
    register_league(store, config)  # old -> new before comparing: no difference
    assert league_hash(store, config.name) == expected  # the row as first stored
    other = _raw(tmp_path)
    other["learner"]["train"]["max_completion_length"] = 32
    with pytest.raises(ValueError, match=r"differs in: learner\.train\.max_completion_length"):
        register_league(store, LeagueConfig.from_dict(other, base=tmp_path))
    store.close()


def test_the_old_training_names_map_onto_trls():
    old = {"learner": {"side": "seller", "train": {**OLD_TRAIN, "batch_size": 16, "use_vllm": True,
                                                   "lora_target_modules": "q_proj, v_proj",
                                                   "vllm_max_model_length": 4096}}}  # fmt: skip
    new = migrate_settings(old)
    train = new["learner"]["train"]
    assert new["learner"]["side"] == "seller"
    assert (train["num_generations"], train["per_device_train_batch_size"]) == (2, 4)
    assert train["gradient_accumulation_steps"] == 4  # 16 episodes in passes of 4
    assert (train["max_completion_length"], train["lr_scheduler_type"]) == (16, "constant")
    assert train["lora"] == {"r": 16, "lora_alpha": 32, "lora_dropout": 0.0,
                             "target_modules": ["q_proj", "v_proj"]}  # fmt: skip
    assert (train["vllm_importance_sampling_mode"], train["vllm_importance_sampling_clip_min"],
            train["vllm_importance_sampling_clip_max"]) == ("token_truncate", 0.8, 6.0)  # fmt: skip
    assert train["vllm_max_model_length"] == 4096 and "vllm_server_base_url" not in train
    assert not set(train) & set(RENAMED)
    grpo = {k: v for k, v in train.items() if k not in ("lora", "device", "dtype", "vllm_dtype",
            "max_episode_tokens", "rollout_kv_cache_mib", "decode_batch_size")}  # fmt: skip
    assert TrainConfig.from_dict(train).grpo == {**GRPO_DEFAULTS, **grpo}  # TRL accepts them
    grpo_loss = migrate_settings({"learner": {"train": {**OLD_TRAIN, "use_vllm": True,
                                                        "loss_type": "grpo"}}})  # fmt: skip
    assert grpo_loss["learner"]["train"]["vllm_importance_sampling_mode"] == "sequence_mask"
    assert migrate_settings(new) == new  # the new names come back as they are


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


def test_a_generations_ratings_read_the_rounds_of_generations_up_to_it_only(tmp_path):
    # overlap_evaluation: generation 2's round may be stored while generation 1 is rated.
    store, config = scripted_store(tmp_path)
    later = eval_tournament(config, "t/gen-002-buyer", ["scripted:prober"], [("scripted:time",)])
    run_tournament(later, store, workers=1, progress=False)
    every, _ = league_records(store, "t")
    through_1, entries = league_records(store, "t", through=1)
    assert len(every) - len(through_1) == config.learner.eval_episodes
    assert len(through_1) == len(config.sellers) * len(config.buyers) * config.learner.eval_episodes
    assert entries == [(b,) for b in config.buyers]
    assert league_records(store, "t", through=2)[0] == every


def test_a_tournaments_generation_is_read_from_its_league_name():
    assert tournament_generation("c/gen-000") == 0
    assert tournament_generation("coevolution-seed1/gen-012-seller") == 12
    assert tournament_generation("a/b/gen-003-buyer") == 3
    with pytest.raises(ValueError, match="'c/final' is no league tournament name"):
        tournament_generation("c/final")
