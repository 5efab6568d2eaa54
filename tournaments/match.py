"""The match runner: play scripted (or any immediate) agents on scenarios, one screen of code.

LLM agents go through the batched rollout engine (:mod:`agents.engine`), which drives the same
game core; this runner is the fast path for agents that answer at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from agents import make_agent
from agents.base import EpisodeContext, agent_seed
from arena.config import MarketConfig
from arena.game import Market
from arena.records import ENV_VERSION, EpisodeRecord
from arena.scenarios import Scenario


def buyer_lineup(scenario: Scenario, pool: Sequence[str]) -> tuple[str, ...]:
    """The buyer spec of every slot: each slot draws from the pool with the scenario's draws."""
    return tuple(pool[scenario.pool_index(i, len(pool))] for i in range(scenario.num_buyers))


def play_episode(
    config: MarketConfig, scenario: Scenario, seller, buyers: Sequence, keep_turns: bool = True
) -> EpisodeRecord:
    """One episode between ready-built agents; each is reset with its own seed first."""
    market = Market(config, scenario, keep_turns=keep_turns)
    agents = [seller, *buyers]
    for slot, agent in enumerate(agents):
        role = "seller" if slot == 0 else f"buyer_{slot}"
        agent.reset(EpisodeContext(role, slot, config, scenario, agent_seed(scenario, slot)))
    while not market.done:
        if market.current == "seller":
            market.step(seller.act(market.seller_view()))
        else:
            market.step(buyers[market.buyer].act(market.buyer_view(market.buyer)))
    return EpisodeRecord(
        env_version=ENV_VERSION,
        preset=config.name,
        scenario=scenario,
        seller=seller.spec,
        buyers=tuple(b.spec for b in buyers),
        result=market.result(),
    )


class AgentCache:
    """One built agent per (spec, slot): agents are reset every episode, so reuse is safe."""

    def __init__(self) -> None:
        self._agents: dict[tuple[str, str, int], object] = {}

    def get(self, spec: str, role: str, slot: int):
        key = (spec, role, slot)
        if key not in self._agents:
            self._agents[key] = make_agent(spec, role)
        return self._agents[key]


def play_many(
    config: MarketConfig,
    scenarios: Iterable[Scenario],
    seller: str,
    buyer_pool: Sequence[str],
    keep_turns: bool = True,
    on_episode: Callable[[EpisodeRecord], None] | None = None,
) -> list[EpisodeRecord]:
    """Play ``seller`` against buyers drawn from ``buyer_pool`` on every scenario, in order."""
    cache = AgentCache()
    records = []
    for scenario in scenarios:
        lineup = buyer_lineup(scenario, buyer_pool)
        buyers = [cache.get(spec, "buyer", i) for i, spec in enumerate(lineup)]
        record = play_episode(config, scenario, cache.get(seller, "seller", 0), buyers, keep_turns)
        records.append(record)
        if on_episode is not None:
            on_episode(record)
    return records
