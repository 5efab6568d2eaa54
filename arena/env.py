"""# Concurrent negotiation market (PettingZoo AEC environment)

A seller with a private cost negotiates over sealed one-on-one channels with N buyers who each
hold a private budget, under a global budget of T seller messages and a per-buyer cap K
(paper 000, Section 3). The market (turns, budgets, deals, rewards) is :class:`arena.game.Market`,
which applies the rules of :mod:`arena.rules` to messages parsed by :mod:`arena.protocol`; this
module only adapts it to the PettingZoo AEC API.

| Import             | `from arena.env import MarketEnv, env`                         |
|--------------------|----------------------------------------------------------------|
| Actions            | Text, at most 32,768 characters: one protocol message (docs/protocol.md) |
| Agents             | `seller`, `buyer_1` ... `buyer_N`                              |
| Observation space  | Dict({"text": Text}), at most 65,536 characters: what an LLM reads |
| Structured values  | `env.view(agent)`: `SellerView` / `BuyerView` for scripted agents |

## Turn order
Every buyer opens with a [BUY] (``buyer_1`` first). Then the seller acts; after a [SELL] the
targeted buyer replies; each exchange costs one of T and one of that buyer's K. The episode ends
on a seller [QUIT], when no channel is active, when T is spent, on a seller violation (or a
penalised buyer violation), or when the stock is sold out: with one product and one unit, that
is the first deal; with several products or units the episode goes on after a deal, the buyer
who bought leaving the market.

## Observations
The seller sees every channel's Talk and Action plus the standing-offers board. A buyer sees only
the seller's Talk and Action addressed to it: never the seller's Thought or Target, the cost,
other buyers' budgets or messages. Another party's Talk is quoted so that none of its lines can
pass for a line of the environment (docs/protocol.md, "Quoting"). The text is rendered when
``observe`` is called, once per step; after the end every agent reads ``FINISHED_TEXT``.

An action that is not text (``None`` included), longer than the cap, or not a valid message is a
format violation with a reason (``not_text``, ``too_long``, ...), never an exception. An invalid
buyer reply is intercepted and the same buyer is asked again (``max_buyer_retries`` times, then
its channel closes as quit); in a market with ``penalize_buyer_violations`` the violation ends the
episode instead.

## Rewards
Terminal only. Seller: equation (1), ``min(1, (P - C)/(P_list - C))`` on a deal, 0 without one,
-1 on a violation. Buyer that closed: ``clip((P_list - P)/(P_list - C), 0, 1)``; other buyers 0;
a penalised buyer violation -1.

## Seeding
``reset(seed=s)`` plays scenario 0 of the list fixed by ``s``; ``options={"scenario": sc}`` plays
a given scenario (how tournaments keep comparisons paired).

## Version history
* v0: initial release (single- and multi-product markets).
* v1 (issue 12): actions capped at 32,768 characters (``too_long``); prices with non-ASCII
  digits, sub-cent precision or of a trillion dollars or more are refused; another party's Talk is
  quoted when it could be read as protocol (so LLM agents may see other text than under v0);
  ``step(None)`` is ``not_text``; observations after the end read ``FINISHED_TEXT``. Scripted
  agents play every scenario exactly as under v0. Stored v0 episodes keep their key and are rated
  as before, but a tournament resumed under v1 plays its episodes again.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv

from arena.catalog import Product, default_catalog
from arena.config import MarketConfig, get_preset
from arena.game import BuyerView, Market, SellerView
from arena.observations import MAX_OBSERVATION_CHARS, ObservationRenderer
from arena.protocol import MAX_MESSAGE_CHARS
from arena.records import ENV_VERSION, EpisodeResult
from arena.scenarios import Scenario, make_scenario
from arena.seats import buyer_seat

FINISHED_TEXT = "The negotiation is over."
"""Every agent's observation once the episode has ended (outcome and rewards are in infos)."""


class AnyText(spaces.Text):
    """A Text space that contains any string up to ``max_length`` (LLM replies are unicode)."""

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length


def env(**kwargs: Any) -> MarketEnv:
    """PettingZoo-style constructor."""
    return MarketEnv(**kwargs)


class MarketEnv(AECEnv):
    metadata: ClassVar[dict[str, Any]] = {
        "name": ENV_VERSION,
        "render_modes": ["human", "ansi"],
        "is_parallelizable": False,
    }

    def __init__(
        self,
        config: MarketConfig | None = None,
        catalog: Sequence[Product] | None = None,
        render_mode: str | None = None,
    ) -> None:
        super().__init__()
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}")
        self.config = config if config is not None else get_preset("in-distribution")
        self.catalog = list(catalog) if catalog is not None else default_catalog()
        self.render_mode = render_mode
        self.possible_agents = self.config.agents
        self.observation_spaces = {
            a: spaces.Dict({"text": AnyText(max_length=MAX_OBSERVATION_CHARS, min_length=0)})
            for a in self.possible_agents
        }
        charset = string.ascii_letters + string.digits + " $.:[]\n"
        self.action_spaces = {
            a: AnyText(max_length=MAX_MESSAGE_CHARS, min_length=0, charset=charset)
            for a in self.possible_agents
        }
        self._rng = np.random.default_rng()
        self.market: Market | None = None
        self._renderer = ObservationRenderer()
        self._view: SellerView | BuyerView | None = None
        self._text = ""
        self._view_of: tuple[str, int] | None = None
        self._text_of: tuple[str, int] | None = None
        """(agent, market step) of the kept view and text."""

    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
            for i, agent in enumerate(self.possible_agents):
                self.action_spaces[agent].seed(seed + i)
        scenario: Scenario | None = (options or {}).get("scenario")
        if scenario is None:
            list_seed = seed if seed is not None else int(self._rng.integers(2**31 - 1))
            scenario = make_scenario(self.config, self.catalog, list_seed, 0)
        self.market = Market(self.config, scenario)
        self._renderer = ObservationRenderer()
        self._view_of = self._text_of = None
        self.agents = self.possible_agents[:]
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos: dict[str, dict[str, Any]] = {a: {} for a in self.agents}
        self.agent_selection = self.market.current

    @property
    def scenario(self) -> Scenario:
        return self._market.scenario

    @property
    def _market(self) -> Market:
        if self.market is None:
            raise RuntimeError("call reset() before using the environment")
        return self.market

    def view(self, agent: str) -> SellerView | BuyerView:
        """The structured observation of ``agent`` (what scripted agents read).

        Built on demand and kept until the next step, so ``last()`` and the acting agent share it.
        """
        market = self._market
        if self._view_of != (agent, market.steps):
            self._view = market.view(agent)
            self._view_of = (agent, market.steps)
        return self._view  # type: ignore[return-value]

    def observe(self, agent: str) -> dict[str, str]:
        """The text an LLM reads, rendered only when asked for and once per step; after the end
        of the episode every agent reads :data:`FINISHED_TEXT`."""
        market = self._market
        if market.done:
            return {"text": FINISHED_TEXT}
        if self._text_of != (agent, market.steps):
            self._text = self._renderer.text(self.view(agent))
            self._text_of = (agent, market.steps)
        return {"text": self._text}

    def result(self) -> EpisodeResult:
        """Outcome and rewards of the finished episode."""
        return self._market.result()

    def step(self, action: str | None) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0.0
        market = self._market
        market.step(action)  # type: ignore[arg-type]  # a non-text action is a `not_text` violation
        if not market.done:
            # Rewards are terminal only: every reward stays 0 until the episode ends.
            self.agent_selection = market.current
        else:
            paid = market.settlement()
            self.rewards = {"seller": paid.seller_reward}
            for i, reward in enumerate(paid.buyer_rewards):
                self.rewards[buyer_seat(i)] = reward
            info = {
                "outcome": paid.outcome,
                "termination": market.termination,
                "violation": paid.violation,
            }
            for a in self.agents:
                self.terminations[a] = True
                self.infos[a] = dict(info)
            self.agent_selection = self.agents[0]
            self._accumulate_rewards()
        if self.render_mode == "human":
            self.render()

    def render(self) -> str | None:
        if self.render_mode is None:
            return None
        lines = []
        for turn in self._market.turns:
            mark = "" if turn.valid else f"  [rejected: {turn.reason}]"
            lines.append(f"{turn.agent} -> {turn.to}:{mark}\n{turn.text}\n")
        text = "\n".join(lines)
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def close(self) -> None:
        self.market = None
