"""Shared types for LLM back-ends: requests, completions, statistics and parameter parsing.

Every back-end (OpenAI-compatible HTTP, local transformers, vLLM) takes a batch of
`ChatRequest`s and returns one `Completion` per request in the same order. A failure of one
request never raises: it comes back as `Completion(error=...)`, so a rollout engine can score the
episode as a protocol failure instead of losing the whole batch.

Spec parameters are split in two groups. Sampling keys (`SAMPLING_KEYS`) belong to the agent and
travel with each request; everything else configures the shared back-end (one engine per model).
Both are read by the project's one settings dialect (:mod:`arena.settings`) from the fields'
declared types.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from agents.steering import Steer
from arena.settings import convert_fields, from_mapping

ConfigT = TypeVar("ConfigT")

SAMPLING_KEYS: tuple[str, ...] = ("temperature", "top_p", "max_tokens", "seed")
CHAT_ROLES: tuple[str, ...] = ("system", "user", "assistant")
DTYPES: tuple[str, ...] = ("auto", "float32", "bfloat16", "float16")
"""Weight dtypes a model back-end or a learner loads a model in ("auto": the back-end's choice)."""


@dataclass(frozen=True)
class SamplingConfig:
    """How one request is decoded; owned by the agent, not by the back-end."""

    temperature: float = field(
        default=0.7, metadata={"help": "softmax temperature; 0 means greedy decoding"}
    )
    top_p: float = field(default=1.0, metadata={"help": "nucleus sampling mass, in (0, 1]"})
    max_tokens: int = field(default=256, metadata={"help": "most new tokens to generate"})
    seed: int | None = field(
        default=None, metadata={"help": "per-request sampling seed; None means not reproducible"}
    )

    def __post_init__(self) -> None:
        if not math.isfinite(self.temperature) or self.temperature < 0:
            raise ValueError(
                f"temperature={self.temperature} is invalid: use a finite value >= 0 "
                "(0 means greedy)"
            )
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p={self.top_p} is invalid: use a value in (0, 1]")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens={self.max_tokens} is invalid: use an integer >= 1")
        if self.seed is not None and self.seed < 0:
            raise ValueError(f"seed={self.seed} is invalid: use an integer >= 0 or leave it unset")


@dataclass(frozen=True)
class ChatRequest:
    """One chat prompt to complete; `tag` is the caller's id (e.g. "ep12/seller") for tracing.

    `adapter` and `conversation` travel with the request rather than with the back-end, so that
    requests of many adapters and conversations over one base model share one batch.
    """

    messages: tuple[tuple[str, str], ...]
    sampling: SamplingConfig = SamplingConfig()
    tag: str = ""
    adapter: str | None = None
    """PEFT adapter folder to answer through (the spec's ``lora=``); None: the base model."""
    conversation: str | None = None
    """Id of the conversation this prompt continues (one agent in one episode). Back-ends that
    keep a conversation's KV cache between turns (hf) key it by this; None: no reuse."""
    steer: Steer | None = None
    """Forced tokens of a protocol-legal move (the agent option ``steer``,
    :mod:`agents.steering`); the hf back-end applies it, others refuse it."""

    def __post_init__(self) -> None:
        # Accept lists from callers but store tuples so requests stay hashable and immutable.
        messages = tuple(tuple(message) for message in self.messages)
        if not messages:
            raise ValueError(f"ChatRequest {self.tag!r}: messages is empty; give at least one")
        for index, message in enumerate(messages):
            if len(message) != 2 or not all(isinstance(part, str) for part in message):
                raise ValueError(
                    f"ChatRequest {self.tag!r}: messages[{index}] must be a (role, content) "
                    f"pair of strings, got {message!r}"
                )
            if message[0] not in CHAT_ROLES:
                raise ValueError(
                    f"ChatRequest {self.tag!r}: messages[{index}] has role {message[0]!r}; "
                    f"use one of {', '.join(CHAT_ROLES)}"
                )
        object.__setattr__(self, "messages", messages)

    def as_openai_messages(self) -> list[dict[str, str]]:
        """The messages in the role/content dict form shared by OpenAI, HF chat templates, vLLM."""
        return [{"role": role, "content": content} for role, content in self.messages]


@dataclass
class Completion:
    """The answer to one request; `error` set means it failed after `retries` retries."""

    text: str
    tokens_in: int = 0
    tokens_out: int = 0
    error: str | None = None
    retries: int = 0
    tokens_cached: int = 0
    """Prompt tokens (of `tokens_in`) whose KV cache was reused rather than computed: vLLM's
    prefix-cache hits, the hf back-end's conversation cache."""

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class BackendStats:
    """Running totals for one back-end instance, for reports and throughput checks."""

    requests: int = 0
    retries: int = 0
    errors: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_cached: int = 0
    seconds: float = 0.0
    model_loads: int = 0
    """Models (engines) this back-end loaded: 1 for a back-end serving any number of adapters."""

    def record(self, completions: Sequence[Completion], seconds: float) -> None:
        """Add one generate() call: its completions and its wall-clock time."""
        self.requests += len(completions)
        self.retries += sum(c.retries for c in completions)
        self.errors += sum(1 for c in completions if c.error is not None)
        self.tokens_in += sum(c.tokens_in for c in completions)
        self.tokens_out += sum(c.tokens_out for c in completions)
        self.tokens_cached += sum(c.tokens_cached for c in completions)
        self.seconds += seconds

    @property
    def cache_hit_rate(self) -> float:
        """Share of prompt tokens served from a KV cache (0 when nothing was asked yet)."""
        return self.tokens_cached / self.tokens_in if self.tokens_in else 0.0

    def as_dict(self) -> dict[str, float]:
        return {**dataclasses.asdict(self), "cache_hit_rate": self.cache_hit_rate}


@runtime_checkable
class Backend(Protocol):
    """What agents and the rollout engine need from a model back-end."""

    key: str
    stats: BackendStats

    def generate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        """Complete every request (same order) as one batch; per-request failures never raise."""
        ...

    def close(self) -> None:
        """Release connections, threads and accelerator memory."""
        ...


class StatsRecorder:
    """Thread-safe stats updates: generate() may be called from several threads at once."""

    def __init__(self) -> None:
        self.stats = BackendStats()
        self._lock = threading.Lock()

    def record(self, completions: Sequence[Completion], seconds: float) -> None:
        with self._lock:
            self.stats.record(completions, seconds)

    def loaded(self) -> None:
        """Count one model (engine) load."""
        with self._lock:
            self.stats.model_loads += 1


def split_params(params: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Split spec parameters into (back-end params, sampling params)."""
    backend = {k: v for k, v in params.items() if k not in SAMPLING_KEYS}
    sampling = {k: v for k, v in params.items() if k in SAMPLING_KEYS}
    return backend, sampling


def sampling_from_params(
    params: Mapping[str, str], default: SamplingConfig = SamplingConfig()
) -> SamplingConfig:
    """Build the agent's SamplingConfig from the sampling keys of a spec (other keys ignored)."""
    _, sampling = split_params(params)
    values = convert_fields(SamplingConfig, sampling, "sampling parameters")
    return dataclasses.replace(default, **values)


def config_from_params(cls: type[ConfigT], kind: str, params: Mapping[str, str]) -> ConfigT:
    """The back-end's frozen config dataclass from spec params, read like every other setting
    (:func:`arena.settings.from_mapping`). Sampling keys are skipped (they belong to the agent);
    any other unknown key is an error naming the known ones."""
    backend, _ = split_params(params)
    return from_mapping(cls, backend, f"{kind} back-end parameters")


def non_default_query(config: Any, skip: tuple[str, ...] = ()) -> str:
    """ "?k=v&..." for config fields that differ from their defaults (stable order), or ""."""
    parts = [
        f"{f.name}={getattr(config, f.name)}"
        for f in dataclasses.fields(config)
        if f.name not in skip and getattr(config, f.name) != f.default
    ]
    return "?" + "&".join(parts) if parts else ""
