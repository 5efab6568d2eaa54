"""Model-holding Ray actors: LLM episodes played where their model is already loaded.

The tournament runner's ``ray`` executor (:func:`tournaments.runner.run_tournament`) splits the
episodes still to play by the back-ends they need (:func:`model_group`: the sorted back-end keys
of the match's LLM seats; every adapter of one base model shares the base's key). Episodes of
scripted agents alone keep the stateless path: chunks as Ray tasks, retried by Ray when their
worker or node dies. Episodes of a model group go, chunk by chunk, to the :class:`ModelActor`
actors of that group (``workers`` of them, or fewer when there are fewer chunks): an actor is one
Ray worker process holding the group's back-ends in the process-wide back-end cache
(:func:`agents.backends.get_backend`), so a model is loaded once per actor, not once per chunk,
and the chunk is played by the project's one episode driver (:func:`agents.engine.play_matches`,
through the runner's ``play_chunk``), its requests batched across the chunk's episodes.

Resources are declared per group (:func:`actor_resources`): ``num_gpus=1`` for a GPU engine
(vLLM, or hf on ``cuda``; ``device=auto`` when the cluster has a GPU), CPUs otherwise (hf's
``threads``, else 1), so the same run fills one laptop or a cluster.

Faults. An actor is created with ``max_restarts=-1``: when its worker process or its node dies,
Ray restarts it wherever resources allow. The chunk it was playing never came back, so nothing
of it was stored: the pool sends that chunk to another live actor of the group (or to the
restarted one, once it answers again), and reports what happened through ``note`` (the progress
bar and the run's summary show it). A chunk is stored only when its result arrives, and a key is
stored at most once (the store refuses a second copy), so no episode is lost or stored twice. A
chunk that fails ``MAX_ATTEMPTS`` times stops the run (something other than a lost worker). The
driver itself killed: the actors of its job end with it, and running the same command again plays
only what is not stored.

Ray is imported inside the functions (it is an optional dependency).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.backends import backend_config, open_backends
from agents.backends.adapters import ADAPTER_KEY
from agents.backends.base import non_default_query
from agents.driver import Match
from agents.llm import split_agent_params
from agents.specs import is_scripted, parse_spec

Group = tuple[str, ...]
"""The back-end keys a match needs, sorted; ``()``: scripted agents only."""
Note = Callable[[str], None]

MAX_ATTEMPTS = 4
"""Tries of one chunk on the actors of its group before the run stops."""


def backend_key(spec: str) -> str:
    """The key of the back-end an LLM spec is served by: kind, model and back-end settings
    (sampling, agent and ``lora`` parameters left out: they travel with each request)."""
    parsed = parse_spec(spec)
    _, _, params = split_agent_params(parsed.params)
    params = {k: v for k, v in params.items() if k != ADAPTER_KEY}
    config = backend_config(parsed.kind, params)
    return f"{parsed.kind}:{parsed.name}{non_default_query(config)}"


def model_group(match: Match) -> Group:
    """The sorted back-end keys of a match's LLM seats; ``()`` when every seat is scripted."""
    if not all(isinstance(p, str) for p in match.players):
        raise TypeError("a pooled match names every player by its spec")
    specs = {p for p in match.players if not is_scripted(p)}  # type: ignore[arg-type]
    return tuple(sorted({backend_key(s) for s in specs}))


def actor_resources(group: Group, cluster_gpus: float) -> dict[str, float]:
    """Ray resources of one actor of ``group``: a GPU for a GPU engine, else CPUs."""
    gpu, cpus = False, 1
    for key in group:
        parsed = parse_spec(key)
        config = backend_config(parsed.kind, dict(parsed.params))
        device = getattr(config, "device", None)
        if parsed.kind == "vllm" or device == "auto":
            gpu |= cluster_gpus >= 1
        elif device == "cuda":
            gpu = True
        cpus = max(cpus, getattr(config, "threads", None) or 1)
    return {"num_cpus": cpus, "num_gpus": 1} if gpu else {"num_cpus": cpus}


class ModelActor:
    """One Ray actor process serving a model group: it plays the chunks it is sent and keeps
    the group's back-ends loaded between them (the process-wide back-end cache)."""

    def play(self, task: Callable[[Sequence[Match]], Any], chunk: Sequence[Match]) -> Any:
        return task(chunk)

    def loads(self) -> dict[str, int]:
        """Models this process has loaded, per back-end key."""
        return {b.key: b.stats.model_loads for b in open_backends()}

    def where(self) -> tuple[str, int]:
        """(node id, process id): which node and worker process this actor runs in."""
        import ray

        return ray.get_runtime_context().get_node_id(), os.getpid()


def _apply(task: Callable[[Sequence[Match]], Any], chunk: Sequence[Match]) -> Any:
    return task(chunk)


@dataclass
class _Actor:
    handle: Any
    group: Group
    busy: bool = False
    lost: bool = False
    """Its worker died; it serves again once a ping answers (Ray restarted it)."""


@dataclass
class PoolRun:
    """What one pooled run did: actors per group, their model loads, lost workers, retries."""

    actors: dict[Group, int] = field(default_factory=dict)
    model_loads: dict[str, int] = field(default_factory=dict)
    """Model loads summed over the actors, per back-end key (1 per actor when nothing died)."""
    lost_workers: int = 0
    retried_chunks: int = 0

    def notes(self) -> tuple[str, ...]:
        pooled = [f"{', '.join(g)}: {n} actor(s)" for g, n in self.actors.items()]
        pooled += [f"{key}: {n} model load(s)" for key, n in self.model_loads.items()]
        faults = []
        if self.lost_workers:
            faults.append(
                f"{self.lost_workers} worker(s) lost, {self.retried_chunks} chunk(s) played again"
                " elsewhere"
            )
        return (*pooled, *faults)


def run_pooled(
    task: Callable[[Sequence[Match]], Any],
    chunks: dict[Group, list[list[Match]]],
    actors_per_group: int,
    note: Note,
    run: PoolRun,
) -> Iterator[Any]:
    """Chunk results as they complete: scripted chunks (group ``()``) as Ray tasks, every other
    group's chunks on that group's actors, one chunk in flight per actor. A group's actors are
    released as soon as its last chunk is in (their resources go to the next group), and all
    are killed when the generator ends or is closed. Ray must be initialised."""
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError

    task_ref = ray.put(task)
    remote_task = ray.remote(max_retries=MAX_ATTEMPTS)(_apply)
    actor_class = ray.remote(max_restarts=-1, max_task_retries=0)(ModelActor)
    gpus = ray.cluster_resources().get("GPU", 0)
    queues = {g: deque(cs) for g, cs in chunks.items() if g and cs}
    attempts: dict[int, int] = {}
    actors: list[_Actor] = []
    # ref -> (what: "task" | "play" | "ping", actor, chunk)
    inflight: dict[Any, tuple[str, _Actor | None, list[Match] | None]] = {}
    for group, queue in queues.items():
        count = min(actors_per_group, len(queue))
        options = actor_resources(group, gpus)
        actors += [_Actor(actor_class.options(**options).remote(), group) for _ in range(count)]
        run.actors[group] = count
    for chunk in chunks.get((), []):
        inflight[remote_task.remote(task_ref, chunk)] = ("task", None, chunk)

    def feed() -> None:
        for actor in actors:
            queue = queues[actor.group]
            if queue and not actor.busy and not actor.lost:
                chunk = queue.popleft()
                actor.busy = True
                inflight[actor.handle.play.remote(task_ref, chunk)] = ("play", actor, chunk)

    def retire(group: Group) -> None:
        """The group's last chunk is in: count its model loads, free its actors."""
        mine = [a for a in actors if a.group == group]
        for actor in mine:
            try:  # an actor lost since its last chunk (or restarting) counts no loads
                loads = {} if actor.lost else ray.get(actor.handle.loads.remote(), timeout=60)
            except (RayActorError, GetTimeoutError):
                loads = {}
            for key, n in loads.items():
                run.model_loads[key] = run.model_loads.get(key, 0) + n
            ray.kill(actor.handle, no_restart=True)
            actors.remove(actor)

    def lost(actor: _Actor, chunk: list[Match], exc: Exception) -> None:
        """A worker died with ``chunk``: it goes back to the front of its group's queue."""
        tries = attempts[id(chunk)] = attempts.get(id(chunk), 0) + 1
        actor.busy, actor.lost = False, True
        run.lost_workers += 1
        if tries >= MAX_ATTEMPTS:
            raise RuntimeError(
                f"a chunk of {len(chunk)} episodes failed {tries} times on actors of "
                f"{', '.join(actor.group)}: {exc}"
            ) from exc
        run.retried_chunks += 1
        queues[actor.group].appendleft(chunk)
        others = sum(not a.lost for a in actors if a.group == actor.group)
        note(
            f"worker lost ({type(exc).__name__}): its {len(chunk)} episodes are played again "
            + (f"by {others} other actor(s)" if others else "once Ray restarts the actor")
        )
        # Answered once Ray has restarted the actor; then it takes chunks again.
        inflight[actor.handle.where.remote()] = ("ping", actor, None)

    try:
        feed()
        while any(queues.values()) or any(w != "ping" for w, _, _ in inflight.values()):
            ready, _ = ray.wait(list(inflight), num_returns=1)
            what, actor, chunk = inflight.pop(ready[0])
            try:
                result = ray.get(ready[0])
            except RayActorError as exc:
                if what == "ping":
                    if actor in actors:
                        actors.remove(actor)  # Ray gave up restarting it (or it was retired)
                elif actor is not None and chunk is not None:
                    lost(actor, chunk, exc)
                else:
                    raise
            else:
                if what == "ping" and actor is not None:
                    actor.lost = False
                    note(f"an actor of {', '.join(actor.group)} is back (restarted by Ray)")
                else:
                    if actor is not None:
                        actor.busy = False
                        if not queues[actor.group] and not any(
                            a.busy for a in actors if a.group == actor.group
                        ):
                            retire(actor.group)
                    yield result
            feed()
    finally:
        for ref, (what, _, _) in inflight.items():
            if what == "task":
                ray.cancel(ref)
        for actor in actors:
            ray.kill(actor.handle, no_restart=True)


def init_ray(ray_address: str | None, workers: int) -> bool:
    """Join the cluster at ``ray_address`` (or ``RAY_ADDRESS``), else start a local instance of
    ``workers`` CPUs; nothing when Ray is already initialised. Whether it started Ray."""
    import ray

    if ray.is_initialized():
        return False
    if ray_address or os.environ.get("RAY_ADDRESS"):
        ray.init(address=ray_address)
    else:  # "local": a new instance, never a cluster left running on this machine
        ray.init(address="local", num_cpus=workers, include_dashboard=False)
    return True


def group_chunks(jobs: Sequence[Match], size: int) -> dict[Group, list[list[Match]]]:
    """Jobs split by model group (play order kept within a group), then into chunks."""
    groups: dict[Group, list[Match]] = {}
    for job in jobs:
        groups.setdefault(model_group(job), []).append(job)
    return {g: [js[i : i + size] for i in range(0, len(js), size)] for g, js in groups.items()}
