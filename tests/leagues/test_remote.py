"""leagues.remote: the learner on its own Ray actor, on a real two-node cluster on this machine.
A job trained there streams its steps to the driver and saves the adapter a local run saves; a
learner killed mid-training is sent the job again and still ends with that adapter."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from leagues.remote import learner_resources, start_learner, stop_learner, train_remote
from leagues.train_config import TrainConfig
from leagues.trainer import adapter_weights, train_learner
from tests.leagues.test_trainer import seller_job
from tests.ray_cluster import two_node_cluster


def same_weights(a: Path, b: Path) -> bool:
    left, right = adapter_weights(a), adapter_weights(b)
    return left.keys() == right.keys() and all(bool((left[k] == right[k]).all()) for k in left)


def test_the_learner_holds_a_gpu_where_it_trains_on_one_else_its_threads_cpus() -> None:
    auto, cpu = TrainConfig.from_dict({}), TrainConfig.from_dict({"device": "cpu"})
    assert learner_resources(auto, cluster_gpus=1, cpu_threads=0) == {"num_cpus": 1, "num_gpus": 1}
    assert learner_resources(auto, cluster_gpus=0, cpu_threads=2) == {"num_cpus": 2}
    assert learner_resources(cpu, cluster_gpus=8, cpu_threads=1) == {"num_cpus": 1}


def train_on_the_actor(
    model: Path, out: Path, kill_after_first_step: bool
) -> tuple[list[int], list[str], tuple[int, int], Path]:
    """(steps streamed, notes, (first pid, last pid) of the learner, the adapter): a seller job
    trained on a learner actor of a two-node cluster, its worker SIGKILLed after the first
    step's logs arrive when asked."""
    import ray

    steps: list[int] = []
    notes: list[str] = []
    with two_node_cluster():
        learner = start_learner(TrainConfig.from_dict({"device": "cpu"}), cpu_threads=1)
        _, pid = ray.get(learner.where.remote())

        def on_step(step: int, _logs: dict) -> None:
            steps.append(step)
            if kill_after_first_step and len(steps) == 1:  # dies like a lost machine
                os.kill(pid, signal.SIGKILL)

        adapter = train_remote(learner, seller_job(model, out), on_step, notes.append)
        _, last = ray.get(learner.where.remote())
        stop_learner(learner)
    return steps, notes, (pid, last), adapter


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_job_trained_on_the_learner_actor_streams_its_steps_and_saves_the_local_adapter(
    warm_models: dict[str, Path], tmp_path: Path
) -> None:
    local = train_learner(seller_job(warm_models["seller"], tmp_path / "local"))
    steps, notes, (pid, last), adapter = train_on_the_actor(
        warm_models["seller"], tmp_path / "remote", kill_after_first_step=False
    )
    assert pid == last != os.getpid() and notes == []  # trained elsewhere, by one worker
    assert steps == [1, 2]  # each step streamed back as it was taken
    assert adapter == tmp_path / "remote" / "adapter" and same_weights(adapter, local)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_learner_killed_mid_training_is_sent_the_job_again_and_ends_with_the_same_adapter(
    warm_models: dict[str, Path], tmp_path: Path
) -> None:
    local = train_learner(seller_job(warm_models["seller"], tmp_path / "local"))
    steps, notes, (pid, last), adapter = train_on_the_actor(
        warm_models["seller"], tmp_path / "remote", kill_after_first_step=True
    )
    assert last != pid and any("learner lost" in n for n in notes), notes
    assert steps[0] == 1 and steps[-1] == 2  # resumed (or replayed), never past the job
    assert same_weights(adapter, local)
