"""The pooled back-end (tournaments/pool_backend.py): a model's requests answered by Ray actors.

Routing through ``agents.backends.routed`` is checked without Ray; the batches are checked on a
local Ray instance with small echo actors standing in for the pool's model actors (the league
test, tests/leagues/test_league_ray.py, runs the real ones on a two-node cluster)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

import pytest

from agents.backends import backend_key, get_backend, routed
from agents.backends.adapters import AdapterView
from agents.backends.base import ChatRequest, Completion
from tournaments.pool_backend import PooledBackend, PoolRouter

MODEL = ("openai", "m", {"base_url": "http://127.0.0.1:9/v1"})


def requests(n: int) -> list[ChatRequest]:
    return [
        ChatRequest((("user", f"q{i}"),), tag=f"r{i}", conversation=f"ep{i % 3}/seller")
        for i in range(n)
    ]


class Echo:
    """A stand-in for ModelActor: answers with its process id, the model and the prompt; with
    ``die_on`` it exits its process on that call (a lost worker)."""

    def __init__(self, die_on: int = -1) -> None:
        self.calls, self.die_on, self.ended = 0, die_on, []

    def generate(self, model: tuple, batch: Sequence[ChatRequest]) -> list[Completion]:
        self.calls += 1
        if self.calls == self.die_on:
            os._exit(1)
        return [Completion(f"{os.getpid()}|{model[1]}|{r.messages[-1][1]}") for r in batch]

    def end_conversations(self, model: tuple, conversations: Sequence[str]) -> None:
        self.ended += list(conversations)

    def report(self) -> tuple[int, list[str]]:
        return self.calls, self.ended


@pytest.fixture(scope="module")
def ray_local() -> Iterator[object]:
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        ray.shutdown()
    ray.init(address="local", num_cpus=3, include_dashboard=False)
    yield ray
    ray.shutdown()


def echo_actors(ray: object, *die_on: int) -> list[object]:
    actor = ray.remote(max_restarts=0, max_task_retries=0, num_cpus=1)(Echo)  # type: ignore[attr-defined]
    return [actor.remote(d) for d in die_on]


def test_a_router_serves_its_models_and_leaves_every_other_to_this_process() -> None:
    class Served:
        key, stats = "served", None

    served = Served()
    key = backend_key(*MODEL)
    router_calls: list[str] = []

    def router(kind: str, name: str, params: dict) -> object | None:
        router_calls.append(backend_key(kind, name, params))
        return served if backend_key(kind, name, params) == key else None

    with routed(router):  # type: ignore[arg-type]
        assert get_backend(*MODEL) is served
        # Sampling keys are the agent's: the same model, the same routed back-end.
        assert get_backend(*MODEL[:2], {**MODEL[2], "temperature": "0.1"}) is served
        other = get_backend("openai", "n", MODEL[2])
        assert other is not served and other.key.startswith("openai:n@")
    assert get_backend(*MODEL) is not served  # routing ends with the block
    assert router_calls.count(key) == 2


def test_a_pool_router_builds_one_pooled_backend_per_served_model() -> None:
    router = PoolRouter({backend_key(*MODEL): ["actor"]})
    first = router(*MODEL)
    assert isinstance(first, PooledBackend) and router(*MODEL) is first
    assert router("openai", "n", MODEL[2]) is None
    assert first.key == backend_key(*MODEL) and router.requests() == {first.key: 0}
    with pytest.raises(ValueError, match="no pool actor serves openai:m"):
        PooledBackend(*MODEL, [])


def test_adapters_reach_the_pooled_backend_through_an_adapter_view(tmp_path) -> None:
    adapter = tmp_path / "gen-001-seller"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    router = PoolRouter({backend_key("openai", "m", MODEL[2]): ["actor"]})
    with routed(router):
        view = get_backend("openai", "m", {**MODEL[2], "lora": str(adapter)})
    assert isinstance(view, AdapterView) and isinstance(view.backend, PooledBackend)
    assert view.adapter == str(adapter.resolve())  # what the agent stamps on its requests
    with routed(router), pytest.raises(ValueError, match=r"absent: no adapter_config\.json"):
        get_backend("openai", "m", {**MODEL[2], "lora": str(tmp_path / "absent")})


@pytest.mark.slow
def test_a_batch_is_answered_in_order_each_conversation_by_one_actor(ray_local) -> None:
    actors = echo_actors(ray_local, -1, -1)
    backend = PooledBackend(*MODEL, actors)
    batch = requests(9)
    first, second = backend.generate(batch), backend.generate(batch)
    assert [a.text.split("|")[2] for a in first] == [f"q{i}" for i in range(9)]
    pid = {r.conversation: a.text.split("|")[0] for r, a in zip(batch, first, strict=True)}
    assert len(set(pid.values())) == 2  # three conversations over two actors
    assert all(
        pid[r.conversation] == a.text.split("|")[0] for r, a in zip(batch, second, strict=True)
    )
    assert backend.stats.requests == 18 and backend.stats.errors == 0
    backend.end_conversations(["ep0/seller"])
    reports = ray_local.get([a.report.remote() for a in actors])  # type: ignore[attr-defined]
    assert [ended for _, ended in reports] == [["ep0/seller"], ["ep0/seller"]]


@pytest.mark.slow
def test_a_lost_actor_s_requests_are_answered_by_another(ray_local) -> None:
    backend = PooledBackend(*MODEL, echo_actors(ray_local, 1, -1, -1))
    answers = backend.generate(requests(9))
    assert all(a.ok for a in answers)
    assert [a.text.split("|")[2] for a in answers] == [f"q{i}" for i in range(9)]
    assert len({a.text.split("|")[0] for a in answers}) == 2  # the two that live


@pytest.mark.slow
def test_requests_come_back_as_errors_when_every_actor_is_lost(ray_local) -> None:
    backend = PooledBackend(*MODEL, echo_actors(ray_local, 1))
    answers = backend.generate(requests(3))
    assert all(not a.ok and "pool actor lost" in (a.error or "") for a in answers)
    assert backend.stats.errors == 3
