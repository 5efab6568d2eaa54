"""Verifiable rewards (paper Section 3.2, equation (1)) against the paper's worked example.

The paper's product baby-products_17 lists at $34.99 with cost $18.75: a deal at $32.50 earns the
seller (32.50 - 18.75) / (34.99 - 18.75) = 0.847, a deal at $19.00 earns 0.015.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.catalog import Product
from arena.config import MarketConfig
from arena.game import Market
from arena.rewards import (
    NO_DEAL_REWARD,
    VIOLATION_REWARD,
    buyer_surplus_ratio,
    list_margin_capacity,
    seller_reward,
    seller_surplus_ratio,
)
from arena.scenarios import Scenario

LIST, COST = 34.99, 18.75


def test_paper_worked_example_deal_at_32_50_gives_0_847():
    assert round(seller_surplus_ratio(32.50, COST, LIST), 3) == 0.847


def test_paper_worked_example_deal_at_19_00_gives_0_015():
    assert round(seller_surplus_ratio(19.00, COST, LIST), 3) == 0.015


def test_deal_at_cost_gives_zero_and_at_or_above_list_gives_one():
    assert seller_surplus_ratio(COST, COST, LIST) == 0.0
    assert seller_surplus_ratio(LIST, COST, LIST) == 1.0
    assert seller_surplus_ratio(50.00, COST, LIST) == 1.0


def test_no_deal_and_violation_rewards_are_zero_and_minus_one():
    assert NO_DEAL_REWARD == 0.0
    assert VIOLATION_REWARD == -1.0
    assert seller_reward([], (LIST,), (COST,), (1,), 3) == 0.0


def test_buyer_reward_is_the_clipped_share_below_list():
    assert buyer_surplus_ratio(32.50, COST, LIST) == pytest.approx(2.49 / 16.24)
    assert buyer_surplus_ratio(COST, COST, LIST) == 1.0
    assert buyer_surplus_ratio(LIST, COST, LIST) == 0.0
    assert buyer_surplus_ratio(40.00, COST, LIST) == 0.0
    assert buyer_surplus_ratio(10.00, COST, LIST) == 1.0


@settings(max_examples=200, deadline=None)
@given(
    cost_cents=st.integers(0, 100_000),
    margin_cents=st.integers(1, 100_000),
    price_cents=st.integers(0, 300_000),
)
def test_rewards_stay_in_their_ranges_and_sum_to_one_between_cost_and_list(
    cost_cents: int, margin_cents: int, price_cents: int
):
    cost, list_price = cost_cents / 100, (cost_cents + margin_cents) / 100
    price = max(price_cents / 100, cost)
    seller = seller_surplus_ratio(price, cost, list_price)
    buyer = buyer_surplus_ratio(price, cost, list_price)
    assert 0.0 <= seller <= 1.0 and 0.0 <= buyer <= 1.0
    if price <= list_price:
        assert seller + buyer == pytest.approx(1.0)


def test_single_product_seller_reward_is_equation_one():
    assert seller_reward([(0, 32.50)], (LIST,), (COST,), (1,), 3) == pytest.approx(13.75 / 16.24)


def test_list_margin_capacity_takes_the_most_profitable_units_one_per_buyer():
    assert list_margin_capacity((LIST,), (COST,), (1,), 3) == pytest.approx(16.24)
    assert list_margin_capacity((40.0, 60.0), (20.0, 30.0), (2, 1), 2) == pytest.approx(50.0)
    assert list_margin_capacity((40.0, 60.0), (20.0, 30.0), (2, 1), 5) == pytest.approx(70.0)


def test_multi_product_seller_reward_is_profit_over_capacity_capped_at_one():
    lists, costs = (40.0, 60.0), (20.0, 30.0)
    assert seller_reward([(0, 25.0), (1, 40.0)], lists, costs, (1, 1), 2) == pytest.approx(0.3)
    assert seller_reward([(0, 99.0), (1, 99.0)], lists, costs, (1, 1), 2) == 1.0


def _market() -> Market:
    product = Product("baby-products_17", "baby-products", "Monitor", "", "", LIST, COST)
    scenario = Scenario(
        seed=0,
        index=0,
        products=(product,),
        stock=(1,),
        valuations=((27.83,), (41.17,), (52.61,)),
        tiers=None,
        first_offers=(None, None, None),
        opening_products=(0, 0, 0),
        slot_draws=(0.1, 0.5, 0.9),
        episode_seed=1,
    )
    market = Market(MarketConfig(budget_mode="uniform"), scenario)
    for price in ("$9.95", "$10.45", "$9.28"):
        market.step(f"Thought: t\nTalk: hi\nAction: [BUY] {price}")
    return market


@pytest.mark.parametrize(("bid", "reward"), [("32.50", 0.847), ("19.00", 0.015)])
def test_market_pays_the_worked_example_on_a_seller_deal(bid: str, reward: float):
    market = _market()
    market.step("Thought: t\nTarget: 3\nTalk: list\nAction: [SELL] $34.99")
    market.step(f"Thought: t\nTalk: ok\nAction: [BUY] ${bid}")
    market.step(f"Thought: t\nTarget: 3\nTalk: deal\nAction: [DEAL] ${bid}")
    result = market.result()
    assert round(result.seller_reward, 3) == reward
    assert result.buyer_rewards[2] == pytest.approx((LIST - float(bid)) / (LIST - COST))


def test_market_pays_the_worked_example_on_a_buyer_deal():
    market = _market()
    market.step("Thought: t\nTarget: 2\nTalk: final\nAction: [SELL] $32.50")
    market.step("Thought: t\nTalk: fine\nAction: [DEAL]")
    assert round(market.result().seller_reward, 3) == 0.847


def test_market_pays_minus_one_for_a_below_cost_offer():
    market = _market()
    market.step("Thought: t\nTarget: 2\nTalk: cheap\nAction: [SELL] $18.74")
    result = market.result()
    assert result.seller_reward == VIOLATION_REWARD
    assert result.buyer_rewards == (0.0, 0.0, 0.0)
