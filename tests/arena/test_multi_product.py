"""Multi-product markets: unit demand, stock, product violations, sealed channels, agents."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from agents.engine import play_vs_pool
from arena.catalog import Product, default_catalog
from arena.config import get_preset
from arena.game import Market
from arena.metrics import summarize
from arena.observations import buyer_text, seller_text
from arena.protocol import BuyerMessage, Kind, SellerMessage, render_buyer, render_seller
from arena.rules import Status
from arena.scenarios import Scenario, make_scenario, make_scenarios

CONFIG = dataclasses.replace(
    get_preset("multi-product"),
    num_buyers=3,
    num_products=2,
    total_turns=8,
    regulate_first_offer=False,
)


def product(pid: str, list_price: float, cost: float) -> Product:
    return Product(pid, "toys", f"Toy {pid}", "A toy.", "Fun.", list_price, cost)


def scenario(stock=(1, 1)) -> Scenario:
    return Scenario(
        seed=0,
        index=0,
        products=(product("a", 100.0, 50.0), product("b", 40.0, 20.0)),
        stock=stock,
        valuations=((90.13, 35.17), (80.29, 39.41), (60.37, 30.53)),
        tiers=None,
        first_offers=(None, None, None),
        opening_products=(0, 1, 0),
        slot_draws=(0.1, 0.5, 0.9),
        episode_seed=1,
    )


def seller(target: int, kind: Kind, price: float | None, product: int | None) -> str:
    return render_seller(
        SellerMessage(
            "secret-plan-XYZ",
            target - 1,
            "offer",
            kind,
            price,
            None if product is None else product - 1,
        )
    )


def buyer(kind: Kind, price: float | None, product: int | None, talk: str = "hi") -> str:
    return render_buyer(
        BuyerMessage("my-thought-QRS", talk, kind, price, None if product is None else product - 1)
    )


def opened(stock=(1, 1)) -> Market:
    market = Market(CONFIG, scenario(stock))
    market.step(buyer(Kind.BUY, 30.0, 1))
    market.step(buyer(Kind.BUY, 15.0, 2))
    market.step(buyer(Kind.BUY, 25.0, 1))
    assert market.current == "seller"
    return market


def test_a_buyer_that_closes_leaves_the_market_and_the_episode_goes_on() -> None:
    market = opened()
    market.step(seller(1, Kind.SELL, 85.0, 1))
    market.step(buyer(Kind.DEAL, None, 1))
    assert market.channels[0].status is Status.CLOSED
    assert market.stock == [0, 1]
    assert not market.done and market.current == "seller"
    market.step(seller(1, Kind.SELL, 30.0, 2))
    result = market.result() if market.done else None
    assert result is not None and result.violation == "inactive_target"


def test_selling_the_last_unit_of_every_product_ends_the_episode_with_two_deals() -> None:
    market = opened()
    market.step(seller(1, Kind.SELL, 85.0, 1))
    market.step(buyer(Kind.DEAL, None, 1))
    market.step(seller(2, Kind.SELL, 36.0, 2))
    market.step(buyer(Kind.DEAL, None, 2))
    assert market.done
    result = market.result()
    assert result.termination == "deal" and result.outcome == "deal"
    assert [(d.buyer, d.product, d.price) for d in result.deals] == [(0, 0, 85.0), (1, 1, 36.0)]
    # Seller reward: profit over selling both products at list (50 + 20), capped at 1.
    assert result.seller_reward == pytest.approx(((85 - 50) + (36 - 20)) / 70)
    assert result.buyer_rewards[0] == pytest.approx((100 - 85) / 50)
    assert result.buyer_rewards[1] == pytest.approx((40 - 36) / 20)
    assert result.buyer_rewards[2] == 0.0


def test_offering_a_sold_out_product_is_a_violation() -> None:
    market = opened()
    market.step(seller(1, Kind.SELL, 85.0, 1))
    market.step(buyer(Kind.DEAL, None, 1))
    market.step(seller(3, Kind.SELL, 60.0, 1))
    result = market.result()
    assert result.violation == "sold_out" and result.seller_reward == -1.0


def test_product_out_of_range_and_missing_product_are_seller_violations() -> None:
    market = opened()
    market.step(seller(1, Kind.SELL, 85.0, 3))
    assert market.result().violation == "bad_product"
    market = opened()
    market.step(seller(1, Kind.SELL, 85.0, None))
    assert market.result().violation == "format"
    assert market.result().violation_reason == "missing_product"


def test_selling_any_product_below_its_own_cost_is_a_violation() -> None:
    market = opened()
    market.step(seller(2, Kind.SELL, 45.0, 1))  # above product 2's cost, below product 1's
    assert market.result().violation == "below_cost"


def test_buyer_bid_on_a_sold_out_product_or_without_product_is_resampled() -> None:
    market = opened()
    market.step(seller(1, Kind.SELL, 85.0, 1))
    market.step(buyer(Kind.DEAL, None, 1))
    market.step(seller(3, Kind.SELL, 28.0, 2))
    market.step(buyer(Kind.BUY, 20.0, 1))  # product 1 is sold out
    assert market.current == "buyer_3" and market.channels[2].resamples == 1
    market.step(buyer(Kind.BUY, 20.0, None))  # no Product field
    assert market.channels[2].resamples == 2
    market.step(buyer(Kind.BUY, 20.0, 2))
    assert market.current == "seller"
    assert market.channels[2].bids[1] == 20.0


def test_stock_above_one_lets_two_buyers_take_the_same_product() -> None:
    market = opened(stock=(2, 1))
    market.step(seller(1, Kind.SELL, 85.0, 1))
    market.step(buyer(Kind.DEAL, None, 1))
    market.step(seller(3, Kind.SELL, 55.0, 1))
    market.step(buyer(Kind.DEAL, None, 1))
    assert market.stock == [0, 1] and not market.done


def test_sealed_channels_keep_thoughts_costs_and_other_budgets_from_buyers() -> None:
    market = opened()
    market.step(seller(1, Kind.SELL, 85.0, 1))
    market.step(buyer(Kind.BUY, 60.0, 1, talk="PLANTED-BUYER1-SECRET"))
    for i in range(3):
        text = buyer_text(market.buyer_view(i))
        for secret in ("secret-plan-XYZ", "my-thought-QRS", "50.00", "20.00"):
            assert secret not in text
        if i != 0:
            assert "PLANTED-BUYER1-SECRET" not in text and "85.00" not in text
        for j, values in enumerate(market.scenario.valuations):
            if j != i:
                assert all(f"{v:.2f}" not in text for v in values)
    seller_obs = seller_text(market.seller_view())
    assert "my-thought-QRS" not in seller_obs and "PLANTED-BUYER1-SECRET" in seller_obs
    for values in market.scenario.valuations:
        assert all(f"{v:.2f}" not in seller_obs for v in values)


def test_scenario_products_are_distinct_substitutes_from_one_category() -> None:
    config = get_preset("multi-product")
    for index in range(20):
        sc = make_scenario(config, default_catalog(), 5, index)
        assert len({p.id for p in sc.products}) == config.num_products
        assert len({p.category for p in sc.products}) == 1


def test_valuation_correlation_one_makes_every_buyer_rank_products_alike() -> None:
    aligned = get_preset("multi-product-aligned")
    independent = get_preset("multi-product-independent")
    disagreements = {"aligned": 0, "independent": 0}
    for name, config in (("aligned", aligned), ("independent", independent)):
        for index in range(40):
            sc = make_scenario(config, default_catalog(), 1, index)
            lists = np.array(sc.list_prices)
            orders = {tuple(np.argsort(np.array(v) / lists)) for v in sc.valuations}
            disagreements[name] += len(orders) > 1
    assert disagreements["aligned"] == 0
    assert disagreements["independent"] > 20


@pytest.mark.parametrize(
    "preset",
    [
        "multi-product-2x6",
        "multi-product-5x3",
        "multi-product-low-price",
        "multi-product-high-price",
    ],
)
def test_every_generalisation_preset_plays_without_violations(preset: str) -> None:
    config = get_preset(preset)
    records = play_vs_pool(
        config,
        make_scenarios(config, default_catalog(), 0, 24),
        "scripted:prober",
        ["scripted:time"],
    )[0]
    assert all(r.result.outcome != "violation" for r in records)
    assert sum(len(r.result.deals) for r in records) > 24


def test_oracle_is_optimal_and_prober_beats_greedy_on_the_default_preset() -> None:
    config = get_preset("multi-product")
    scenarios = make_scenarios(config, default_catalog(), 0, 256)
    results = {
        name: summarize(play_vs_pool(config, scenarios, f"scripted:{name}", ["scripted:time"])[0])
        for name in ("greedy", "prober", "oracle")
    }
    assert results["oracle"]["matching_quality"]["mean"] == pytest.approx(1.0, abs=1e-9)
    assert results["oracle"]["optimal_pair_share"]["mean"] == pytest.approx(1.0, abs=1e-9)
    for key in ("reward", "matching_quality"):
        assert results["prober"][key]["mean"] > results["greedy"][key]["mean"]
    assert results["prober"]["deals_per_episode"]["mean"] > 1.5
