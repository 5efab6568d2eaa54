"""OpenAI-compatible back-end against a real scripted HTTP server on 127.0.0.1.

Also covers the shared request types and the spec/caching entry points of agents.backends,
using the openai back-end because it is cheap to construct.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from agents.backends import (
    ChatRequest,
    SamplingConfig,
    backend_from_spec,
    close_backends,
    get_backend,
    sampling_from_params,
    split_params,
)
from agents.backends.openai_backend import MAX_BACKOFF_S, OpenAIBackend, backoff_delay
from agents.testing.http_server import Reply, ScriptedChatServer, count_words

FAST = {"backoff": "0.001", "timeout": "5", "max_retries": "3"}


def request(content: str, **sampling: float | int | None) -> ChatRequest:
    return ChatRequest(
        messages=(("system", "You are the seller."), ("user", content)),
        sampling=SamplingConfig(**sampling),  # type: ignore[arg-type]
        tag=f"test/{content}",
    )


def backend_for(server: ScriptedChatServer, **params: str) -> OpenAIBackend:
    backend = backend_from_spec("openai", "tiny-chat", {"base_url": server.url, **FAST, **params})
    assert isinstance(backend, OpenAIBackend)
    return backend


def test_batch_returns_server_text_in_request_order_with_usage_counted() -> None:
    with ScriptedChatServer() as server:
        backend = backend_for(server)
        prompts = [f"offer number {i} is $1{i}.00" for i in range(5)]
        completions = backend.generate([request(p) for p in prompts])
        backend.close()
    assert [c.text for c in completions] == [f"echo: {p}" for p in prompts]
    assert all(c.error is None and c.retries == 0 for c in completions)
    expected_in = [count_words("You are the seller.") + count_words(p) for p in prompts]
    assert [c.tokens_in for c in completions] == expected_in
    assert [c.tokens_out for c in completions] == [count_words(f"echo: {p}") for p in prompts]
    stats = backend.stats
    assert (stats.requests, stats.retries, stats.errors) == (5, 0, 0)
    assert stats.tokens_in == sum(expected_in)
    assert stats.tokens_out == sum(c.tokens_out for c in completions)
    assert stats.seconds > 0


def test_rate_limit_then_success_counts_one_retry() -> None:
    with ScriptedChatServer(script=[Reply(status=429)]) as server:
        backend = backend_for(server)
        [completion] = backend.generate([request("hello")])
        backend.close()
        assert len(server.requests) == 2
    assert completion.text == "echo: hello"
    assert completion.retries == 1
    assert completion.error is None
    assert backend.stats.retries == 1
    assert backend.stats.errors == 0


def test_server_error_until_retries_run_out_fails_only_that_request() -> None:
    def fail_marked(body: dict) -> Reply | None:
        return Reply(status=500) if body["messages"][-1]["content"] == "fail" else None

    with ScriptedChatServer(route=fail_marked) as server:
        backend = backend_for(server, max_retries="2")
        completions = backend.generate([request("a"), request("fail"), request("b")])
        backend.close()
        failed_attempts = [
            r for r in server.requests if r.body["messages"][-1]["content"] == "fail"
        ]
    assert len(failed_attempts) == 3
    ok_a, failed, ok_b = completions
    assert (ok_a.text, ok_b.text) == ("echo: a", "echo: b")
    assert ok_a.error is None and ok_b.error is None
    assert failed.error is not None and "HTTP 500" in failed.error
    assert failed.text == ""
    assert failed.retries == 2
    assert (backend.stats.requests, backend.stats.errors, backend.stats.retries) == (3, 1, 2)


def test_slow_server_times_out_is_retried_then_reported() -> None:
    with ScriptedChatServer(route=lambda body: Reply(delay=2.0)) as server:
        backend = backend_for(server, timeout="0.2", max_retries="1")
        [completion] = backend.generate([request("slow")])
        backend.close()
        assert len(server.requests) == 2
    assert completion.error is not None and "timeout" in completion.error
    assert completion.retries == 1


def test_malformed_json_is_retried_then_reported_as_error() -> None:
    with ScriptedChatServer(script=[Reply(body="malformed")] * 2) as server:
        backend = backend_for(server, max_retries="1")
        [completion] = backend.generate([request("x")])
        backend.close()
    assert completion.error is not None and "malformed" in completion.error
    assert completion.retries == 1


def test_malformed_json_once_then_success_recovers() -> None:
    with ScriptedChatServer(script=[Reply(body="malformed")]) as server:
        backend = backend_for(server)
        [completion] = backend.generate([request("x")])
        backend.close()
    assert (completion.text, completion.retries, completion.error) == ("echo: x", 1, None)


def test_valid_json_without_choices_is_malformed() -> None:
    with ScriptedChatServer(script=[Reply(body={"id": "x", "object": "chat.completion"})]) as srv:
        backend = backend_for(srv, max_retries="0")
        [completion] = backend.generate([request("x")])
        backend.close()
    assert completion.error is not None and "no choices" in completion.error


def test_client_error_is_not_retried() -> None:
    with ScriptedChatServer(script=[Reply(status=400)]) as server:
        backend = backend_for(server)
        [completion] = backend.generate([request("bad")])
        backend.close()
        assert len(server.requests) == 1
    assert completion.error is not None and "400" in completion.error
    assert completion.retries == 0


def test_concurrency_never_exceeds_max_concurrency() -> None:
    with ScriptedChatServer(default_delay=0.05) as server:
        backend = backend_for(server, max_concurrency="3")
        completions = backend.generate([request(f"r{i}") for i in range(12)])
        backend.close()
        assert 1 < server.max_in_flight <= 3
    assert [c.text for c in completions] == [f"echo: r{i}" for i in range(12)]


def test_sampling_settings_and_seed_are_sent_and_absent_seed_is_omitted() -> None:
    with ScriptedChatServer() as server:
        backend = backend_for(server)
        backend.generate([request("s", temperature=0.3, top_p=0.9, max_tokens=17, seed=42)])
        backend.generate([request("n")])
        backend.close()
        seeded, unseeded = (r.body for r in server.requests)
    assert seeded["model"] == "tiny-chat"
    assert (seeded["temperature"], seeded["top_p"], seeded["max_tokens"], seeded["seed"]) == (
        0.3,
        0.9,
        17,
        42,
    )
    assert "seed" not in unseeded
    assert seeded["messages"] == [
        {"role": "system", "content": "You are the seller."},
        {"role": "user", "content": "s"},
    ]


def test_api_key_is_sent_from_env_but_never_exposed(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-test-4d9f0c2e"
    monkeypatch.setenv("ARENA_TEST_KEY", secret)
    with ScriptedChatServer() as server:
        backend = backend_for(server, api_key_env="ARENA_TEST_KEY")
        backend.generate([request("k")])
        headers = {k.lower(): v for k, v in server.requests[0].headers.items()}
        exposed = [repr(backend), backend.key, repr(backend.config), str(backend.stats.as_dict())]
        exposed += [str(value) for value in vars(backend).values()]
        backend.close()
    assert headers["authorization"] == f"Bearer {secret}"
    assert not any(secret in text for text in exposed)


def test_unset_key_env_sends_placeholder_for_local_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARENA_UNSET_KEY", raising=False)
    with ScriptedChatServer() as server:
        backend = backend_for(server, api_key_env="ARENA_UNSET_KEY")
        backend.generate([request("k")])
        backend.close()
        headers = {k.lower(): v for k, v in server.requests[0].headers.items()}
    assert headers["authorization"] == "Bearer EMPTY"


def test_generate_works_when_called_inside_a_running_event_loop() -> None:
    async def caller(backend: OpenAIBackend) -> list[str]:
        return [c.text for c in backend.generate([request("in-loop")])]

    with ScriptedChatServer() as server:
        backend = backend_for(server)
        texts = asyncio.run(caller(backend))
        texts += [c.text for c in backend.generate([request("after")])]
        backend.close()
    assert texts == ["echo: in-loop", "echo: after"]


def test_empty_batch_returns_empty_list_without_contacting_server() -> None:
    with ScriptedChatServer() as server:
        backend = backend_for(server)
        assert backend.generate([]) == []
        backend.close()
        assert server.requests == []


def test_backoff_delay_is_full_jitter_bounded_by_exponential_cap() -> None:
    rng = np.random.default_rng(0)
    for retry in range(8):
        delays = [backoff_delay(rng, 0.5, retry) for _ in range(200)]
        bound = min(MAX_BACKOFF_S, 0.5 * 2**retry)
        assert all(0 <= d <= bound for d in delays)
        assert max(delays) > 0.5 * bound  # spread over the range, not a constant
    assert backoff_delay(rng, 0.0, 3) == 0.0


def test_unknown_backend_param_names_key_and_allowed_ones() -> None:
    with pytest.raises(ValueError, match=r"'max_conc'.*known keys: base_url, api_key_env"):
        backend_from_spec("openai", "m", {"base_url": "http://127.0.0.1:1/v1", "max_conc": "2"})


def test_invalid_backend_values_are_rejected_with_field_name() -> None:
    with pytest.raises(ValueError, match="base_url"):
        backend_from_spec("openai", "m", {"base_url": "127.0.0.1:8000"})
    with pytest.raises(ValueError, match="max_concurrency"):
        backend_from_spec("openai", "m", {"base_url": "http://h/v1", "max_concurrency": "0"})
    with pytest.raises(ValueError, match="timeout"):
        backend_from_spec("openai", "m", {"base_url": "http://h/v1", "timeout": "soon"})
    with pytest.raises(ValueError, match="unknown back-end kind 'gpt'"):
        backend_from_spec("gpt", "m", {})


def test_get_backend_shares_one_instance_per_model_and_backend_params() -> None:
    base = {"base_url": "http://127.0.0.1:9/v1"}
    try:
        first = get_backend("openai", "m", {**base, "max_concurrency": "8", "temperature": "0.1"})
        same = get_backend("openai", "m", {**base, "max_concurrency": "08", "seed": "3"})
        other_model = get_backend("openai", "n", {**base, "max_concurrency": "8"})
        other_params = get_backend("openai", "m", {**base, "max_concurrency": "4"})
        assert first is same
        assert other_model is not first and other_params is not first
        assert first.key == "openai:m@http://127.0.0.1:9/v1?max_concurrency=8"
        assert other_params.key != first.key
    finally:
        close_backends()
    assert get_backend("openai", "m", {**base, "max_concurrency": "8"}) is not first
    close_backends()


def test_split_and_sampling_params_parse_agent_keys_only() -> None:
    backend_params, sampling_params = split_params(
        {"base_url": "http://h/v1", "temperature": "0", "seed": "5", "max_tokens": "64"}
    )
    assert backend_params == {"base_url": "http://h/v1"}
    assert sampling_from_params(sampling_params) == SamplingConfig(
        temperature=0.0, max_tokens=64, seed=5
    )
    assert sampling_from_params({}, default=SamplingConfig(top_p=0.5)).top_p == 0.5
    with pytest.raises(ValueError, match="max_tokens: expected an integer, got 'many'"):
        sampling_from_params({"max_tokens": "many"})


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"temperature": -0.1}, "temperature"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"seed": -1}, "seed"),
    ],
)
def test_sampling_config_rejects_out_of_range_values(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        SamplingConfig(**kwargs)


def test_chat_request_normalises_lists_and_rejects_bad_messages() -> None:
    req = ChatRequest(messages=[["user", "hi"]])  # type: ignore[arg-type]
    assert req.messages == (("user", "hi"),)
    assert hash(req) == hash(ChatRequest(messages=(("user", "hi"),)))
    with pytest.raises(ValueError, match="empty"):
        ChatRequest(messages=())
    with pytest.raises(ValueError, match="role 'narrator'"):
        ChatRequest(messages=(("narrator", "once upon a time"),))
    with pytest.raises(ValueError, match=r"messages\[0\]"):
        ChatRequest(messages=(("user",),))  # type: ignore[arg-type]
