"""Scripted agents, named ``scripted:<name>[?key=value&...]``; see sellers.py and buyers.py."""

from __future__ import annotations

from agents.scripted.buyers import BUYERS
from agents.scripted.sellers import SELLERS
from agents.specs import AgentSpec, SpecError, build_config


def make_scripted(spec: AgentSpec, role: str):
    """Build the scripted seller or buyer named by ``spec``."""
    table = SELLERS if role == "seller" else BUYERS
    if spec.name not in table:
        raise SpecError(
            f"unknown scripted {role} {spec.name!r} in {spec.raw!r}; "
            f"known: {', '.join(sorted(table))}"
        )
    cls, config_cls = table[spec.name]
    return cls(spec.raw, build_config(config_cls, spec.params, spec.raw))
