"""What every agent offers the episode driver (:mod:`agents.driver`).

Two kinds of responders play a seat:

* an **immediate** one answers at once: ``act(view) -> text`` (scripted agents, a replay);
* a **batched** one waits for a back-end shared with other seats and episodes:
  ``request(view)`` returns a request for its ``batcher`` (or a ready :class:`Reply`), the driver
  sends every waiting request of one batcher as one ``batcher.generate(requests)`` call, and
  ``reply(answer) -> Reply`` turns the answer into the message for ``Market.step`` (LLM agents,
  whose batcher is their model back-end; the GRPO learner, whose batcher is the policy).

Both emit the same protocol text the environment parses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from arena.config import MarketConfig
from arena.game import BuyerView, SellerView
from arena.scenarios import Scenario

View = SellerView | BuyerView


@dataclass(frozen=True)
class EpisodeContext:
    """What an agent is told at the start of an episode.

    ``scenario`` carries hidden values; only agents labelled *oracle* may read the parts that
    are private to others. Every other agent reads its views only.
    """

    role: str
    """The seat: "seller" or "buyer_i"."""
    slot: int
    """0 for the seller, i for buyer_i."""
    config: MarketConfig
    scenario: Scenario
    seed: int


@dataclass(frozen=True)
class Reply:
    """A batched responder's turn: the text for ``Market.step`` and what producing it cost, or
    the failure (``error``) that ends the episode as errored."""

    text: str
    tokens_in: int = 0
    tokens_out: int = 0
    error: str | None = None
    retries: int = 0


@runtime_checkable
class Agent(Protocol):
    """An immediate responder."""

    spec: str

    def reset(self, context: EpisodeContext) -> None: ...

    def act(self, view: View) -> str: ...


class Batcher(Protocol):
    """What answers a batch of waiting requests: a model back-end, or the learner's policy."""

    key: str

    def generate(self, requests: Sequence[Any]) -> list[Any]: ...


@runtime_checkable
class BatchedAgent(Protocol):
    """A responder whose turns wait for its ``batcher``."""

    spec: str
    batcher: Batcher

    def reset(self, context: EpisodeContext) -> None: ...

    def request(self, view: View) -> Any: ...

    def reply(self, answer: Any) -> Reply: ...


def agent_seed(scenario: Scenario, slot: int) -> int:
    """The seed of one agent's generator in one episode: fixed by the scenario and the slot."""
    return (scenario.episode_seed * 1_000_003 + slot) % (2**63)
