"""The Ray executor's scheduler: LLM episodes played where their model is already loaded.

The tournament runner's ``ray`` executor (:func:`tournaments.runner.run_tournament`) splits the
episodes still to play by model group (:func:`tournaments.ray_actors.group_jobs`), each group into
equal chunks, a multiple of its ``workers`` actors (:func:`tournaments.runner.even_chunks`).
Episodes of scripted agents alone keep the stateless path: chunks as Ray tasks in the CPUs no actor
holds. Episodes of a model group go, chunk by chunk, to the
:class:`~tournaments.ray_actors.ModelActor` actors of that group (``workers`` of them, or fewer when
there are fewer chunks; an actor takes chunks once it has answered a ping, so one the cluster has no
room for yet holds no episodes while it waits, as a league's learner actor may leave it), and each
chunk is played by the project's one episode driver (:func:`agents.engine.play_matches`, through the
runner's ``play_chunk``), its requests batched across the chunk's episodes. The actors live in an
:class:`ActorPool`, which a caller may keep across runs: a league keeps one for all its evaluation
rounds, so each actor loads the base model once for the whole league.

Faults. When an actor's worker process or node dies, Ray restarts it wherever resources allow
(:func:`tournaments.ray_actors.new_actor`). The chunk it was playing never came back, so nothing
of it was stored: the pool sends that chunk to another live actor of the group (or to the
restarted one, once it answers again), and reports what happened through ``note`` (the progress
bar and the run's summary show it). Until a restarting actor answers, the pool asks it again
every ``PING_S`` seconds and counts its CPUs as taken (Ray restarts it on them), so no chunk is
sent as a task the cluster has no room for. A scripted chunk's task lost with its worker comes
back the same way (the pool, not Ray, sends it again: to an idle actor or a free CPU, never to
wait behind the pool's own actors). A chunk is stored only when its result arrives, and a key
is stored at most once (the store refuses a second copy), so no episode is lost or stored twice.
A chunk that fails ``MAX_ATTEMPTS`` times, or raises in the episode code itself, stops the run.
The driver itself killed: the actors of its job end with it, and running the same command again
plays only what is not stored.

Ray is imported inside the functions (it is an optional dependency).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from agents.driver import Match
from agents.specs import is_scripted
from tournaments.ray_actors import (
    PING_S,
    PLACEMENT_TIMEOUT_S,
    Actor,
    Group,
    actor_resources,
    backend_key,
    init_ray,
    new_actor,
    ping_actors,
    require_ray,
)

Note = Callable[[str], None]

MAX_ATTEMPTS = 4
"""Tries of one chunk on the actors of its group before the run stops."""


def _apply(task: Callable[[Sequence[Match]], Any], chunk: Sequence[Match]) -> Any:
    return task(chunk)


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


class ActorPool:
    """The model-holding actors of one Ray session, kept between runs.

    A tournament opens one for its run; a league keeps one for all its rounds, so the actors of a
    model group that comes back (every round of a league is the same base model with other
    adapters) serve it again without loading the model again. :meth:`play` releases a group's
    actors as soon as its last chunk is in while other groups of the run still play (their
    resources may be what those groups wait for); the actors of the run's last group stay until
    the next run, which keeps those of its groups and releases the rest first. Ray must be
    initialised (:meth:`open` does it)."""

    def __init__(self, actors_per_group: int) -> None:
        if actors_per_group < 1:
            raise ValueError(f"actors_per_group must be >= 1, got {actors_per_group}")
        self.actors_per_group = actors_per_group
        self.kept: list[Actor] = []
        """Actors left from the last run (their group's back-ends loaded)."""

    @classmethod
    @contextmanager
    def open(cls, ray_address: str | None, actors_per_group: int) -> Iterator[ActorPool]:
        """A pool on the cluster at ``ray_address`` (see :func:`init_ray`), its actors killed and
        a Ray instance it started shut down on the way out."""
        require_ray()
        import ray

        started = init_ray(ray_address, actors_per_group)
        pool = cls(actors_per_group)
        try:
            yield pool
        finally:
            pool.close()
            if started:
                ray.shutdown()

    def serving(self, specs: Sequence[str]) -> dict[str, list[Any]]:
        """Actors that answer requests for the back-ends of ``specs`` between runs (a league's
        training rollouts send their LLM opponents' turns here): per back-end key, the kept
        actors whose group holds it, else ``actors_per_group`` new ones for it, kept as a run's
        are. Only actors that answer are returned (one the cluster cannot place yet is left
        waiting); none within ``PLACEMENT_TIMEOUT_S`` is an error that says what is free."""
        import ray

        gpus = ray.cluster_resources().get("GPU", 0)
        served: dict[str, list[Any]] = {}
        for key in sorted({backend_key(s) for s in specs if not is_scripted(s)}):
            actors = [a for a in self.kept if key in a.group]
            for _ in range(0 if actors else self.actors_per_group):
                actors.append(new_actor((key,), gpus))
                self.kept.append(actors[-1])
            deadline = time.monotonic() + PLACEMENT_TIMEOUT_S
            while not ping_actors(actors, deadline - time.monotonic()):
                if time.monotonic() >= deadline:
                    raise RuntimeError(
                        f"no actor for {key} answered in {PLACEMENT_TIMEOUT_S} s (free now: "
                        f"{ray.available_resources()}); add a node with "
                        f"{actor_resources((key,), gpus)}, or run the league with executor = "
                        "'local'"
                    )
                time.sleep(PING_S)  # every ping refused: the actors are restarting
            served[key] = [a.handle for a in actors if a.serves]
        return served

    def close(self) -> None:
        """Kill the kept actors (their resources go back to the cluster)."""
        import ray

        for actor in self.kept:
            ray.kill(actor.handle, no_restart=True)
        self.kept = []

    def play(
        self,
        task: Callable[[Sequence[Match]], Any],
        chunks: dict[Group, list[list[Match]]],
        note: Note,
        run: PoolRun,
    ) -> Iterator[Any]:
        """Chunk results as they complete: every model group's chunks on that group's actors,
        one chunk in flight per actor; scripted chunks (group ``()``) as Ray tasks in the CPUs no
        actor holds, or on an actor with nothing of its own left to play (kept actors hold
        their CPUs, so a scripted chunk never waits for one to be released)."""
        import ray
        from ray.exceptions import (
            ActorUnavailableError,
            GetTimeoutError,
            RayActorError,
            RayError,
            RayTaskError,
        )

        task_ref = ray.put(task)
        remote_task = ray.remote(max_retries=0)(_apply)  # a lost task is sent again by feed()
        gpus = ray.cluster_resources().get("GPU", 0)
        # The CPUs this pool may use: those free now and those its kept actors hold (a league's
        # learner actor holds its own for the whole league; a scripted task sent beyond them
        # would wait for a CPU that never frees), less those of nodes lost since (below).
        cpus = ray.available_resources().get("CPU", 0) + sum(a.cpus for a in self.kept)
        cluster_cpus = ray.cluster_resources().get("CPU", 0)
        queues = {g: deque(cs) for g, cs in chunks.items() if g and cs}
        loose = deque(chunks.get((), []))
        attempts: dict[int, int] = {}
        # ref -> (what: "task" | "play" | "ping", actor, chunk, the queue it came from)
        inflight: dict[Any, tuple[str, Actor | None, list[Match] | None, deque | None]] = {}
        for actor in [a for a in self.kept if a.group not in queues]:
            ray.kill(actor.handle, no_restart=True)  # a group this run does not need
        actors = [a for a in self.kept if a.group in queues]
        self.kept = []

        def ping(actor: Actor) -> None:
            """Ask ``actor`` whether it serves; it takes chunks once the answer is in."""
            inflight[actor.handle.where.remote()] = ("ping", actor, None, None)

        for actor in actors:
            actor.busy = False
            if not actor.serves:  # serves once Ray has (re)started it
                ping(actor)
        for group, queue in queues.items():
            count = min(self.actors_per_group, len(queue))
            have = sum(a.group == group for a in actors)
            for _ in range(max(0, count - have)):
                # It takes chunks once it answers: one the cluster has no room for yet (a
                # league's learner holds some) waits without holding any episodes.
                actors.append(new_actor(group, gpus))
                ping(actors[-1])

        def feed() -> None:
            for actor in actors:
                source = queues[actor.group] or loose
                if source and not actor.busy and actor.serves:
                    chunk = source.popleft()
                    actor.busy = True
                    ref = actor.handle.play.remote(task_ref, chunk)
                    inflight[ref] = ("play", actor, chunk, source)
            if not loose:
                return
            tasks = sum(what == "task" for what, *_ in inflight.values())
            gone = max(0, cluster_cpus - ray.cluster_resources().get("CPU", 0))  # lost nodes'
            spare = cpus - gone - sum(a.cpus for a in actors) - tasks  # restarting ones count
            while loose and (spare >= 1 or (not actors and not tasks)):
                inflight[remote_task.remote(task_ref, loose[0])] = ("task", None, loose[0], loose)
                loose.popleft()
                spare, tasks = spare - 1, tasks + 1

        def count_loads(actor: Actor) -> None:
            """Add the model loads of ``actor`` not counted yet to the run's."""
            try:  # an actor lost since its last chunk (or restarting) counts no loads
                pid, loads = (
                    (None, {})
                    if not actor.serves
                    else ray.get(actor.handle.loads.remote(), timeout=60)
                )
            except (RayActorError, GetTimeoutError):
                pid, loads = None, {}
            counted = actor.counted if pid == actor.pid else {}
            for key, n in loads.items():
                if n > counted.get(key, 0):
                    run.model_loads[key] = run.model_loads.get(key, 0) + n - counted.get(key, 0)
            if pid is not None:
                actor.pid, actor.counted = pid, dict(loads)

        def retire(group: Group) -> None:
            """The group's last chunk is in while other groups still play: count its model
            loads and free its actors (their resources may be what the others wait for)."""
            run.actors[group] = sum(not a.starting for a in actors if a.group == group)
            for actor in [a for a in actors if a.group == group]:
                count_loads(actor)
                ray.kill(actor.handle, no_restart=True)
                actors.remove(actor)

        def lost(actor: Actor | None, chunk: list[Match], source: deque, exc: Exception) -> None:
            """A worker (an actor's, or a task's) died with ``chunk``: it goes back to the
            front of its queue."""
            tries = attempts[id(chunk)] = attempts.get(id(chunk), 0) + 1
            run.lost_workers += 1
            where = f"actors of {', '.join(actor.group)}" if actor else "Ray tasks"
            if tries >= MAX_ATTEMPTS:
                raise RuntimeError(
                    f"a chunk of {len(chunk)} episodes failed {tries} times on {where}: {exc}"
                ) from exc
            run.retried_chunks += 1
            source.appendleft(chunk)
            lead = f"worker lost ({type(exc).__name__}): its {len(chunk)} episodes are played again"
            if actor is None:
                note(lead)
                return
            actor.busy, actor.lost = False, True
            others = sum(a.serves for a in actors if a.group == actor.group)
            note(f"{lead} " + (f"by {others} other actor(s)" if others else "once it is back"))
            ping(actor)  # answered once Ray has restarted the actor; then it takes chunks again

        def ask_again() -> None:
            """Ping the restarting actors whose last ping Ray refused ``PING_S`` ago or more."""
            asked = {id(a) for what, a, *_ in inflight.values() if what == "ping"}
            now = time.monotonic()
            for actor in actors:
                if not actor.serves and id(actor) not in asked and actor.ask_at <= now:
                    ping(actor)

        def working(group: Group) -> bool:
            return bool(queues[group]) or any(a.busy for a in actors if a.group == group)

        finished = False
        try:
            feed()
            while (
                any(queues.values())
                or loose
                or any(what != "ping" for what, *_ in inflight.values())
            ):
                ask_again()
                ready, _ = ray.wait(list(inflight), num_returns=1, timeout=PING_S)
                if not ready:  # nothing came in (restarting actors, asked again above)
                    time.sleep(0 if inflight else PING_S)
                    continue
                what, actor, chunk, source = inflight.pop(ready[0])
                try:
                    result = ray.get(ready[0])
                except RayTaskError:
                    raise  # the episode code's own error: it would fail the same way again
                except RayError as exc:  # a worker, node or actor lost
                    if what != "ping":
                        assert chunk is not None and source is not None
                        lost(actor, chunk, source, exc)
                    elif isinstance(exc, ActorUnavailableError) and actor is not None:
                        actor.ask_at = time.monotonic() + PING_S  # restarting: ask again later
                    elif actor in actors:
                        actors.remove(actor)  # Ray gave up restarting it (or it retired)
                else:
                    if what == "ping" and actor is not None:
                        if actor.lost:
                            note(f"an actor of {', '.join(actor.group)} is back (restarted by Ray)")
                        actor.lost = actor.starting = False
                    else:
                        if actor is not None:
                            actor.busy = False
                            group = actor.group
                            others = any(working(g) for g in queues if g != group)
                            if not working(group) and others:
                                retire(group)
                        yield result
                feed()
            for group in {a.group for a in actors}:  # the actors that played
                run.actors[group] = sum(not a.starting for a in actors if a.group == group)
            for actor in actors:  # the last groups' actors stay for the next run
                count_loads(actor)
            self.kept, actors, finished = actors, [], True
        finally:
            for ref, (what, *_) in inflight.items():
                if what == "task":
                    ray.cancel(ref)
            if not finished:  # a run that stopped early: its actors' state is unknown
                for actor in actors:
                    ray.kill(actor.handle, no_restart=True)
