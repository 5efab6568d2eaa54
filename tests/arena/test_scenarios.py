"""Scenarios: fixed by (seed, index), independent of list length and players (Sections 3.1, 3.3)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from agents.engine import play_vs_pool
from arena.catalog import Product, default_catalog, load_catalog
from arena.config import PAPER_TIERS, MarketConfig, get_preset
from arena.money import cents
from arena.scenarios import make_scenario, make_scenarios

CATALOG = default_catalog()
HALF_CENT = 0.005 + 1e-9


def test_cents_rounds_to_integer_cents():
    assert cents(32.5) == 3250
    assert cents(0.1 + 0.2) == 30
    assert cents(18.749999999) == 1875


def test_same_seed_and_index_give_the_same_scenario():
    config = get_preset("in-distribution")
    assert make_scenario(config, CATALOG, 7, 3) == make_scenario(config, CATALOG, 7, 3)


def test_different_seeds_and_indices_give_different_scenarios():
    config = get_preset("in-distribution")
    budgets = {make_scenario(config, CATALOG, seed, 0).budgets for seed in range(20)}
    budgets |= {make_scenario(config, CATALOG, 0, index).budgets for index in range(1, 20)}
    assert len(budgets) == 39


def test_scenario_i_does_not_depend_on_how_many_are_generated():
    config = get_preset("ood")
    long = make_scenarios(config, CATALOG, 11, 30)
    short = make_scenarios(config, CATALOG, 11, 5)
    window = make_scenarios(config, CATALOG, 11, 4, start=20)
    assert long[:5] == short
    assert long[20:24] == window
    assert [s.index for s in window] == [20, 21, 22, 23]
    assert long[17] == make_scenario(config, CATALOG, 11, 17)


def test_scenarios_do_not_depend_on_which_agents_play():
    config = get_preset("in-distribution")
    scenarios = make_scenarios(config, CATALOG, 5, 6)
    a = play_vs_pool(config, scenarios, "scripted:prober", ["scripted:time"])[0]
    b = play_vs_pool(
        config, scenarios, "scripted:satisficer", ["scripted:hardliner", "scripted:time"]
    )[0]
    assert [r.scenario for r in a] == [r.scenario for r in b] == scenarios
    assert make_scenarios(config, CATALOG, 5, 6) == scenarios


@pytest.mark.parametrize("seed", range(25))
def test_tiers_are_a_permutation_and_each_budget_lies_in_its_tier(seed: int):
    sc = make_scenario(get_preset("in-distribution"), CATALOG, seed, 0)
    assert sc.tiers is not None and sorted(sc.tiers) == [0, 1, 2]
    list_price = sc.products[0].list_price
    for budget, tier in zip(sc.budgets, sc.tiers, strict=True):
        low, high = PAPER_TIERS[tier]
        assert low * list_price - HALF_CENT <= budget <= high * list_price + HALF_CENT


def test_every_tier_permutation_occurs():
    config = get_preset("in-distribution")
    perms = {make_scenario(config, CATALOG, 0, i).tiers for i in range(200)}
    assert len(perms) == 6


@pytest.mark.parametrize("seed", range(25))
def test_regulated_openings_lie_in_the_first_offer_range(seed: int):
    sc = make_scenario(get_preset("in-distribution"), CATALOG, seed, 0)
    list_price = sc.products[0].list_price
    for offer in sc.first_offers:
        assert offer is not None
        assert 0.25 * list_price - HALF_CENT <= offer <= 0.30 * list_price + HALF_CENT
        assert offer == round(offer, 2)


@pytest.mark.parametrize("seed", range(10))
def test_ood_budgets_are_uniform_in_range_and_openings_unregulated(seed: int):
    sc = make_scenario(get_preset("ood"), CATALOG, seed, 0)
    assert sc.tiers is None
    assert sc.first_offers == (None,) * 5
    list_price = sc.products[0].list_price
    for budget in sc.budgets:
        assert 0.40 * list_price - HALF_CENT <= budget <= 1.15 * list_price + HALF_CENT


def test_single_product_scenarios_are_consistent():
    sc = make_scenario(get_preset("in-distribution"), CATALOG, 3, 1)
    assert sc.num_products == 1 and sc.stock == (1,)
    assert sc.opening_products == (0, 0, 0)
    assert sc.products[0] in CATALOG
    assert sc.costs == (sc.products[0].cost,) and sc.list_prices == (sc.products[0].list_price,)
    assert all(0.0 <= d < 1.0 for d in sc.slot_draws)


def test_multi_product_scenario_draws_distinct_products_of_one_category():
    config = MarketConfig(
        num_buyers=4, total_turns=9, budget_mode="uniform", num_products=3, stock=2
    )
    for index in range(10):
        sc = make_scenario(config, CATALOG, 9, index)
        assert len({p.id for p in sc.products}) == 3
        assert len({p.category for p in sc.products}) == 1
        assert sc.stock == (2, 2, 2)
        assert all(len(v) == 3 for v in sc.valuations)
        assert all(0 <= p < 3 for p in sc.opening_products)


def test_too_many_products_for_the_catalogue_is_an_error_naming_num_products():
    config = MarketConfig(num_products=6)
    with pytest.raises(ValueError, match="num_products=6"):
        make_scenario(config, CATALOG, 0, 0)


def test_empty_catalogue_is_an_error():
    with pytest.raises(ValueError, match="catalogue is empty"):
        make_scenario(get_preset("in-distribution"), [], 0, 0)


def test_price_scale_multiplies_list_price_and_cost():
    base = make_scenario(get_preset("in-distribution"), CATALOG, 4, 0)
    scaled_config = dataclasses.replace(get_preset("in-distribution"), price_scale=10.0)
    scaled = make_scenario(scaled_config, CATALOG, 4, 0)
    assert scaled.products[0].list_price == pytest.approx(10 * base.products[0].list_price)
    assert scaled.products[0].cost == pytest.approx(10 * base.products[0].cost)


@pytest.mark.parametrize(
    ("draw", "size", "index"), [(0.0, 3, 0), (0.34, 3, 1), (0.999999, 3, 2), (0.5, 1, 0)]
)
def test_pool_index_picks_uniformly_from_the_draw(draw: float, size: int, index: int):
    sc = dataclasses.replace(
        make_scenario(get_preset("bilateral"), CATALOG, 0, 0), slot_draws=(draw,)
    )
    assert sc.pool_index(0, size) == index


def test_scenarios_work_with_a_hand_made_catalogue():
    catalog = [Product("x_1", "x", "Thing", "", "", 34.99, 18.75)]
    sc = make_scenario(get_preset("in-distribution"), catalog, 0, 0)
    assert sc.products == (catalog[0],)


def test_price_jitter_scales_every_price_of_a_scenario_by_one_factor():
    base = get_preset("in-distribution")
    jittered = dataclasses.replace(base, price_jitter=1.5)
    catalog = load_catalog(None)
    factors = []
    for index in range(20):
        plain = make_scenario(base, catalog, 3, index)
        moved = make_scenario(jittered, catalog, 3, index)
        factor = moved.products[0].list_price / plain.products[0].list_price
        factors.append(factor)
        assert math.exp(-1.5) - 0.01 <= factor <= math.exp(1.5) + 0.01
        for old, new in [
            (plain.products[0].cost, moved.products[0].cost),
            *zip(plain.budgets, moved.budgets, strict=True),
            *zip(plain.first_offers, moved.first_offers, strict=True),
        ]:
            assert abs(new - old * factor) <= 0.02 + 1e-3 * new  # cents rounding
        # Every other draw is the unjittered scenario's: tiers, pools, episode seed.
        assert (moved.tiers, moved.slot_draws, moved.episode_seed) == (
            plain.tiers,
            plain.slot_draws,
            plain.episode_seed,
        )
    assert max(factors) / min(factors) > 3  # prices really move
    assert make_scenario(jittered, catalog, 3, 0) == make_scenario(jittered, catalog, 3, 0)


@pytest.mark.parametrize("jitter", [-0.1, 3.5, float("nan")])
def test_a_price_jitter_outside_0_to_3_is_refused(jitter: float):
    with pytest.raises(ValueError, match="price_jitter must lie in"):
        dataclasses.replace(get_preset("in-distribution"), price_jitter=jitter)
