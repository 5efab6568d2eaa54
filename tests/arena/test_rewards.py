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
    BUYER_REWARDS,
    DEFAULT_REWARDS,
    NO_DEAL_REWARD,
    SELLER_REWARDS,
    VIOLATION_REWARD,
    RewardInput,
    Trade,
    buyer_budget_share,
    buyer_budget_surplus,
    buyer_reservation_share,
    buyer_reservation_surplus,
    buyer_surplus_extraction,
    buyer_surplus_ratio,
    list_margin_capacity,
    reward_input,
    seller_surplus_extraction,
    seller_surplus_ratio,
)
from arena.scenarios import Scenario

LIST, COST = 34.99, 18.75


def _input(
    deals: list[tuple[int, float]],
    lists: tuple[float, ...] = (LIST,),
    costs: tuple[float, ...] = (COST,),
    stock: tuple[int, ...] = (1,),
    num_buyers: int = 3,
    budget: float = 40.0,
) -> RewardInput:
    """Deals as (product, price), buyer k closing the k-th; every budget ``budget``."""
    trades = tuple(
        Trade(k, product, price, costs[product], lists[product], budget)
        for k, (product, price) in enumerate(deals)
    )
    budgets = ((budget,) * len(lists),) * num_buyers
    return RewardInput(trades, lists, costs, stock, budgets)


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
    assert seller_surplus_extraction(_input([])) == 0.0
    assert buyer_surplus_extraction(_input([]), 0) == 0.0
    assert buyer_budget_surplus(_input([]), 0) == 0.0


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
    reward = seller_surplus_extraction(_input([(0, 32.50)]))
    assert reward == pytest.approx(13.75 / 16.24)


def test_list_margin_capacity_takes_the_most_profitable_units_one_per_buyer():
    assert list_margin_capacity((LIST,), (COST,), (1,), 3) == pytest.approx(16.24)
    assert list_margin_capacity((40.0, 60.0), (20.0, 30.0), (2, 1), 2) == pytest.approx(50.0)
    assert list_margin_capacity((40.0, 60.0), (20.0, 30.0), (2, 1), 5) == pytest.approx(70.0)


def test_multi_product_seller_reward_is_profit_over_capacity_capped_at_one():
    lists, costs = (40.0, 60.0), (20.0, 30.0)
    two = _input([(0, 25.0), (1, 40.0)], lists, costs, (1, 1), 2)
    assert seller_surplus_extraction(two) == pytest.approx(0.3)
    high = _input([(0, 99.0), (1, 99.0)], lists, costs, (1, 1), 2)
    assert seller_surplus_extraction(high) == 1.0


def _market(config: MarketConfig = MarketConfig(budget_mode="uniform")) -> Market:
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
    market = Market(config, scenario)
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


# The budget-based buyer reward (docs/metrics.md) ----------------------------------------------

BUDGET = 40.00  # above list: the buyer Table 12's reward leaves flat at list


def test_budget_surplus_is_the_buyers_share_of_the_gains_from_trade():
    assert buyer_budget_share(COST, COST, BUDGET) == 1.0
    assert buyer_budget_share(BUDGET, COST, BUDGET) == 0.0
    assert buyer_budget_share(30.00, COST, BUDGET) == pytest.approx(10.00 / 21.25)


def test_a_deal_at_list_pays_a_buyer_with_budget_above_list_under_budget_surplus_only():
    deal_at_list = _input([(0, LIST)], budget=BUDGET)
    assert buyer_surplus_extraction(deal_at_list, 0) == 0.0
    assert buyer_budget_surplus(deal_at_list, 0) == pytest.approx((BUDGET - LIST) / (BUDGET - COST))
    assert buyer_budget_surplus(deal_at_list, 0) > 0.2


def test_paying_above_budget_is_minus_one_and_a_budget_at_or_below_cost_pays_zero():
    assert buyer_budget_share(40.01, COST, BUDGET) == VIOLATION_REWARD
    assert buyer_budget_share(40.004, COST, BUDGET) == 0.0  # the same price in cents
    assert buyer_budget_share(COST, COST, COST) == 0.0
    assert buyer_budget_share(15.00, COST, 15.00) == 0.0


def test_budget_surplus_pays_only_the_buyer_who_dealt():
    read = _input([(0, 30.00)], budget=BUDGET)
    assert buyer_budget_surplus(read, 0) == pytest.approx(10.00 / 21.25)
    assert buyer_budget_surplus(read, 1) == buyer_budget_surplus(read, 2) == 0.0


@settings(max_examples=300, deadline=None)
@given(
    cost_cents=st.integers(0, 100_000),
    budget_cents=st.integers(0, 200_000),
    price_cents=st.integers(0, 300_000),
)
def test_budget_surplus_stays_in_its_range_falls_with_price_and_complements_the_seller_share(
    cost_cents: int, budget_cents: int, price_cents: int
):
    cost, budget, price = cost_cents / 100, budget_cents / 100, price_cents / 100
    reward = buyer_budget_share(price, cost, budget)
    assert reward == VIOLATION_REWARD or 0.0 <= reward <= 1.0
    assert (reward == VIOLATION_REWARD) == (price_cents > budget_cents)
    assert buyer_budget_share(price + 0.01, cost, budget) <= reward
    if cost_cents <= price_cents <= budget_cents and cost_cents < budget_cents:
        seller_share = (price - cost) / (budget - cost)  # docs/metrics.md, the cross score
        assert reward + seller_share == pytest.approx(1.0)


# The reservation buyer reward: the budget capped at list (docs/metrics.md) --------------------


def test_reservation_surplus_pays_nothing_for_a_deal_at_list_where_budget_surplus_pays():
    deal_at_list = _input([(0, LIST)], budget=BUDGET)
    assert buyer_budget_surplus(deal_at_list, 0) > 0.2
    assert buyer_reservation_surplus(deal_at_list, 0) == 0.0
    below_list = _input([(0, 30.00)], budget=BUDGET)
    assert buyer_reservation_surplus(below_list, 0) == pytest.approx((LIST - 30.00) / (LIST - COST))
    assert buyer_reservation_surplus(below_list, 1) == 0.0
    assert buyer_reservation_surplus(_input([]), 0) == 0.0


def test_reservation_surplus_is_budget_surplus_for_a_buyer_whose_budget_is_below_list():
    for price in (COST, 22.00, 30.00, 31.99):
        assert buyer_reservation_share(price, COST, LIST, 32.00) == buyer_budget_share(
            price, COST, 32.00
        )
    assert buyer_reservation_share(32.01, COST, LIST, 32.00) == VIOLATION_REWARD
    assert buyer_reservation_share(COST, COST, LIST, 15.00) == VIOLATION_REWARD  # above budget
    assert buyer_reservation_share(15.00, COST, LIST, 15.00) == 0.0  # no gains from trade


def test_reservation_surplus_is_zero_between_list_and_a_budget_above_it_and_minus_one_above():
    assert buyer_reservation_share(37.00, COST, LIST, BUDGET) == 0.0
    assert buyer_reservation_share(BUDGET + 0.01, COST, LIST, BUDGET) == VIOLATION_REWARD


@settings(max_examples=300, deadline=None)
@given(
    cost_cents=st.integers(0, 100_000),
    list_cents=st.integers(0, 200_000),
    budget_cents=st.integers(0, 200_000),
    price_cents=st.integers(0, 300_000),
)
def test_reservation_surplus_stays_in_range_falls_with_price_and_never_exceeds_budget_surplus(
    cost_cents: int, list_cents: int, budget_cents: int, price_cents: int
):
    cost, list_price = cost_cents / 100, list_cents / 100
    budget, price = budget_cents / 100, price_cents / 100
    reward = buyer_reservation_share(price, cost, list_price, budget)
    assert reward == VIOLATION_REWARD or 0.0 <= reward <= 1.0
    assert (reward == VIOLATION_REWARD) == (price_cents > budget_cents)
    assert buyer_reservation_share(price + 0.01, cost, list_price, budget) <= reward
    assert reward <= buyer_budget_share(price, cost, budget) + 1e-12
    if price_cents >= list_cents and price_cents <= budget_cents:
        assert reward == 0.0


# The registry and the typed reward input ------------------------------------------------------


def test_the_defaults_are_the_first_registered_rewards_and_the_market_defaults():
    assert (next(iter(SELLER_REWARDS)), next(iter(BUYER_REWARDS))) == DEFAULT_REWARDS
    assert MarketConfig().rewards == DEFAULT_REWARDS
    assert BUYER_REWARDS[DEFAULT_REWARDS.buyer] is buyer_surplus_extraction
    assert SELLER_REWARDS[DEFAULT_REWARDS.seller] is seller_surplus_extraction


def test_a_market_accepts_every_registered_reward_and_refuses_an_unknown_one_naming_the_choices():
    for name in BUYER_REWARDS:
        assert MarketConfig(buyer_reward=name).rewards.buyer == name
    with pytest.raises(ValueError, match=r"buyer_reward must name .* surplus_extraction, budget"):
        MarketConfig(buyer_reward="budget")
    with pytest.raises(ValueError, match=r"seller_reward must name .* surplus_extraction"):
        MarketConfig(seller_reward="profit")


def test_reward_input_reads_each_deals_cost_list_price_and_the_dealt_buyers_budget():
    market = _market()
    market.step("Thought: t\nTarget: 2\nTalk: final\nAction: [SELL] $32.50")
    market.step("Thought: t\nTalk: fine\nAction: [DEAL]")
    read = reward_input(market.scenario, market.deals)
    assert read.trades == (Trade(1, 0, 32.50, COST, LIST, 41.17),)
    assert read.trade_of(1) == read.trades[0] and read.trade_of(0) is None
    assert read.num_buyers == 3


@pytest.mark.parametrize(
    ("buyer_reward", "paid"),
    [
        ("surplus_extraction", 0.0),
        ("budget_surplus", (52.61 - LIST) / (52.61 - COST)),
        ("reservation_surplus", 0.0),
    ],
)
def test_the_markets_buyer_reward_setting_decides_what_a_deal_at_list_pays(
    buyer_reward: str, paid: float
):
    market = _market(MarketConfig(budget_mode="uniform", buyer_reward=buyer_reward))
    market.step("Thought: t\nTarget: 3\nTalk: list\nAction: [SELL] $34.99")
    market.step("Thought: t\nTalk: fine\nAction: [DEAL]")
    result = market.result()
    assert result.buyer_rewards == pytest.approx((0.0, 0.0, paid))
    assert result.seller_reward == 1.0  # the seller's reward is its own setting
