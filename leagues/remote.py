"""The learner on its own Ray actor (``[league] executor = "ray"``).

The rollout/trainer split of verl, OpenRLHF and SkyRL, at the league's scale: the evaluation
rounds play on the pool's model-holding actors (:mod:`tournaments.ray_pool`), and each
generation's training stage runs in a :class:`LearnerActor`, a Ray worker that holds the GPU the
trainer uses where the cluster has one (``num_gpus=1``), else CPUs (:func:`learner_resources`).
The league creates it before its first round, so its resources are taken before the pool fills
the rest of the cluster, and keeps it for every generation.

What travels: the :class:`~leagues.trainer.TrainJob` (paths and settings; no tensors) goes to
the actor, each optimizer step's logs come back as they happen (a streaming generator), and the
driver writes them to the store: the database has one writer. The trained checkpoint is handed
back as its adapter's path, which the pool's actors load as a LoRA request: the league folder must
be on storage every node sees (one machine, or a shared file system on a cluster).

Faults. The actor is created with ``max_restarts=-1``: when its worker or node dies mid-training,
Ray restarts it, and the driver sends the job again (up to ``MAX_ATTEMPTS`` losses; while Ray
reports the actor as restarting, the driver waits, which is not a new loss). The trainer
resumes from the last checkpoint it saved in ``job.output_dir``, as a killed local run does, and a
replayed step replaces its stored row, so no step is lost or stored twice. The driver killed: the
actor ends with its job, and the same command resumes the generation from that checkpoint.

Ray is imported inside the functions (it is an optional dependency).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agents.backends import routed
from leagues.train_config import TrainConfig
from leagues.trainer import StepHook, TrainJob, train_learner
from tournaments.pool_backend import PoolRouter
from tournaments.ray_actors import PLACEMENT_TIMEOUT_S, ModelActor

MAX_ATTEMPTS = 3
"""Sends of one job to the learner actor before the league stops (a lost worker each time)."""


def learner_resources(train: TrainConfig, cluster_gpus: float, cpu_threads: int) -> dict:
    """Ray resources of the learner: a GPU when it trains on one (``device = "cuda"``, or
    ``auto`` on a cluster with a GPU), else the CPUs its torch threads use (at least one)."""
    gpu = train.device == "cuda" or (train.device == "auto" and cluster_gpus >= 1)
    cpus = max(1, cpu_threads)
    return {"num_cpus": cpus, "num_gpus": 1} if gpu else {"num_cpus": cpus}


class LearnerActor:
    """One Ray worker that trains the league's learner, a generation at a time."""

    def __init__(self, cpu_threads: int) -> None:
        if cpu_threads:  # the driver's setting: the same arithmetic as a local league
            import torch

            torch.set_num_threads(cpu_threads)

    def train(
        self, job: TrainJob, served: dict[str, list[Any]] | None = None
    ) -> Iterator[tuple[int, dict[str, float]] | dict[str, int] | str]:
        """Train ``job`` (:func:`~leagues.trainer.train_learner`): each step's (step, logs)
        as it is taken, then the requests the pool answered per back-end key, then the
        adapter's path. The rollouts' LLM opponents whose back-ends are in ``served``
        (:meth:`~tournaments.ray_pool.ActorPool.serving`) are answered by those pool actors."""
        steps: queue.Queue[Any] = queue.Queue()
        outcome: list[Any] = []
        router = PoolRouter(served or {})

        def run() -> None:
            try:
                with routed(router):
                    adapter = train_learner(job, lambda s, logs: steps.put((s, logs)))
                outcome.append(str(adapter))
            except BaseException as exc:  # re-raised in the caller's thread below
                outcome.append(exc)
            steps.put(None)

        worker = threading.Thread(target=run, name="learner", daemon=True)
        worker.start()
        while (item := steps.get()) is not None:
            yield item
        worker.join()
        if isinstance(outcome[0], BaseException):
            raise outcome[0]
        yield router.requests()
        yield outcome[0]

    where = ModelActor.where
    """(node id, process id) of this actor: the pool's actors answer the same way."""


def start_learner(train: TrainConfig, cpu_threads: int) -> Any:
    """The league's learner actor (Ray initialised), created now so that it holds its
    resources before the pool's actors take the rest."""
    import ray
    from ray.exceptions import GetTimeoutError

    gpus = ray.cluster_resources().get("GPU", 0)
    options = learner_resources(train, gpus, cpu_threads)
    actor = ray.remote(max_restarts=-1, max_task_retries=0)(LearnerActor)
    learner = actor.options(**options).remote(cpu_threads)
    try:  # placed before the pool counts what is free
        ray.get(learner.where.remote(), timeout=PLACEMENT_TIMEOUT_S)
    except GetTimeoutError:
        ray.kill(learner, no_restart=True)
        raise RuntimeError(
            f"the league's learner actor needs {options} and the Ray cluster has not placed it "
            f"in {PLACEMENT_TIMEOUT_S} s (free now: {ray.available_resources()}); add a node "
            "with those resources, or run the league with executor = 'local'"
        ) from None
    return learner


def stop_learner(learner: Any) -> None:
    """Kill the learner actor (its resources go back to the cluster)."""
    import ray

    ray.kill(learner, no_restart=True)


def train_remote(
    learner: Any,
    job: TrainJob,
    on_step: StepHook,
    note: Any = print,
    served: dict[str, list[Any]] | None = None,
) -> Path:
    """Train ``job`` on the learner actor, ``on_step`` called in this process as each step's
    logs arrive; a lost worker sends the job again (it resumes from its last checkpoint). The
    rollouts' opponents of the back-ends in ``served`` play on those pool actors."""
    import ray
    from ray.exceptions import ActorUnavailableError, RayActorError

    losses, restarting_since = 0, None
    while True:
        try:
            adapter = None
            for ref in learner.train.options(num_returns="streaming").remote(job, served):
                item = ray.get(ref)
                restarting_since = None  # the actor answers again
                if isinstance(item, str):
                    adapter = Path(item)
                elif isinstance(item, dict):
                    for key, requests in item.items():
                        note(f"{job.run_name}: the opponents' {requests} requests to {key} "
                             "answered by the pool")  # fmt: skip
                else:
                    on_step(*item)
            if adapter is None:
                raise RuntimeError(f"the learner actor ended {job.run_name} without its adapter")
            return adapter
        except RayActorError as exc:
            if isinstance(exc, ActorUnavailableError) and restarting_since is not None:
                # Ray is still restarting the actor after the loss counted below: wait.
                if time.monotonic() - restarting_since > PLACEMENT_TIMEOUT_S:
                    raise RuntimeError(
                        f"the learner actor did not come back in {PLACEMENT_TIMEOUT_S} s "
                        f"training {job.run_name}: {exc}"
                    ) from exc
                time.sleep(1.0)
                continue
            losses += 1
            if losses == MAX_ATTEMPTS:
                raise RuntimeError(
                    f"the learner actor was lost {losses} times training {job.run_name}: {exc}"
                ) from exc
            note(
                f"learner lost ({type(exc).__name__}): training {job.run_name} again from its "
                "last checkpoint once Ray restarts the actor"
            )
            restarting_since = time.monotonic()
