"""A back-end whose requests are answered by the Ray pool's model actors.

A league's training rollouts play LLM opponents (the other lineage's checkpoints, another
league's buyers). In one process their turns come from a model the learner's process loads
besides the one it trains; with ``executor = "ray"`` they go to the pool's
:class:`~tournaments.ray_actors.ModelActor` actors that hold that model for the evaluation rounds
(:meth:`~tournaments.ray_pool.ActorPool.serving`): the learner actor runs its rollouts inside
``agents.backends.routed(PoolRouter(served))``, so every opponent agent naming such a model gets a
:class:`PooledBackend` instead of a local engine, and its requests (adapter, conversation, seed and
steer travel with each) are answered where the model already is.

Each ``generate`` call is one batch of the episode driver. Its requests are split among the
actors by conversation (a conversation always goes to the same actor, which keeps its KV cache
between turns), sent at once, and the answers put back in order. Sampling is seeded per request,
so where a request is answered changes nothing; with one actor the batch is the local batch.

Faults: an actor whose worker died (Ray restarts it) fails its part of the batch; that part is
sent to the next live actor, up to ``MAX_ATTEMPTS`` times, after which the requests come back as
errors (the driver ends those episodes as errored; the rollout gives them no reward), as a dead
server would for an HTTP back-end.

Ray is imported inside the methods (it is an optional dependency).
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agents.backends import backend_key
from agents.backends.adapters import resolve_adapter
from agents.backends.base import BackendStats, ChatRequest, Completion, StatsRecorder

MAX_ATTEMPTS = 3
"""Actors one part of a batch is sent to before its requests come back as errors."""


class PooledBackend:
    """The model (kind, name, back-end params) served by ``actors`` (Ray actor handles of
    :class:`~tournaments.ray_actors.ModelActor`); used like a local back-end of that model."""

    def __init__(
        self, kind: str, name: str, params: Mapping[str, str], actors: Sequence[Any]
    ) -> None:
        if not actors:
            raise ValueError(f"no pool actor serves {kind}:{name}; give at least one")
        self.model = (kind, name, dict(params))
        self.key = backend_key(kind, name, params)
        self.actors = list(actors)
        self._recorder = StatsRecorder()

    @property
    def stats(self) -> BackendStats:
        return self._recorder.stats

    def __repr__(self) -> str:
        return f"PooledBackend(key={self.key!r}, actors={len(self.actors)})"

    def add_adapter(self, adapter: str) -> None:
        """Check an adapter folder here, where the error is clearest; the actors load it when a
        request names it (``ChatRequest.adapter`` travels with every request)."""
        resolve_adapter(adapter)

    def actor_of(self, conversation: str | None, actors: Sequence[Any]) -> int:
        """The actor a conversation is answered by: always the same one while they all live."""
        return zlib.crc32((conversation or "").encode()) % len(actors)

    def generate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        import ray
        from ray.exceptions import RayActorError

        began = time.perf_counter()
        answers: list[Completion | None] = [None] * len(requests)
        pending = list(range(len(requests)))
        live = list(self.actors)
        error = ""
        for _ in range(MAX_ATTEMPTS):
            if not pending or not live:
                break
            parts: dict[int, list[int]] = {}
            for i in pending:
                parts.setdefault(self.actor_of(requests[i].conversation, live), []).append(i)
            refs = {
                a: live[a].generate.remote(self.model, [requests[i] for i in part])
                for a, part in parts.items()
            }
            pending, lost = [], set()
            for a, ref in refs.items():
                try:
                    for i, answer in zip(parts[a], ray.get(ref), strict=True):
                        answers[i] = answer
                except RayActorError as exc:
                    pending += parts[a]
                    lost.add(a)
                    error = f"pool actor lost ({type(exc).__name__})"
            live = [actor for a, actor in enumerate(live) if a not in lost]
        done = [
            a if a is not None else Completion("", error=error or "no pool actor left")
            for a in answers
        ]
        self._recorder.record(done, time.perf_counter() - began)
        return done

    def end_conversations(self, conversations: Iterable[str]) -> None:
        """Tell the actors these conversations are over (they drop their KV caches)."""
        ended = list(conversations)
        for actor in self.actors:
            actor.end_conversations.remote(self.model, ended)

    def close(self) -> None:
        """Nothing to release here: the actors belong to the pool."""
        return None


class PoolRouter:
    """An ``agents.backends.routed`` router: models whose back-end key is in ``served`` (from
    :meth:`~tournaments.ray_pool.ActorPool.serving`) are answered by those actors, one
    :class:`PooledBackend` per model, every other model is left to the caller's process."""

    def __init__(self, served: Mapping[str, Sequence[Any]]) -> None:
        self.served = dict(served)
        self.backends: dict[str, PooledBackend] = {}

    def __call__(self, kind: str, name: str, params: Mapping[str, str]) -> PooledBackend | None:
        key = backend_key(kind, name, params)
        if key not in self.served:
            return None
        if key not in self.backends:
            self.backends[key] = PooledBackend(kind, name, params, self.served[key])
        return self.backends[key]

    def requests(self) -> dict[str, int]:
        """Requests answered by the pool so far, per back-end key."""
        return {key: b.stats.requests for key, b in self.backends.items()}
