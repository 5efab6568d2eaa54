"""The league loop end to end: a nash league of both sides, and a two-generation league that
survives a SIGKILL without redoing finished work."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from leagues.config import LeagueConfig
from leagues.league import run_league
from leagues.models import base_folder, tiny_model_folder
from tests.leagues.leagues import league_config
from tournaments.store import Store

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_nash_league_of_both_sides_trains_registers_and_rates(tmp_path):
    config = LeagueConfig.from_toml(league_config(tmp_path, "both", "both", "nash"))
    lines: list[str] = []
    summary = run_league(config, tmp_path / "both.db", log=lines.append, report=False)
    assert [g["side"] for g in summary.generations] == ["seller", "buyer"]
    assert all(g["zero_advantage"].endswith("/4") for g in summary.generations)  # 2 steps x 2
    # Checkpoints are LoRA adapters over the one base: the buyer's tournament meets the seller
    # checkpoint too, and the base model is loaded once for both adapters. No merged copy.
    base = tiny_model_folder(config, tmp_path / "files")
    assert (
        f"both/gen-002-buyer: hf:{base}?batch_size=32: 1 model load(s), 2 adapter(s)"
        in "\n".join(lines)
    )
    assert not list((tmp_path / "files").glob("*/merged"))
    with Store.open(tmp_path / "both.db") as store:
        agents = {a["label"]: a for a in store.db.query("SELECT * FROM agents")}
        assert agents["gen-1-seller"]["role"] == "seller"
        adapter = tmp_path / "files" / "gen-001-seller" / "adapter"
        assert agents["gen-1-seller"]["spec"].startswith(f"hf:{base}?lora={adapter}&")
        assert agents["gen-2-buyer"]["role"] == "buyer"
        assert agents["gen-2-buyer"]["parent"] == agents["base"]["id"]
        # The buyer checkpoint met every seller, the seller checkpoint of generation 1 included.
        tournaments = [r[0] for r in store.db.execute("SELECT name FROM tournaments")]
        assert tournaments == ["both/gen-000", "both/gen-001-seller", "both/gen-002-buyer"]
        sellers = {r.seller for r in store.load_records(tournament="both/gen-002-buyer")}
        assert agents["gen-1-seller"]["spec"] in sellers
        plan = json.loads(
            store.db.execute("SELECT plan FROM league_generations WHERE generation = 2").fetchone()[
                0
            ]
        )
        assert plan["opponents"][-1] == agents["gen-1-seller"]["spec"]
        assert np.isclose(sum(plan["weights"]), 1.0)


def _rows(db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


def _rows_once_stored(db: Path, table: str, sql: str) -> list[tuple]:
    """``sql``'s rows, or none while the league has not yet created ``db`` or its ``table``."""
    if not db.exists() or not _rows(db, f"SELECT 1 FROM sqlite_master WHERE name = '{table}'"):
        return []
    return _rows(db, sql)


def _steps_stored(db: Path) -> int:
    return len(_rows_once_stored(db, "training_steps", "SELECT 1 FROM training_steps"))


def _complete_checkpoints(folder: Path) -> list[int]:
    return sorted(
        int(p.name.split("-")[1])
        for p in folder.glob("checkpoint-*")
        if (p / "trainer_state.json").is_file()
    )


@pytest.mark.slow
def test_a_two_generation_league_resumes_after_sigkill_without_redoing_finished_work(tmp_path):
    config_path = league_config(tmp_path, name="kill")
    db = tmp_path / "kill.db"
    command = [
        sys.executable,
        "-m",
        "arena_cli",
        "league",
        "run",
        str(config_path),
        "--db",
        str(db),
    ]
    # The subprocesses import this checkout, whatever copy of the package is installed.
    path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {**os.environ, "PYTHONPATH": path}
    log = (tmp_path / "first.log").open("w")  # a file, not a pipe: a full pipe would block it
    first = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and first.poll() is None:
        if _steps_stored(db) >= 1:
            break
        time.sleep(0.2)
    assert first.poll() is None, (tmp_path / "first.log").read_text()[-2000:]
    first.send_signal(signal.SIGKILL)
    first.wait()
    log.close()
    trainer = tmp_path / "files" / "gen-001-seller" / "trainer"
    saved = max(_complete_checkpoints(trainer), default=0)
    before = {
        step: row
        for step, *row in _rows(db, "SELECT step, logs, logged FROM training_steps ORDER BY step")
    }

    second = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, timeout=300)
    assert second.returncode == 0, second.stderr.decode()[-3000:]

    stages = _rows(db, "SELECT generation, stage FROM league_generations ORDER BY generation")
    assert stages == [(0, "rated"), (1, "rated"), (2, "rated")]
    steps = _rows(db, "SELECT generation, step, league_step FROM training_steps ORDER BY 3")
    assert steps == [(1, 1, 1), (1, 2, 2), (2, 1, 3), (2, 2, 4)]
    after = dict(
        (step, row)
        for step, *row in _rows(
            db, "SELECT step, logs, logged FROM training_steps WHERE generation = 1"
        )
    )
    for step in range(1, saved + 1):
        assert after[step] == before[step], f"step {step} was checkpointed, yet redone"

    agents = _rows(
        db,
        "SELECT id, label, parent, generation, step, config_hash FROM agents "
        "WHERE generation IS NOT NULL ORDER BY generation",
    )
    base, gen1, gen2 = agents
    assert (base[1], gen1[1], gen2[1]) == ("base", "gen-1-seller", "gen-2-seller")
    assert gen1[2] == base[0] and gen2[2] == gen1[0]
    assert (gen1[3], gen1[4], gen2[3], gen2[4]) == (1, 2, 2, 4)
    assert len({a[5] for a in agents}) == 1

    episodes = _rows(
        db,
        "SELECT t.name, COUNT(*) FROM episodes e JOIN tournaments t "
        "ON t.id = e.tournament_id GROUP BY t.name ORDER BY t.name",
    )
    assert episodes == [
        ("kill/gen-000", 3 * 2 * 4),
        ("kill/gen-001-seller", 2 * 4),
        ("kill/gen-002-seller", 2 * 4),
    ]
    ratings = _rows(
        db,
        "SELECT generation, label, rating, ci_low, ci_high FROM league_ratings "
        "WHERE role = 'seller' AND rating IS NOT NULL",
    )
    assert {(g, label) for g, label, *_ in ratings} >= {(2, "gen-2-seller"), (1, "gen-1-seller")}
    for _, _, rating, low, high in ratings:
        assert low <= rating + 1e-6 and rating <= high + 1e-6
    report = tmp_path / "files" / "report"
    assert (report / "league_kill_training.png").is_file()
    assert "League kill: ratings per generation" in (report / "index.html").read_text()


def _merged_copy(base: Path, adapter: Path) -> Path:
    """The evaluation copy leagues used to write: the adapter merged into the base model."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from leagues.trainer import load_chat_tokenizer

    out = adapter.parent / "merged"
    model = AutoModelForCausalLM.from_pretrained(str(base))
    PeftModel.from_pretrained(model, str(adapter)).merge_and_unload().save_pretrained(str(out))
    load_chat_tokenizer(base).save_pretrained(str(out))
    return out


@pytest.mark.slow
def test_a_league_stored_with_merged_checkpoints_resumes_and_meets_them(tmp_path, monkeypatch):
    """A league whose first generation was registered the old way (a merged copy evaluated as
    its own hf model) grows a second generation: the buyer checkpoint, an adapter, meets the
    stored seller checkpoint under its old spec."""
    import leagues.league as league_module
    from leagues.plan import model_spec

    def merged_spec(config, model, adapter=None):
        return model_spec(config, model if adapter is None else _merged_copy(model, adapter))

    path = league_config(tmp_path, "old", "both", "uniform")
    one = LeagueConfig.from_toml(path)
    monkeypatch.setattr(league_module, "model_spec", merged_spec)
    run_league(dataclasses.replace(one, generations=1), tmp_path / "old.db", lambda _m: None, False)
    monkeypatch.undo()
    summary = run_league(one, tmp_path / "old.db", log=lambda _m: None, report=False)
    assert [g["stage"] for g in summary.generations] == ["rated", "rated"]
    with Store.open(tmp_path / "old.db") as store:
        specs = {a["label"]: a["spec"] for a in store.db.query("SELECT * FROM agents")}
        sellers = {r.seller for r in store.load_records(tournament="old/gen-002-buyer")}
    assert specs["gen-1-seller"].startswith(
        f"hf:{tmp_path / 'files' / 'gen-001-seller' / 'merged'}?"
    )
    assert "?lora=" in specs["gen-2-buyer"]
    assert specs["gen-1-seller"] in sellers
    assert {r["label"] for r in summary.ratings} >= {"gen-1-seller", "gen-2-buyer", "base"}


SEEDED = """
[league]
name = "same"
generations = 1
seed = 3
sellers = ["scripted:satisficer"]
buyers = ["scripted:time"]
cpu_threads = 1
bootstrap_rounds = 20
workers = {workers}
overlap_evaluation = {overlap}

[league.learner]
model = "tiny"
steps_per_generation = 2
opponents = "uniform"                 # reads no evaluation: generation 0's may play beside
eval_episodes = 4
prompt = "compact"
steer = "legal"
warm_start = "scripted:prober"
warm_start_episodes = 8
warm_start_steps = 4
train_market = {{ price_jitter = 0.5 }}

[league.learner.tiny]
copy_pretrain_steps = 4

[league.learner.train]
num_generations = 2
per_device_train_batch_size = 2
gradient_accumulation_steps = 2
learning_rate = 1e-3
max_completion_length = 16
temperature = 1.0
"""


def _stored(db: Path, folder: Path) -> list[str]:
    """Every stored episode as JSON, the run's own folder written as <folder>."""
    with Store.open(db, read_only=True) as store:
        records = store.load_records()
    return sorted(json.dumps(r.to_dict(), sort_keys=True).replace(str(folder), "<folder>")
                  for r in records)  # fmt: skip


def _ratings(db: Path, folder: Path) -> list[tuple]:
    """The stored ratings of every generation, the run's own folder written as <folder>."""
    rows = _rows(db, "SELECT generation, role, agent, rating, ci_low, ci_high, games "
                     "FROM league_ratings ORDER BY generation, role, agent")  # fmt: skip
    return [tuple(str(v).replace(str(folder), "<folder>") for v in row) for row in rows]


@pytest.mark.slow
def test_two_runs_of_a_seeded_league_store_identical_episodes_and_weights(tmp_path):
    # The second run evaluates on two worker processes (each evaluation in two chunks of two
    # episodes), the third plays generation 0's round-robin in a background process while
    # generation 1 trains (overlap_evaluation): where and when an episode is played changes
    # none of its random numbers, nor the ratings.
    from safetensors.numpy import load_file

    runs, logs = [], {}
    for name, workers, overlap in (("one", 1, "false"), ("two", 2, "false"),
                                   ("beside", 2, "true")):  # fmt: skip
        folder = tmp_path / name
        folder.mkdir()
        (folder / "l.toml").write_text(SEEDED.format(workers=workers, overlap=overlap))
        config = LeagueConfig.from_toml(folder / "l.toml")
        logs[name] = []
        run_league(config, folder / "l.db", log=logs[name].append, report=False)
        runs.append(folder)
    # One process loads the model for its evaluations; with workers, the workers do; beside
    # training, the background process plays generation 0 and reports its load.
    loads = {
        name: [line for line in lines if "model load(s)" in line] for name, lines in logs.items()
    }
    assert len(loads["one"]) == 2 and loads["two"] == [], loads
    assert [line.split(":")[0] for line in loads["beside"]] == ["same/gen-000"], loads
    beside = logs["beside"]
    training = next(i for i, line in enumerate(beside) if line.startswith("generation 1: train"))
    played = next(i for i, line in enumerate(beside) if line.startswith("same/gen-000: 8 epi"))
    assert training < played, beside
    assert re.fullmatch(r"same/gen-000: 8 episodes played in \d+ s \(0 found already stored\)",
                        beside[played])  # fmt: skip
    one, two, third = runs
    config = LeagueConfig.from_toml(one / "l.toml")
    assert _stored(one / "l.db", one) == _stored(two / "l.db", two)
    assert _stored(one / "l.db", one) == _stored(third / "l.db", third)
    assert _ratings(one / "l.db", one) == _ratings(third / "l.db", third)
    assert len(_ratings(one / "l.db", one)) >= 4
    assert [r[0] for r in _rows(third / "l.db", "SELECT stage FROM league_generations")] == [
        "rated",
        "rated",
    ]

    def weights(run: Path) -> list[Path]:
        bases = base_folder(config, run / "runs" / "same")
        return [
            tiny_model_folder(config, run / "runs" / "same") / "model.safetensors",  # built
            bases / "warm-start" / "model.safetensors",  # fitted on scripted transcripts
            run / "runs" / "same" / "gen-001-seller" / "adapter" / "adapter_model.safetensors",
        ]

    for other in (two, third):
        for first, second in zip(weights(one), weights(other), strict=True):
            a, b = load_file(str(first)), load_file(str(second))
            assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a), second
    recorded = [json.loads((run / "runs" / "same" / "gen-001-seller" / "league.json").read_text())
                for run in runs]  # fmt: skip
    assert (
        recorded[0]["training_seed"] == recorded[1]["training_seed"] == recorded[2]["training_seed"]
    )
    assert (recorded[0]["league_seed"], recorded[0]["base_seed"]) == (3, 3)
    # Sampled, not greedy: the model's evaluation replies differ from episode to episode, so
    # equal stores mean equal random streams (tests/leagues/test_trainer_update.py checks that
    # a seeded GRPO step moves the weights and reproduces them).
    with Store.open(one / "l.db", read_only=True) as store:
        base = [r for r in store.load_records() if r.seller.startswith("hf:")]
        texts = {t.text for r in base if "lora=" not in r.seller for t in r.result.turns
                 if t.agent == "seller"}  # fmt: skip
    assert len(texts) >= 3


def _alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie awaiting its reaper does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _spawned_workers(pid: int) -> list[int]:
    """The multiprocessing workers ``pid`` spawned (its children running ``spawn_main``; the
    resource tracker, also a child, runs another command)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            command = (stat.parent / "cmdline").read_bytes()
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
        if parent == pid and b"spawn_main" in command:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc")
def test_a_league_killed_while_its_round_plays_beside_training_resumes_to_the_same_results(
    tmp_path,
):
    # SIGKILL once generation 1 trains and generation 0's round is queued beside it: the
    # background process dies with the league, and the resumed run replays that round (no stage
    # of generation 0 was recorded; stored episodes would be skipped) to the episodes and
    # ratings of an uninterrupted run in one process.
    runs = {}
    for name, workers, overlap in (("one", 1, "false"), ("killed", 2, "true")):
        runs[name] = tmp_path / name
        runs[name].mkdir()
        (runs[name] / "l.toml").write_text(SEEDED.format(workers=workers, overlap=overlap))
    one, killed = runs["one"], runs["killed"]
    run_league(LeagueConfig.from_toml(one / "l.toml"), one / "l.db", log=lambda _m: None,
               report=False)  # fmt: skip

    db = killed / "l.db"
    path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    command = [sys.executable, "-m", "arena_cli", "league", "run", "l.toml", "--db", str(db)]
    with (killed / "first.log").open("w") as log:
        first = subprocess.Popen(command, cwd=killed, env={**os.environ, "PYTHONPATH": path},
                                 stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
        deadline = time.monotonic() + 240
        started = []
        while time.monotonic() < deadline and first.poll() is None and not started:
            started = _rows_once_stored(
                db, "league_generations", "SELECT 1 FROM league_generations WHERE generation = 1"
            )
            time.sleep(0.1)
        assert first.poll() is None and started, (killed / "first.log").read_text()[-2000:]
        background = _spawned_workers(first.pid)
        first.send_signal(signal.SIGKILL)
        first.wait()
    assert background, "the league had no background process when it was killed"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(_alive(p) for p in background):
        time.sleep(0.2)
    assert not any(_alive(p) for p in background), "the background process outlived the league"
    stages = _rows(db, "SELECT generation, stage FROM league_generations ORDER BY generation")
    assert all(g == 1 for g, _ in stages), stages  # generation 0's round had not finished

    lines: list[str] = []
    run_league(LeagueConfig.from_toml(killed / "l.toml"), db, log=lines.append, report=False)
    assert [r[0] for r in _rows(db, "SELECT stage FROM league_generations")] == ["rated", "rated"]
    assert _stored(db, killed) == _stored(one / "l.db", one)
    assert _ratings(db, killed) == _ratings(one / "l.db", one)
    assert any(line.startswith("generation 1: train") for line in lines), lines


def test_a_generation_folder_trained_by_another_runs_settings_is_refused_not_resumed(tmp_path):
    from leagues.folders import claim_folder

    folder = tmp_path / "runs" / "same" / "gen-001-seller"
    claim_folder(folder, "same", "aaaa")  # first run: claims the folder
    claim_folder(folder, "same", "aaaa")  # the same run resumed: fine
    with pytest.raises(ValueError, match=r"gen-001-seller holds a checkpoint .* other settings"):
        claim_folder(folder, "same", "bbbb")  # a second database, other settings
    finished = tmp_path / "older" / "gen-001-seller"  # written before run.json existed
    finished.mkdir(parents=True)
    (finished / "league.json").write_text(json.dumps({"config_hash": "aaaa"}))
    with pytest.raises(ValueError, match="config hash aaaa, this run's bbbb"):
        claim_folder(finished, "same", "bbbb")
