"""The ray executor's pool (tournaments/ray_pool.py) on a real two-node Ray cluster on this
machine: an LLM tournament on the pool stores what one process stores, a model loads once per
actor, and a worker node killed mid-round, or between two runs of a kept pool, costs no episode
and stores none twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from tests.ray_cluster import actor_nodes, kill_node, two_node_cluster
from tests.tournaments.test_runner import contents, stored_count, write_toml
from tournaments.config import TournamentConfig
from tournaments.ray_actors import backend_key
from tournaments.ray_pool import ActorPool
from tournaments.runner import run_tournament
from tournaments.store import load_records


def llm_tournament(model: Path, episodes: int = 12) -> TournamentConfig:
    """An hf seller and a pool with an hf buyer seat, beside scripted pairings."""
    spec = f"hf:{model}?max_tokens=12&batch_size=4"
    return TournamentConfig.from_dict(
        {
            "name": "pooled",
            "episodes": episodes,
            "sellers": [spec, "scripted:prober"],
            "buyers": ["scripted:time", [spec, "scripted:time"]],
        }
    )


@pytest.fixture(scope="module")
def reference(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tournament played in this process."""
    from agents.backends import close_backends

    db = tmp_path_factory.mktemp("local") / "local.db"
    run_tournament(llm_tournament(tiny_model_dir), db, workers=1, progress=False, chunk_size=4)
    close_backends()
    return db


@pytest.fixture(scope="module")
def cluster():
    with two_node_cluster() as started:
        yield started


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_an_llm_tournament_on_two_nodes_stores_what_one_process_stores(
    tiny_model_dir, reference, cluster, tmp_path
) -> None:
    config = llm_tournament(tiny_model_dir)
    db = tmp_path / "pooled.db"
    summary = run_tournament(config, db, workers=2, executor="ray", progress=False, chunk_size=4)
    assert contents(db) == contents(reference)
    resumed = run_tournament(config, db, workers=2, executor="ray", progress=False)
    assert (resumed.played, resumed.skipped) == (0, summary.played)


@pytest.mark.slow
def test_each_actor_loads_its_model_once_however_many_chunks_it_plays(
    tiny_model_dir, cluster, tmp_path
) -> None:
    config = llm_tournament(tiny_model_dir, episodes=8)
    summary = run_tournament(
        config, tmp_path / "loads.db", workers=2, executor="ray", progress=False, chunk_size=2
    )
    key = backend_key(config.sellers[0])
    spec = config.sellers[0]
    with_model = [r for r in load_records(tmp_path / "loads.db") if spec in (r.seller, *r.buyers)]
    assert len(with_model) >= 16  # eight chunks of two or more, played by two actors
    assert dict(summary.model_loads) == {key: 2}
    assert f"{key}: 2 actor(s)" in summary.notes


@pytest.mark.slow
def test_a_pool_kept_across_runs_loads_each_actors_model_once_for_all_of_them(
    tiny_model_dir, cluster, tmp_path
) -> None:
    # A league keeps one pool for its rounds: the second round's actors are the first's.
    first = llm_tournament(tiny_model_dir, episodes=4)
    second = TournamentConfig.from_dict({**first.to_dict(), "name": "second", "seed": 1})
    runs = []
    with ActorPool.open(None, 2) as pool:
        for config in (first, second):
            runs.append(run_tournament(
                config, tmp_path / "kept.db", workers=2, executor="ray", progress=False,
                chunk_size=2, actor_pool=pool,
            ))  # fmt: skip
            assert len(pool.kept) == 2 and len(actor_nodes("ModelActor")) == 2
    key = backend_key(first.sellers[0])
    assert [dict(r.model_loads) for r in runs] == [{key: 2}, {}]
    assert min(r.played for r in runs) > 8  # the second run played its episodes on them
    deadline = time.monotonic() + 30
    while actor_nodes("ModelActor") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert actor_nodes("ModelActor") == []  # closing the pool released its actors


def test_an_actor_pool_belongs_to_the_ray_executor(tiny_model_dir, tmp_path) -> None:
    with pytest.raises(ValueError, match="an actor pool is the ray executor's"):
        run_tournament(llm_tournament(tiny_model_dir), tmp_path / "x.db", actor_pool=ActorPool(1))
    with pytest.raises(ValueError, match="actors_per_group must be >= 1"):
        ActorPool(0)


def in_thread(play: Callable[[], object], done: dict[str, object]) -> threading.Thread:
    """``play`` started in a daemon thread, its result or error put in ``done``: a run that
    hangs fails its test and never keeps the test process from exiting."""

    def target() -> None:
        try:
            done["summary"] = play()
        except BaseException as exc:  # reported by the test
            done["error"] = exc

    runner = threading.Thread(target=target, daemon=True)
    runner.start()
    return runner


def assert_every_episode_once(
    runner: threading.Thread, done: dict[str, object], db: Path, reference: Path
) -> None:
    """The run finished without an error, lost a worker and stored every episode once, as one
    process plays it."""
    assert not runner.is_alive() and "error" not in done, done
    summary = done["summary"]
    assert summary.played == stored_count(reference)
    assert any("worker lost" in note for note in summary.notes), summary.notes
    assert contents(db) == contents(reference)


@pytest.fixture
def node_killed(cluster):
    """The module's cluster, given back with two worker nodes after a test that killed one."""
    yield cluster
    import ray

    while sum(n["Alive"] for n in ray.nodes()) < 3:  # the head and two worker nodes
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()


@pytest.mark.slow
def test_a_worker_node_killed_mid_round_loses_no_episode_and_stores_none_twice(
    tiny_model_dir, reference, node_killed, tmp_path
) -> None:
    config = llm_tournament(tiny_model_dir)
    db = tmp_path / "killed.db"
    done: dict[str, object] = {}
    play = partial(
        run_tournament, config, db, workers=2, executor="ray", progress=False, chunk_size=2
    )
    runner = in_thread(play, done)
    try:
        deadline = time.monotonic() + 60
        while not (db.exists() and stored_count(db) >= 2 and len(actor_nodes("ModelActor")) == 2):
            assert runner.is_alive() and time.monotonic() < deadline, done
            time.sleep(0.05)
        kill_node(node_killed, actor_nodes("ModelActor"))
    finally:
        runner.join(120)
    assert_every_episode_once(runner, done, db, reference)


@pytest.mark.slow
def test_a_kept_actor_whose_node_died_between_runs_costs_no_episode(
    tiny_model_dir, reference, node_killed, tmp_path
) -> None:
    # The pool still counts the actor as serving; Ray already knows its node is dead and
    # answers every call to it at once (the actor is restarting, with no CPU left to restart
    # on): the run plays everything on the other actor and waits for nothing.
    import ray

    config = llm_tournament(tiny_model_dir)
    db = tmp_path / "between.db"
    done: dict[str, object] = {}
    with ActorPool.open(None, 2) as pool:
        deadline = time.monotonic() + 120
        while len(pool.serving(config.sellers[:1])[backend_key(config.sellers[0])]) < 2:
            assert time.monotonic() < deadline, "the two actors never answered"
        dead = set(actor_nodes("ModelActor"))
        kill_node(node_killed, sorted(dead))
        while dead <= {n["NodeID"] for n in ray.nodes() if n["Alive"]}:
            assert time.monotonic() < deadline, "Ray never noticed the node's death"
            time.sleep(0.1)
        play = partial(
            run_tournament, config, db, workers=2, executor="ray", progress=False,
            chunk_size=2, actor_pool=pool,
        )  # fmt: skip
        runner = in_thread(play, done)
        runner.join(180)
        assert_every_episode_once(runner, done, db, reference)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_driver_killed_mid_run_is_resumed_by_the_same_command(
    tiny_model_dir, reference, tmp_path
) -> None:
    # The driver (arena tournament run --executor ray, its own local Ray instance) SIGKILLed
    # once two chunks are stored: nothing half-written, and running it again finishes the rest.
    config = llm_tournament(tiny_model_dir)
    lines = [f"{key} = {json.dumps(config.to_dict()[key])}" for key in ("name", "episodes")]
    lines += [f"sellers = {json.dumps(list(config.sellers))}"]
    lines += [f"buyers = {json.dumps([list(pool) for pool in config.buyers])}"]
    path = write_toml(tmp_path / "t.toml", "[tournament]\n" + "\n".join(lines) + "\n")
    db = tmp_path / "driver.db"
    command = [sys.executable, "-m", "arena_cli", "tournament", "run", str(path), "--db",
               str(db), "--executor", "ray", "--workers", "2", "--chunk-size", "2",
               "--no-progress"]  # fmt: skip
    root = Path(__file__).resolve().parents[2]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("RAY_ADDRESS", None)
    with (tmp_path / "first.log").open("w") as log:
        first = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 240  # Ray's start and two model loads, on a busy machine
        while first.poll() is None and stored_count(db) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert first.poll() is None, (tmp_path / "first.log").read_text()[-2000:]
        first.send_signal(signal.SIGKILL)
        first.wait()
    total = stored_count(reference)
    assert 4 <= stored_count(db) < total  # killed mid-run
    second = subprocess.run(command, env=env, capture_output=True, timeout=240)
    assert second.returncode == 0, second.stderr.decode()[-3000:]
    assert contents(db) == contents(reference)  # every episode once, as one process plays it
