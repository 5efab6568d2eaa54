"""Hand-made episode records shared by the leaderboard and comparison tests."""

from __future__ import annotations

import dataclasses

from agents.engine import play_vs_pool
from arena.catalog import default_catalog
from arena.config import get_preset
from arena.records import EpisodeRecord
from arena.scenarios import Scenario, make_scenarios
from tournaments.comparisons import Comparison

TIME = "scripted:time"
TFT = "scripted:tit-for-tat"
ENTRIES = [(TIME,), (TIME, TFT)]
POOL = f"{TIME}|{TFT}"


def hand_made_base() -> tuple[list[Scenario], EpisodeRecord]:
    """Two scenarios and one scripted episode on the first, to edit into hand-made cases."""
    config = get_preset("in-distribution")
    scenarios = make_scenarios(config, default_catalog(), 7, 2)
    record = play_vs_pool(config, scenarios[:1], "scripted:prober", [TIME], keep_turns=False)[0][0]
    return scenarios, record


def made(
    base: tuple[list[Scenario], EpisodeRecord],
    seller: str,
    scenario: int,
    seller_reward: float = 0.0,
    buyers: tuple[str, ...] = (TIME, TIME, TIME),
    buyer_rewards: tuple[float, ...] = (0.0, 0.0, 0.0),
    **result: object,
) -> EpisodeRecord:
    scenarios, record = base
    res = dataclasses.replace(
        record.result, seller_reward=seller_reward, buyer_rewards=buyer_rewards, **result
    )
    return dataclasses.replace(
        record, seller=seller, buyers=buyers, scenario=scenarios[scenario], result=res
    )


def triples(comps: list[Comparison]) -> list[tuple[str, str, float]]:
    return [(c.a, c.b, c.score) for c in comps]
