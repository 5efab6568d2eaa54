"""LLM back-ends behind one small interface (see `base.Backend`).

`backend_from_spec(kind, name, params)` builds a back-end from the parts of an agent spec string
(`openai:<model>?base_url=...`, `hf:<path>?device=...`, `vllm:<name>?max_model_len=...`).
`get_backend` does the same through a process-wide cache so that every agent naming the same
model and back-end settings shares one engine (one model load, one HTTP pool per server). Inside
`routed(router)` it first asks the router, which may answer with a back-end that serves the model
from elsewhere (a league's learner sends its LLM opponents' requests to the Ray pool's actors,
`tournaments.pool_backend`).
Sampling keys in `params` are ignored here: they are the agent's (see `sampling_from_params`).

A `lora=<adapter>` parameter is not a back-end setting either: agents naming adapters of one base
model (`vllm:<base>?lora=<a>`, `vllm:<base>?lora=<b>`) share the base model's back-end and get an
`AdapterView` of it; their requests carry the adapter (see `agents.backends.adapters`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agents.backends.adapters import ADAPTER_KEY, AdapterView, resolve_adapter, split_adapter
from agents.backends.base import (
    SAMPLING_KEYS,
    Backend,
    BackendStats,
    ChatRequest,
    Completion,
    SamplingConfig,
    config_from_params,
    non_default_query,
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

Router = Callable[[str, str, Mapping[str, str]], "Backend | None"]
"""(kind, model, back-end params) -> a back-end serving that model from elsewhere, or None."""
_ROUTERS: list[Router] = []


def backend_config(kind: str, params: Mapping[str, str]) -> Any:
    """The frozen config of back-end `kind` parsed from spec params (sampling keys skipped)."""
    if kind not in BACKENDS:
        raise ValueError(f"unknown back-end kind {kind!r}; use one of {', '.join(BACKENDS)}")
    config_cls, _ = BACKENDS[kind]
    return config_from_params(config_cls, kind, params)


def backend_key(kind: str, name: str, params: Mapping[str, str]) -> str:
    """The name of the back-end serving (kind, model, back-end params): kind, model and the
    settings that differ from their defaults, so equal settings spelled differently share it."""
    return f"{kind}:{name}{non_default_query(backend_config(kind, params))}"


@contextmanager
def routed(router: Router) -> Iterator[None]:
    """While active, ``get_backend`` first offers every model it is asked for to ``router``; a
    back-end the router returns serves that model instead of one loaded in this process (the
    router keeps its own back-ends: the cache is not touched)."""
    _ROUTERS.append(router)
    try:
        yield
    finally:
        _ROUTERS.remove(router)


MODEL_KINDS = ("hf", "vllm")
"""Back-ends that load a model from a folder or a hub id (``openai`` names a served model)."""

_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")
"""``model`` or ``org/model``: a name the back-end resolves from its cache or the hub."""


def check_model_source(kind: str, name: str, params: Mapping[str, str]) -> None:
    """Check a spec's back-end parameters and refuse a local model or adapter folder that is
    missing or incomplete, before anything heavy is imported. A name that is no path on disk but
    reads as a hub id (``org/model``) is left to the back-end."""
    adapter = params.get(ADAPTER_KEY) or None
    backend_config(kind, {k: v for k, v in params.items() if k != ADAPTER_KEY})
    if kind in MODEL_KINDS:
        _check_folder(name, "config.json", f"{kind} model", hub_ok=True)
        if adapter is not None:
            _check_folder(adapter, "adapter_config.json", "lora adapter", hub_ok=False)
    if adapter is not None:
        resolve_adapter(adapter)


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
    """A new back-end instance (not cached); prefer `get_backend` in agents.

    Adapters are per request here: `add_adapter(folder)` on the back-end, then set
    `ChatRequest.adapter`; a `lora` parameter is refused so it cannot be silently ignored.
    """
    if not name:
        raise ValueError(f"{kind} back-end needs a model name or path, got an empty one")
    if ADAPTER_KEY in params:
        raise ValueError(
            f"{ADAPTER_KEY}= is per request: use get_backend (agents get an AdapterView), or "
            "call add_adapter(folder) and set ChatRequest.adapter"
        )
    check_model_source(kind, name, params)
    config = backend_config(kind, params)
    _, backend_cls = BACKENDS[kind]
    return backend_cls(name, config)


def get_backend(kind: str, name: str, params: Mapping[str, str]) -> Backend:
    """The shared back-end for (kind, name, parsed back-end params), built on first use.

    Keyed on the parsed config, so "max_concurrency=08" and "max_concurrency=8" share, and
    sampling keys never split the cache. With `lora=<folder>` the result is an `AdapterView` of
    the base model's shared back-end, which registers the adapter (checked now, so a bad folder
    fails when the agent is built, not mid-run).
    """
    check_model_source(kind, name, params)
    backend_params, adapter = split_adapter(params)
    config = backend_config(kind, backend_params)
    key = (kind, name, config)
    backend = next(
        (b for r in reversed(_ROUTERS) if (b := r(kind, name, backend_params)) is not None), None
    )
    if backend is None:
        with _CACHE_LOCK:
            if key not in _CACHE:
                _CACHE[key] = BACKENDS[kind][1](name, config)
            backend = _CACHE[key]
    if adapter is None:
        return backend
    add_adapter = getattr(backend, "add_adapter", None)
    if add_adapter is None:
        raise ValueError(
            f"the {kind} back-end cannot apply {ADAPTER_KEY}={adapter}: load the adapter in the "
            "server (agents.backends.vllm_server, lora_modules) and name it as the model"
        )
    add_adapter(adapter)
    return AdapterView(backend, adapter)


def end_conversations(backend: Any, conversations: Iterable[str]) -> None:
    """Tell a back-end these conversations are over (their episodes finished), so it can drop
    what it keeps for them (the hf back-end's KV caches); back-ends keeping nothing ignore it."""
    target = getattr(backend, "backend", backend)  # an AdapterView's shared back-end
    forget = getattr(target, "end_conversations", None)
    if forget is not None:
        forget(conversations)


def open_backends() -> list[Backend]:
    """The cached back-ends now open, one per (kind, model, back-end settings): each serves every
    agent and adapter of its model (its ``stats.model_loads`` says how often it loaded it)."""
    with _CACHE_LOCK:
        return list(_CACHE.values())


def close_backends() -> None:
    """Close and forget every cached back-end (end of a tournament, or between tests)."""
    with _CACHE_LOCK:
        backends = list(_CACHE.values())
        _CACHE.clear()
    for backend in backends:
        backend.close()


__all__ = [
    "ADAPTER_KEY",
    "BACKENDS",
    "SAMPLING_KEYS",
    "AdapterView",
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
    "backend_key",
    "check_model_source",
    "close_backends",
    "end_conversations",
    "get_backend",
    "open_backends",
    "routed",
    "sampling_from_params",
    "split_params",
]
