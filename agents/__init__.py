"""Agents: scripted strategies and LLM agents behind one spec string."""

from __future__ import annotations

from agents.llm import check_llm_spec, make_llm_agent
from agents.scripted import make_scripted
from agents.specs import AgentSpec, SpecError, parse_spec


def make_agent(spec: str | AgentSpec, role: str):
    """Build the agent named by ``spec`` for ``role`` ("seller" or "buyer").

    LLM back-ends import their heavy libraries (torch, vllm, openai) only when a model is
    loaded, so scripted play needs none of them.
    """
    parsed = parse_spec(spec) if isinstance(spec, str) else spec
    if role not in ("seller", "buyer"):
        raise ValueError(f"role must be 'seller' or 'buyer', got {role!r}")
    if parsed.kind == "scripted":
        return make_scripted(parsed, role)
    return make_llm_agent(parsed, role)


def check_spec(spec: str, role: str, where: str | None = None) -> AgentSpec:
    """Parse and check a spec so that a bad one fails before any work: a scripted agent is built
    once; an LLM agent's parameters are read and its local model folder looked for, no model
    is loaded (:func:`agents.llm.check_llm_spec`).

    ``where`` (e.g. "tournament.sellers[1]") prefixes the error so a config file's mistake is
    found at once.
    """
    try:
        if not isinstance(spec, str):
            raise SpecError(f"agent specs must be strings, got {spec!r}")
        parsed = parse_spec(spec)
        if parsed.kind == "scripted":
            make_agent(parsed, role)
        else:
            check_llm_spec(parsed, role)
    except ValueError as exc:
        if where is None:
            raise
        raise SpecError(f"{where}: {exc}") from None
    return parsed


__all__ = ["AgentSpec", "SpecError", "check_spec", "make_agent", "parse_spec"]
