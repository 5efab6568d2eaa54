"""LLM back-ends behind one small interface (see `base.Backend`).

`backend_from_spec(kind, name, params)` builds a back-end from the parts of an agent spec string
(`openai:<model>?base_url=...`, `hf:<path>?device=...`, `vllm:<name>?lora=...`).
`get_backend` does the same through a process-wide cache so that every agent naming the same
model and back-end settings shares one engine (one vLLM engine per GPU, one HTTP pool per server).
Sampling keys in `params` are ignored here: they are the agent's (see `sampling_from_params`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agents.backends.base import (
    SAMPLING_KEYS,
    Backend,
    BackendStats,
    ChatRequest,
    Completion,
    SamplingConfig,
    config_from_params,
    sampling_from_params,
    split_params,
)
from agents.backends.hf_backend import HFBackend, HFConfig
from agents.backends.openai_backend import OpenAIBackend, OpenAIConfig
from agents.backends.vllm_backend import VLLMBackend, VLLMConfig

BACKENDS: dict[str, tuple[type, type]] = {
    "openai": (OpenAIConfig, OpenAIBackend),
    "hf": (HFConfig, HFBackend),
    "vllm": (VLLMConfig, VLLMBackend),
}

_CACHE: dict[tuple[str, str, Any], Backend] = {}
_CACHE_LOCK = threading.Lock()


def backend_config(kind: str, params: Mapping[str, str]) -> Any:
    """The frozen config of back-end `kind` parsed from spec params (sampling keys skipped)."""
    if kind not in BACKENDS:
        raise ValueError(f"unknown back-end kind {kind!r}; use one of {', '.join(BACKENDS)}")
    config_cls, _ = BACKENDS[kind]
    return config_from_params(config_cls, kind, params)


MODEL_KINDS = ("hf", "vllm")
"""Back-ends that load a model from a folder or a hub id (``openai`` names a served model)."""

_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")
"""``model`` or ``org/model``: a name the back-end resolves from its cache or the hub."""


def check_model_source(kind: str, name: str, config: Any) -> None:
    """Refuse a local model or adapter folder that is missing or incomplete, before anything
    heavy is imported. A name that is no path on disk but reads as a hub id (``org/model``) is
    left to the back-end."""
    if kind not in MODEL_KINDS:
        return
    _check_folder(name, "config.json", f"{kind} model", hub_ok=True)
    lora = getattr(config, "lora", None)
    if lora:
        _check_folder(lora, "adapter_config.json", "lora adapter", hub_ok=False)


def _check_folder(name: str, marker: str, what: str, hub_ok: bool) -> None:
    path = Path(name)
    if path.is_dir():
        if not (path / marker).is_file():
            raise ValueError(f"{what} folder {name} has no {marker}")
    elif path.exists():
        raise ValueError(f"{what} {name} is a file; give the folder that holds it")
    elif not (hub_ok and _HUB_ID.fullmatch(name)):
        raise ValueError(f"no {what} folder at {name}")


def backend_from_spec(kind: str, name: str, params: Mapping[str, str]) -> Backend:
    """A new back-end instance (not cached); prefer `get_backend` in agents."""
    if not name:
        raise ValueError(f"{kind} back-end needs a model name or path, got an empty one")
    config = backend_config(kind, params)
    check_model_source(kind, name, config)
    _, backend_cls = BACKENDS[kind]
    return backend_cls(name, config)


def get_backend(kind: str, name: str, params: Mapping[str, str]) -> Backend:
    """The shared back-end for (kind, name, parsed back-end params), built on first use.

    Keyed on the parsed config, so "max_concurrency=08" and "max_concurrency=8" share, and
    sampling keys never split the cache.
    """
    config = backend_config(kind, params)
    check_model_source(kind, name, config)
    key = (kind, name, config)
    with _CACHE_LOCK:
        if key not in _CACHE:
            _CACHE[key] = BACKENDS[kind][1](name, config)
        return _CACHE[key]


def close_backends() -> None:
    """Close and forget every cached back-end (end of a tournament, or between tests)."""
    with _CACHE_LOCK:
        backends = list(_CACHE.values())
        _CACHE.clear()
    for backend in backends:
        backend.close()


__all__ = [
    "BACKENDS",
    "SAMPLING_KEYS",
    "Backend",
    "BackendStats",
    "ChatRequest",
    "Completion",
    "HFBackend",
    "HFConfig",
    "OpenAIBackend",
    "OpenAIConfig",
    "SamplingConfig",
    "VLLMBackend",
    "VLLMConfig",
    "backend_config",
    "backend_from_spec",
    "check_model_source",
    "close_backends",
    "get_backend",
    "sampling_from_params",
    "split_params",
]
