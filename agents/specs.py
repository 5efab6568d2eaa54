"""Agent spec strings: ``kind:name[?key=value&...]``.

``scripted:prober?threshold=0.6``, ``hf:/models/tiny``, ``vllm:Qwen/Qwen3-4B?lora=/ckpt/gen3``,
``openai:gpt-4o-mini?base_url=http://127.0.0.1:8000/v1``. Parsing is separate from building so a
bad spec is reported before anything heavy is loaded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from arena.settings import from_mapping

KINDS = ("scripted", "hf", "vllm", "openai")


class SpecError(ValueError):
    """An agent spec that cannot be parsed or built; the message names the part that is wrong."""


@dataclass(frozen=True)
class AgentSpec:
    kind: str
    name: str
    params: Mapping[str, str]
    raw: str

    def __str__(self) -> str:
        return self.raw


def parse_spec(text: str) -> AgentSpec:
    """Split a spec string into kind, name and parameters, checking the kind."""
    raw = text.strip()
    kind, sep, rest = raw.partition(":")
    if not sep or not rest:
        raise SpecError(f"agent spec {text!r} must look like kind:name, kind one of {KINDS}")
    if kind not in KINDS:
        raise SpecError(f"unknown agent kind {kind!r} in {text!r}; use one of {', '.join(KINDS)}")
    name, _, query = rest.partition("?")
    if not name:
        raise SpecError(f"agent spec {text!r} has no name after {kind}:")
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise SpecError(f"bad parameters {query!r} in agent spec {text!r}") from None
    params: dict[str, str] = {}
    for key, value in pairs:
        if key in params:
            raise SpecError(f"parameter {key!r} given twice in {text!r}")
        params[key] = value
    return AgentSpec(kind, name, params, raw)


def is_scripted(spec: str) -> bool:
    """Whether ``spec`` names a scripted agent (answers at once, needs no back-end)."""
    return spec.strip().startswith("scripted:")


def build_config(cls: type, params: Mapping[str, str], spec: str) -> Any:
    """Instantiate the frozen config dataclass ``cls`` from the string parameters of ``spec``
    (the project's one settings dialect, :mod:`arena.settings`)."""
    try:
        return from_mapping(cls, params, repr(spec))
    except ValueError as exc:
        message = str(exc)
        located = message if message.startswith(repr(spec)) else f"{spec!r}: {message}"
        raise SpecError(located) from None
