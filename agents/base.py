"""What every agent offers the runners.

A scripted agent answers at once: ``act(view) -> text``. An LLM agent is split in two so that a
rollout engine can batch many of them: ``request(view, observation) -> ChatRequest`` then
``receive(completion) -> text``. Both emit the same protocol text the environment parses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from arena.config import MarketConfig
from arena.game import BuyerView, SellerView
from arena.scenarios import Scenario


@dataclass(frozen=True)
class EpisodeContext:
    """What an agent is told at the start of an episode.

    ``scenario`` carries hidden values; only agents labelled *oracle* may read the parts that
    are private to others. Every other agent reads its views only.
    """

    role: str
    """"seller" or "buyer_i"."""
    slot: int
    """0 for the seller, i-1 for buyer_i."""
    config: MarketConfig
    scenario: Scenario
    seed: int


@runtime_checkable
class Agent(Protocol):
    spec: str

    def reset(self, context: EpisodeContext) -> None: ...

    def act(self, view: SellerView | BuyerView) -> str: ...


def agent_seed(scenario: Scenario, slot: int) -> int:
    """The seed of one agent's generator in one episode: fixed by the scenario and the slot."""
    return (scenario.episode_seed * 1_000_003 + slot) % (2**63)
