"""vLLM back-end: pure helpers on CPU (no vllm needed); real generation only with vLLM + GPU."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agents.backends import ChatRequest, SamplingConfig, backend_config
from agents.backends.vllm_backend import (
    VLLMConfig,
    engine_kwargs,
    lora_rank,
    lora_request_args,
    max_lora_rank_for,
    vllm_batch,
)


def has_vllm_and_gpu() -> bool:
    if importlib.util.find_spec("vllm") is None:
        return False
    import torch

    return torch.cuda.is_available()


def adapter_dir(root: Path, name: str, rank: int) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"r": rank, "peft_type": "LORA"}))
    return folder


def test_lora_request_args_are_stable_absolute_and_distinct(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = adapter_dir(tmp_path, "seller-lora", 8)
    second = adapter_dir(tmp_path, "buyer-lora", 8)
    name, lora_id, path = lora_request_args(first)
    assert path == str(first.resolve())
    assert name.startswith("seller-lora-")
    assert 1 <= lora_id <= 2**31 - 1
    monkeypatch.chdir(tmp_path)
    assert lora_request_args("seller-lora") == (name, lora_id, path)  # relative path, same id
    assert lora_request_args(second)[1] != lora_id


def test_lora_id_is_the_same_in_another_process(tmp_path: Path) -> None:
    folder = adapter_dir(tmp_path, "a", 8)
    code = (
        "import sys; from agents.backends.vllm_backend import lora_request_args; "
        "print(lora_request_args(sys.argv[1])[1])"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code, str(folder)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert int(out.stdout) == lora_request_args(folder)[1]


def test_lora_rank_is_read_from_adapter_config_and_rounded_to_vllm_ranks(tmp_path: Path) -> None:
    assert lora_rank(adapter_dir(tmp_path, "r16", 16)) == 16
    assert [max_lora_rank_for(r) for r in (1, 8, 64, 65, 128, 300, 512)] == [
        64,
        64,
        64,
        128,
        128,
        320,
        512,
    ]
    with pytest.raises(ValueError, match="exceeds"):
        max_lora_rank_for(1024)
    with pytest.raises(ValueError, match=r"adapter_config\.json"):
        lora_rank(tmp_path / "missing")


def test_engine_kwargs_without_lora_disable_lora_and_keep_prefix_caching() -> None:
    kwargs = engine_kwargs("Qwen/Qwen2.5-0.5B-Instruct", VLLMConfig())
    assert kwargs == {
        "model": "Qwen/Qwen2.5-0.5B-Instruct",
        "enable_prefix_caching": True,
        "gpu_memory_utilization": 0.9,
        "tensor_parallel_size": 1,
        "enable_lora": False,
        "disable_log_stats": True,
    }
    assert engine_kwargs("m", VLLMConfig(log_stats=True))["disable_log_stats"] is False


def test_adapters_of_one_base_model_share_engine_kwargs(tmp_path: Path) -> None:
    seller = VLLMConfig(lora=str(adapter_dir(tmp_path, "seller", 16)), max_model_len=4096)
    buyer = VLLMConfig(lora=str(adapter_dir(tmp_path, "buyer", 32)), max_model_len=4096)
    assert engine_kwargs("base", seller) == engine_kwargs("base", buyer)
    kwargs = engine_kwargs("base", seller)
    assert (kwargs["enable_lora"], kwargs["max_lora_rank"], kwargs["max_model_len"]) == (
        True,
        64,
        4096,
    )
    assert engine_kwargs("base", VLLMConfig(max_model_len=4096)) != kwargs


def test_vllm_params_parse_from_spec_strings(tmp_path: Path) -> None:
    config = backend_config(
        "vllm",
        {
            "lora": str(tmp_path),
            "gpu_memory_utilization": "0.5",
            "max_model_len": "2048",
            "enable_prefix_caching": "false",
            "tensor_parallel_size": "2",
            "log_stats": "true",
            "temperature": "0.2",  # the agent's, ignored here
        },
    )
    assert config == VLLMConfig(
        lora=str(tmp_path),
        gpu_memory_utilization=0.5,
        max_model_len=2048,
        enable_prefix_caching=False,
        tensor_parallel_size=2,
        log_stats=True,
    )
    assert backend_config("vllm", {}) == VLLMConfig()


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"dtype": "bf16"}, r"'dtype'.*allowed: lora, gpu_memory_utilization"),
        ({"gpu_memory_utilization": "1.5"}, "gpu_memory_utilization=1.5"),
        ({"enable_prefix_caching": "maybe"}, "enable_prefix_caching='maybe'"),
        ({"tensor_parallel_size": "0"}, "tensor_parallel_size=0"),
        ({"max_model_len": "0"}, "max_model_len=0"),
        ({"log_stats": "sometimes"}, "log_stats='sometimes'"),
    ],
)
def test_bad_vllm_params_are_rejected_naming_the_key(params: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        backend_config("vllm", params)


def test_requests_convert_to_vllm_chat_format_with_per_request_sampling() -> None:
    requests = [
        ChatRequest(
            messages=(("system", "You are a buyer."), ("user", "Offer: $10.00")),
            sampling=SamplingConfig(temperature=0.0, max_tokens=32, seed=7),
            tag="ep1/buyer_1",
        ),
        ChatRequest(messages=(("user", "hi"),), sampling=SamplingConfig(top_p=0.9)),
    ]
    conversations, sampling = vllm_batch(requests)
    assert conversations == [
        [
            {"role": "system", "content": "You are a buyer."},
            {"role": "user", "content": "Offer: $10.00"},
        ],
        [{"role": "user", "content": "hi"}],
    ]
    assert sampling == [
        {"temperature": 0.0, "top_p": 1.0, "max_tokens": 32, "seed": 7},
        {"temperature": 0.7, "top_p": 0.9, "max_tokens": 256, "seed": None},
    ]


@pytest.mark.gpu
@pytest.mark.skipif(not has_vllm_and_gpu(), reason="needs vLLM and a CUDA GPU")
def test_vllm_generates_seeded_reproducible_text_from_tiny_model(tmp_path: Path) -> None:
    from agents.backends import backend_from_spec
    from agents.testing.tiny_model import build_tiny_model

    # head_dim 64: the attention kernels of vLLM do not all support tiny head sizes.
    model_dir = build_tiny_model(tmp_path / "tiny", hidden=128, heads=2)
    backend = backend_from_spec(
        "vllm", str(model_dir), {"gpu_memory_utilization": "0.3", "max_model_len": "1024"}
    )
    try:
        requests = [
            ChatRequest(
                messages=(("user", f"Offer: ${i}.00"),),
                sampling=SamplingConfig(temperature=1.0, max_tokens=16, seed=3),
            )
            for i in range(4)
        ]
        first = backend.generate(requests)
        again = backend.generate(requests[::-1])[::-1]
        assert [c.text for c in first] == [c.text for c in again]
        assert all(c.error is None and c.tokens_in > 0 and 1 <= c.tokens_out <= 16 for c in first)
        assert backend.stats.requests == 8
    finally:
        backend.close()
