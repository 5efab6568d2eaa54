"""What an episode leaves behind: plain frozen records, enough to recompute every metric.

:class:`EpisodeResult` is produced by the game core; :class:`EpisodeRecord` adds who played and
on which scenario (built in one place, :meth:`EpisodeRecord.create`). Both convert to and from
JSON-ready dicts for the results store. :class:`EpisodeKey` names an episode: the store, the
tournament runner, the leaderboards and the leagues all identify episodes by it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, NamedTuple

from arena.catalog import Product
from arena.config import MarketConfig
from arena.rewards import DEFAULT_REWARDS, Rewards
from arena.scenarios import Scenario

ENV_VERSION = "bargain_market_v1"


@dataclass(frozen=True)
class Event:
    """One public move on a channel: what the board shows (never a Thought)."""

    turn: int
    """Seller turn during which it happened; 0 for the buyers' openings."""
    speaker: str
    """"seller" or "buyer"."""
    kind: str
    price: float | None
    product: int | None
    talk: str


@dataclass(frozen=True)
class TurnRecord:
    """One message as sent, valid or not; invalid buyer attempts are kept too."""

    index: int
    agent: str
    to: str
    text: str
    kind: str | None
    price: float | None
    product: int | None
    valid: bool
    reason: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0


@dataclass(frozen=True)
class Deal:
    buyer: int
    product: int
    price: float
    closed_by: str
    """"seller" ([DEAL] on a standing bid) or "buyer" ([DEAL] on the seller's [SELL])."""
    turn: int


@dataclass(frozen=True)
class EpisodeResult:
    """The outcome of one episode as the game core saw it."""

    outcome: str
    """"deal", "no_deal", "violation" or "error"."""
    termination: str
    """"deal", "seller_quit", "market_exhausted", "turn_limit", "seller_violation",
    "buyer_violation" or "error"."""
    violation: str | None
    violation_reason: str | None
    violation_by: str | None
    deals: tuple[Deal, ...]
    seller_reward: float
    buyer_rewards: tuple[float, ...]
    seller_turns: int
    messages_per_buyer: tuple[int, ...]
    engaged: tuple[bool, ...]
    first_bids: tuple[float | None, ...]
    buyer_resamples: tuple[int, ...]
    buyer_failures: tuple[bool, ...]
    statuses: tuple[str, ...]
    turns: tuple[TurnRecord, ...] = ()
    error: str | None = None

    @property
    def deal(self) -> Deal | None:
        """The first deal (the only one in single-product markets)."""
        return self.deals[0] if self.deals else None


class EpisodeKey(NamedTuple):
    """What makes two episodes the same match: the same players on the same scenario of the same
    environment and market preset, under the same rewards. A tournament stores each key once."""

    env_version: str
    preset: str
    seller: str
    buyers: tuple[str, ...]
    """The buyer spec of every slot (the lineup)."""
    scenario_seed: int
    scenario_index: int
    rewards: Rewards
    """The reward names the episode was played under (episodes under others are never pooled)."""

    @classmethod
    def of(
        cls, market: MarketConfig, seller: str, buyers: tuple[str, ...], scenario: Scenario
    ) -> EpisodeKey:
        """The key of ``seller`` against ``buyers`` on ``scenario`` of ``market`` (its preset
        name and rewards) in this environment version."""
        return cls(
            ENV_VERSION,
            market.name,
            seller,
            tuple(buyers),
            scenario.seed,
            scenario.index,
            market.rewards,
        )


@dataclass(frozen=True)
class EpisodeRecord:
    """One stored episode: environment version, market, scenario, players, result, rewards."""

    env_version: str
    preset: str
    scenario: Scenario
    seller: str
    buyers: tuple[str, ...]
    result: EpisodeResult
    rewards: Rewards = DEFAULT_REWARDS
    """The reward names it was played under (``MarketConfig.rewards``); records stored before
    rewards were a setting read back as the defaults."""

    @classmethod
    def create(
        cls,
        preset: str,
        scenario: Scenario,
        seller: str,
        buyers: tuple[str, ...],
        result: EpisodeResult,
        env_version: str = ENV_VERSION,
        rewards: Rewards = DEFAULT_REWARDS,
    ) -> EpisodeRecord:
        """The one constructor of records: an episode just played (or read back from storage)."""
        return cls(env_version, preset, scenario, seller, tuple(buyers), result, Rewards(*rewards))

    @property
    def key(self) -> EpisodeKey:
        sc = self.scenario
        return EpisodeKey(
            self.env_version,
            self.preset,
            self.seller,
            self.buyers,
            sc.seed,
            sc.index,
            self.rewards,
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @staticmethod
    def from_dict(data: dict[str, Any]) -> EpisodeRecord:
        sc = dict(data["scenario"])
        sc["products"] = tuple(Product(**p) for p in sc["products"])
        for key in ("stock", "first_offers", "opening_products", "slot_draws"):
            sc[key] = tuple(sc[key])
        sc["valuations"] = tuple(tuple(v) for v in sc["valuations"])
        sc["tiers"] = None if sc["tiers"] is None else tuple(sc["tiers"])
        res = dict(data["result"])
        res["deals"] = tuple(Deal(**d) for d in res["deals"])
        res["turns"] = tuple(TurnRecord(**t) for t in res.get("turns", ()))
        for key in (
            "buyer_rewards",
            "messages_per_buyer",
            "engaged",
            "first_bids",
            "buyer_resamples",
            "buyer_failures",
            "statuses",
        ):
            res[key] = tuple(res[key])
        return EpisodeRecord.create(
            data["preset"],
            Scenario(**sc),
            data["seller"],
            tuple(data["buyers"]),
            EpisodeResult(**res),
            env_version=data["env_version"],
            rewards=Rewards(*data.get("rewards", DEFAULT_REWARDS)),
        )
