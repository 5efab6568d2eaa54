"""Hand-built and scripted episode records shared by the metric tests."""

from __future__ import annotations

from agents.engine import play_vs_pool
from arena.catalog import Product, default_catalog
from arena.config import get_preset
from arena.records import Deal, EpisodeRecord, EpisodeResult
from arena.rewards import (
    BUYER_REWARDS,
    DEFAULT_REWARDS,
    SELLER_REWARDS,
    VIOLATION_REWARD,
    Rewards,
    reward_input,
)
from arena.scenarios import Scenario, make_scenarios

LIST, COST = 34.99, 18.75  # baby-products_17, paper Section 4.4


def product(list_price: float = LIST, cost: float = COST, pid: str = "p0") -> Product:
    return Product(pid, "baby", "Thing", "A thing", "nice", list_price, cost)


def record(
    budgets: tuple[float, ...] = (30.0, 38.37, 25.0),
    *,
    deal: tuple[int, float] | None = None,
    outcome: str | None = None,
    violation: str | None = None,
    first_bids: tuple[float | None, ...] | None = None,
    engaged: tuple[bool, ...] | None = None,
    buyers: tuple[str, ...] | None = None,
    resamples: tuple[int, ...] | None = None,
    rewards: Rewards = DEFAULT_REWARDS,
) -> EpisodeRecord:
    """A hand-built single-product episode, paid by the named ``rewards`` of arena/rewards.py
    (the functions the market calls), so a changed reward changes these records too."""
    n = len(budgets)
    deals = (Deal(deal[0], 0, deal[1], "seller", 3),) if deal else ()
    if outcome is None:
        outcome = "violation" if violation else ("deal" if deal else "no_deal")
    scenario = Scenario(
        seed=0,
        index=0,
        products=(product(),),
        stock=(1,),
        valuations=tuple((b,) for b in budgets),
        tiers=None,
        first_offers=(None,) * n,
        opening_products=(0,) * n,
        slot_draws=(0.0,) * n,
        episode_seed=1,
    )
    read = reward_input(scenario, deals)
    if outcome == "violation":
        seller = VIOLATION_REWARD
    elif outcome == "error":
        seller = 0.0
    else:
        seller = SELLER_REWARDS[rewards.seller](read)
    buyer_rewards = [0.0] * n
    if outcome == "deal":
        buyer_rewards = [BUYER_REWARDS[rewards.buyer](read, i) for i in range(n)]
    result = EpisodeResult(
        outcome=outcome,
        termination={"deal": "deal", "no_deal": "turn_limit", "error": "error"}.get(
            outcome, "seller_violation"
        ),
        violation=violation,
        violation_reason=None,
        violation_by="seller" if violation else None,
        deals=deals,
        seller_reward=seller,
        buyer_rewards=tuple(buyer_rewards),
        seller_turns=3,
        messages_per_buyer=(1,) * n,
        engaged=engaged if engaged is not None else (True,) * n,
        first_bids=first_bids if first_bids is not None else (9.0,) * n,
        buyer_resamples=resamples if resamples is not None else (0,) * n,
        buyer_failures=(False,) * n,
        statuses=("active",) * n,
    )
    lineup = buyers if buyers is not None else ("scripted:time",) * n
    return EpisodeRecord.create(
        "in-distribution", scenario, "scripted:prober", lineup, result, rewards=rewards
    )


def scripted_records(preset: str, count: int, seed: int = 11) -> list[EpisodeRecord]:
    config = get_preset(preset)
    scenarios = make_scenarios(config, default_catalog(), seed, count)
    return play_vs_pool(config, scenarios, "scripted:prober", ["scripted:time"], keep_turns=False)[
        0
    ]
