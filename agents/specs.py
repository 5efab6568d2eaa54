"""Agent spec strings: ``kind:name[?key=value&...]``.

``scripted:prober?threshold=0.6``, ``hf:/models/tiny``, ``vllm:Qwen/Qwen3-4B?lora=/ckpt/gen3``,
``openai:gpt-4o-mini?base_url=http://127.0.0.1:8000/v1``. Parsing is separate from building so a
bad spec is reported before anything heavy is loaded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

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
    """Instantiate the frozen config dataclass ``cls`` from string parameters of ``spec``."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(params) - set(fields))
    if unknown:
        raise SpecError(
            f"unknown parameter(s) {', '.join(unknown)} in {spec!r}; "
            f"allowed: {', '.join(fields) or 'none'}"
        )
    values: dict[str, Any] = {}
    for key, text in params.items():
        default = fields[key].default
        try:
            if isinstance(default, bool):
                values[key] = text.lower() in ("1", "true", "yes", "on")
            elif isinstance(default, int):
                values[key] = int(text)
            elif isinstance(default, float):
                values[key] = float(text)
            else:
                values[key] = text
        except ValueError:
            raise SpecError(f"parameter {key}={text!r} in {spec!r} is not a number") from None
    try:
        return cls(**values)
    except ValueError as exc:
        raise SpecError(f"{spec!r}: {exc}") from None
