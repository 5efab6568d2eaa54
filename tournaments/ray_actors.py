"""Model-holding Ray actors: which back-ends a match needs, and the actors that hold them.

A match is routed by its **model group** (:func:`model_group`): the sorted back-end keys of its
LLM seats, every adapter of one base model sharing the base's key (:func:`backend_key`).
:func:`group_jobs` splits a run's matches by group (the runner cuts each group into chunks). A
:class:`ModelActor` is one Ray worker process holding a group's back-ends in the process-wide
back-end cache (:func:`agents.backends.get_backend`), so a model is loaded once per actor, not
once per chunk;
its resources are declared per group (:func:`actor_resources`): ``num_gpus=1`` for a GPU engine
(vLLM, or hf on ``cuda``; ``device=auto`` when the cluster has a GPU), CPUs otherwise (hf's
``threads``, else 1), so the same run fills one laptop or a cluster.

An actor is created with ``max_restarts=-1`` (:func:`new_actor`): when its worker process or its
node dies, Ray restarts it wherever resources allow. The driver's view of one actor is an
:class:`Actor` (starting, busy, lost); an actor serves once it answers a ping
(:func:`ping_actors`). A restarting actor is one Ray may refuse a call to at once
(``ActorUnavailableError``, once it knows the actor is restarting) or hold the call until it is
back: the driver asks it again every ``PING_S`` seconds. How chunks are scheduled on these
actors is :mod:`tournaments.ray_pool`.

Ray is imported inside the functions (it is an optional dependency).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.backends import backend_config, end_conversations, get_backend, open_backends
from agents.backends import backend_key as model_key
from agents.backends.adapters import ADAPTER_KEY
from agents.backends.base import ChatRequest, Completion
from agents.driver import Match
from agents.llm import split_agent_params
from agents.specs import is_scripted, parse_spec

Group = tuple[str, ...]
"""The back-end keys a match needs, sorted; ``()``: scripted agents only."""
PING_S = 2.0
"""How often a restarting actor that Ray refused a call to is asked again whether it is back."""
PLACEMENT_TIMEOUT_S = 300
"""How long the driver waits for Ray to place an actor (the first of a back-end's, for
:meth:`tournaments.ray_pool.ActorPool.serving`; the league's learner actor, ``leagues.remote``)."""


def backend_key(spec: str) -> str:
    """The key of the back-end an LLM spec is served by: kind, model and back-end settings
    (sampling, agent and ``lora`` parameters left out: they travel with each request)."""
    parsed = parse_spec(spec)
    _, _, params = split_agent_params(parsed.params)
    params = {k: v for k, v in params.items() if k != ADAPTER_KEY}
    return model_key(parsed.kind, parsed.name, params)


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
        """Play ``chunk`` with ``task`` (the runner's ``play_chunk``) in this process."""
        return task(chunk)

    def generate(
        self, model: tuple[str, str, dict[str, str]], requests: Sequence[ChatRequest]
    ) -> list[Completion]:
        """Answer one batch of requests for the model (kind, name, back-end params) with this
        process's back-end (loaded once, as for ``play``): another process's episodes, e.g. the
        opponents' turns of a league's training rollouts (:mod:`tournaments.pool_backend`)."""
        backend = get_backend(*model)
        for adapter in sorted({r.adapter for r in requests if r.adapter}):
            backend.add_adapter(adapter)  # type: ignore[attr-defined]
        return backend.generate(requests)

    def end_conversations(
        self, model: tuple[str, str, dict[str, str]], conversations: Sequence[str]
    ) -> None:
        """Drop what the model's back-end keeps for these finished conversations (hf's KV)."""
        end_conversations(get_backend(*model), conversations)

    def loads(self) -> tuple[int, dict[str, int]]:
        """(process id, models this process has loaded per back-end key): a restarted actor
        is a new process whose loads count afresh."""
        return os.getpid(), {b.key: b.stats.model_loads for b in open_backends()}

    def where(self) -> tuple[str, int]:
        """(node id, process id): which node and worker process this actor runs in."""
        import ray

        return ray.get_runtime_context().get_node_id(), os.getpid()


@dataclass
class Actor:
    """The driver's view of one :class:`ModelActor`."""

    handle: Any
    group: Group
    busy: bool = False
    lost: bool = False
    """Its worker died; it serves again once a ping answers (Ray restarted it)."""
    starting: bool = True
    """Not answered yet: it takes chunks once a ping answers (the cluster may have no room for
    it until another group's actors or a league's learner free theirs)."""
    ask_at: float = 0.0
    """When to ping it again after Ray refused a ping (``time.monotonic``)."""
    cpus: float = 1
    """The CPUs Ray holds for it."""
    pid: int | None = None
    counted: dict[str, int] = field(default_factory=dict)
    """Model loads of process ``pid`` already counted in a :class:`tournaments.ray_pool.PoolRun`."""

    @property
    def serves(self) -> bool:
        """It has answered a ping since it was created or last lost: it takes chunks."""
        return not (self.starting or self.lost)


def ping_actors(actors: Sequence[Actor], timeout: float) -> bool:
    """Ask ``actors`` whether they serve (the first answer waited for up to ``timeout`` s, the
    others 1 s more) and mark those that answer; a refused ping (a restarting actor) marks none.
    Whether any of them serves now."""
    import ray
    from ray.exceptions import RayError

    pings = {a.handle.where.remote(): a for a in actors}
    ready, _ = ray.wait(list(pings), num_returns=1, timeout=max(timeout, 0))
    ready += ray.wait(list(pings), num_returns=len(pings), timeout=1)[0] if ready else []
    for ref in set(ready):
        try:
            ray.get(ref)
        except RayError:
            continue
        pings[ref].starting = pings[ref].lost = False
    return any(a.serves for a in actors)


def new_actor(group: Group, cluster_gpus: float) -> Actor:
    """A new model actor for ``group`` (restarted by Ray when its worker dies), not yet
    answering: it serves once a ping comes back."""
    import ray

    options = actor_resources(group, cluster_gpus)
    actor_class = ray.remote(max_restarts=-1, max_task_retries=0)(ModelActor)
    return Actor(actor_class.options(**options).remote(), group, cpus=options["num_cpus"])


def require_ray() -> None:
    """A clear error where Ray is not installed (it is an optional dependency)."""
    if importlib.util.find_spec("ray") is None:
        raise ValueError("the ray executor needs Ray: pip install 'bargain-arena[ray]'")


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


def group_jobs(jobs: Sequence[Match]) -> dict[Group, list[Match]]:
    """Jobs split by model group, play order kept within a group (the runner cuts each into
    equal chunks for the group's actors: :func:`tournaments.runner.even_chunks`)."""
    groups: dict[Group, list[Match]] = {}
    for job in jobs:
        groups.setdefault(model_group(job), []).append(job)
    return groups
