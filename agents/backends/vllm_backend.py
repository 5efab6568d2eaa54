"""vLLM back-end: one engine per base model on the GPU, LoRA adapters served from it.

Everything that does not need vLLM itself (parameter parsing, LoRA naming, engine arguments,
conversion of requests to vLLM's chat format) is a pure function here, tested on CPU. vLLM is
imported only when an engine is built or used.

Engine sharing: backends naming the same base model and engine settings share one `vllm.LLM`
(module-level `_ENGINES`, reference counted). LoRA-enabled and plain engines are distinct because
`enable_lora` is fixed at engine creation; all adapters of one base model share the LoRA engine.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.backends.base import (
    BackendStats,
    ChatRequest,
    Completion,
    StatsRecorder,
    non_default_query,
    parse_bool,
    parse_optional_int,
    parse_optional_str,
)

# vLLM accepts only these LoRA ranks for max_lora_rank.
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
# Reserve room for rank-64 adapters even if the first adapter is smaller, so later adapters of a
# league (often r=16..64) fit the same engine.
MIN_MAX_LORA_RANK = 64
MAX_LORAS = 4  # adapters resident on the GPU at once (several league members per batch)


@dataclass(frozen=True)
class VLLMConfig:
    """Back-end-level settings for a vLLM engine (and the LoRA adapter this backend serves)."""

    lora: str | None = field(
        default=None, metadata={"help": "PEFT adapter folder to apply", "parse": parse_optional_str}
    )
    gpu_memory_utilization: float = field(
        default=0.9, metadata={"help": "fraction of GPU memory for the engine", "parse": float}
    )
    max_model_len: int | None = field(
        default=None,
        metadata={"help": "context length; None uses the model's", "parse": parse_optional_int},
    )
    enable_prefix_caching: bool = field(
        default=True,
        metadata={"help": "reuse KV cache of shared prompt prefixes", "parse": parse_bool},
    )
    tensor_parallel_size: int = field(
        default=1, metadata={"help": "GPUs to shard the model over", "parse": int}
    )
    log_stats: bool = field(
        default=False,
        metadata={
            "help": "keep engine statistics (LLM.get_metrics(), e.g. prefix-cache hits)",
            "parse": parse_bool,
        },
    )

    def __post_init__(self) -> None:
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError(
                f"gpu_memory_utilization={self.gpu_memory_utilization} is invalid: use (0, 1]"
            )
        if self.max_model_len is not None and self.max_model_len < 1:
            raise ValueError(f"max_model_len={self.max_model_len} is invalid: use >= 1 or unset")
        if self.tensor_parallel_size < 1:
            raise ValueError(f"tensor_parallel_size={self.tensor_parallel_size} is invalid: >= 1")


def lora_request_args(path: str | Path) -> tuple[str, int, str]:
    """(name, int id, absolute path) for vllm's LoRARequest; id is a stable hash of the path.

    vLLM identifies adapters by the int id, so the same folder must always get the same id and
    different folders different ids, across processes (Python's hash() is salted, sha256 is not).
    """
    resolved = str(Path(path).expanduser().resolve())
    digest = hashlib.sha256(resolved.encode()).hexdigest()
    lora_id = int(digest[:8], 16) % (2**31 - 1) + 1  # vLLM needs a positive int32
    return f"{Path(resolved).name}-{digest[:8]}", lora_id, resolved


def lora_rank(path: str | Path) -> int:
    """The adapter's rank `r` from its PEFT adapter_config.json."""
    config_file = Path(path) / "adapter_config.json"
    if not config_file.is_file():
        raise ValueError(f"lora={path}: no adapter_config.json there; give a PEFT adapter folder")
    rank = json.loads(config_file.read_text()).get("r")
    if not isinstance(rank, int) or rank < 1:
        raise ValueError(f"lora={path}: adapter_config.json has no positive integer 'r'")
    return rank


def max_lora_rank_for(rank: int) -> int:
    """Smallest vLLM-supported max_lora_rank covering `rank` (at least MIN_MAX_LORA_RANK)."""
    for allowed in VLLM_LORA_RANKS:
        if allowed >= max(rank, MIN_MAX_LORA_RANK):
            return allowed
    raise ValueError(f"LoRA rank {rank} exceeds vLLM's largest ({VLLM_LORA_RANKS[-1]})")


def engine_kwargs(name: str, config: VLLMConfig) -> dict[str, Any]:
    """Keyword arguments for vllm.LLM; equal kwargs mean the engine can be shared."""
    kwargs: dict[str, Any] = {
        "model": name,
        "enable_prefix_caching": config.enable_prefix_caching,
        "gpu_memory_utilization": config.gpu_memory_utilization,
        "tensor_parallel_size": config.tensor_parallel_size,
        "enable_lora": config.lora is not None,
        "disable_log_stats": not config.log_stats,
    }
    if config.max_model_len is not None:
        kwargs["max_model_len"] = config.max_model_len
    if config.lora is not None:
        kwargs["max_lora_rank"] = max_lora_rank_for(lora_rank(config.lora))
        kwargs["max_loras"] = MAX_LORAS
    return kwargs


def sampling_kwargs(request: ChatRequest) -> dict[str, Any]:
    """Keyword arguments for vllm.SamplingParams of one request."""
    sampling = request.sampling
    return {
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "max_tokens": sampling.max_tokens,
        "seed": sampling.seed,
    }


def vllm_batch(
    requests: Sequence[ChatRequest],
) -> tuple[list[list[dict[str, str]]], list[dict[str, Any]]]:
    """(conversations, sampling kwargs) for one llm.chat call; vLLM takes per-request params,
    so no grouping is needed and outputs come back in request order."""
    return (
        [request.as_openai_messages() for request in requests],
        [sampling_kwargs(request) for request in requests],
    )


_ENGINES: dict[tuple[tuple[str, Any], ...], tuple[Any, int]] = {}
_ENGINES_LOCK = threading.Lock()


def _acquire_engine(kwargs: dict[str, Any]) -> Any:
    key = tuple(sorted(kwargs.items()))
    with _ENGINES_LOCK:
        if key in _ENGINES:
            engine, users = _ENGINES[key]
        else:
            from vllm import LLM

            engine, users = LLM(**kwargs), 0
        _ENGINES[key] = (engine, users + 1)
        return engine


def _release_engine(kwargs: dict[str, Any]) -> None:
    key = tuple(sorted(kwargs.items()))
    with _ENGINES_LOCK:
        engine, users = _ENGINES[key]
        if users > 1:
            _ENGINES[key] = (engine, users - 1)
        else:
            del _ENGINES[key]


class VLLMBackend:
    """Offline vLLM generation for a base model, optionally through one LoRA adapter."""

    def __init__(self, name: str, config: VLLMConfig = VLLMConfig()) -> None:
        self.name = name
        self.config = config
        self.key = f"vllm:{name}" + non_default_query(config)
        self._engine_kwargs = engine_kwargs(name, config)
        self._lora_args = lora_request_args(config.lora) if config.lora is not None else None
        # Public so callers can read engine metrics (benchmarks/vllm_throughput.py); shared.
        self.llm: Any = _acquire_engine(self._engine_kwargs)
        self._recorder = StatsRecorder()

    @property
    def stats(self) -> BackendStats:
        return self._recorder.stats

    def __repr__(self) -> str:
        return f"VLLMBackend(key={self.key!r})"

    def generate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        """One llm.chat call for the batch; a ValueError (e.g. a prompt longer than the context)
        falls back to one call per request so only the offending requests fail."""
        if self.llm is None:
            raise RuntimeError(f"{self.key} is closed")
        if not requests:
            return []
        start = time.perf_counter()
        try:
            completions = self._chat(requests)
        except ValueError:
            completions = []
            for request in requests:
                try:
                    completions.extend(self._chat([request]))
                except ValueError as exc:
                    completions.append(Completion(text="", error=f"vLLM rejected request: {exc}"))
        self._recorder.record(completions, time.perf_counter() - start)
        return completions

    def close(self) -> None:
        """Stop using the shared engine; it is dropped when its last backend closes."""
        if self.llm is not None:
            self.llm = None
            _release_engine(self._engine_kwargs)

    def _chat(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        from vllm import SamplingParams
        from vllm.lora.request import LoRARequest

        conversations, params = vllm_batch(requests)
        lora = LoRARequest(*self._lora_args) if self._lora_args is not None else None
        outputs = self.llm.chat(
            conversations,
            sampling_params=[SamplingParams(**kwargs) for kwargs in params],
            lora_request=lora,
            add_generation_prompt=True,
            use_tqdm=False,
        )
        return [
            Completion(
                text=output.outputs[0].text,
                tokens_in=len(output.prompt_token_ids or ()),
                tokens_out=len(output.outputs[0].token_ids),
            )
            for output in outputs
        ]
