"""Section 13's buyer-side metrics: first-offer transparency and buyer types."""

from __future__ import annotations

import pytest

from arena import buyer_metrics
from tests.arena.episodes import LIST, record, scripted_records

# First offers (Table 11) -----------------------------------------------------------------------


def test_first_offer_matches_compare_orderings():
    budgets = (30.0, 38.37, 25.0)
    same_order = record(budgets, first_bids=(9.5, 10.4, 8.0))
    top_only = record(budgets, first_bids=(8.0, 10.4, 9.5))
    neither = record(budgets, first_bids=(10.4, 9.5, 8.0))
    assert buyer_metrics.episode_first_offer_full_rank_match(same_order) == 1.0
    assert buyer_metrics.episode_first_offer_top1_match(same_order) == 1.0
    assert buyer_metrics.episode_first_offer_full_rank_match(top_only) == 0.0
    assert buyer_metrics.episode_first_offer_top1_match(top_only) == 1.0
    assert buyer_metrics.episode_first_offer_full_rank_match(neither) == 0.0
    assert buyer_metrics.episode_first_offer_top1_match(neither) == 0.0


def test_tied_first_bids_are_not_a_match():
    budgets = (30.0, 38.37, 25.0)
    tied_top = record(budgets, first_bids=(10.4, 10.4, 8.0))
    tied_bottom = record(budgets, first_bids=(8.0, 10.4, 8.0))
    assert buyer_metrics.episode_first_offer_top1_match(tied_top) == 0.0
    assert buyer_metrics.episode_first_offer_full_rank_match(tied_top) == 0.0
    assert buyer_metrics.episode_first_offer_top1_match(tied_bottom) == 1.0
    assert buyer_metrics.episode_first_offer_full_rank_match(tied_bottom) == 0.0


def test_episodes_with_tied_budgets_or_missing_bids_are_not_eligible():
    tied_budgets = record((30.0, 30.0, 25.0), first_bids=(9.0, 10.0, 8.0))
    missing_bid = record(first_bids=(9.0, None, 8.0))
    assert buyer_metrics.episode_first_offer_top1_match(tied_budgets) is None
    assert buyer_metrics.episode_first_offer_full_rank_match(missing_bid) is None
    eligible = record(first_bids=(9.0, 10.0, 8.0))
    assert buyer_metrics.first_offer_top1_match([tied_budgets, missing_bid, eligible]).n == 1


def test_regulated_openings_leak_no_rank_and_free_openings_do():
    """Table 11: near 1/N top-1 match with regulated openings, far above with free ones."""
    regulated = buyer_metrics.first_offer_top1_match(scripted_records("in-distribution", 512))
    assert regulated.n >= 500
    assert abs(regulated.mean - 1 / 3) < 0.08
    full = buyer_metrics.first_offer_full_rank_match(scripted_records("in-distribution", 512))
    assert abs(full.mean - 1 / 6) < 0.08
    free = buyer_metrics.first_offer_top1_match(scripted_records("ood", 512))
    assert free.n >= 500
    assert free.mean > 0.5


# Buyer types (Table 12) ------------------------------------------------------------------------


def test_buyer_metrics_are_grouped_by_buyer_spec():
    a, b = "scripted:time", "scripted:hardliner"
    records = [
        record(deal=(1, 32.50), buyers=(a, b, a), first_bids=(7.0, 10.5, 8.75)),
        record(deal=(0, 26.62), buyers=(a, a, b), first_bids=(7.0, 7.0, None)),
        record(buyers=(b, a, a), first_bids=(10.5, 7.0, 7.0)),
    ]
    first = buyer_metrics.buyer_first_offer_ratio(records)
    assert first[b].n == 2 and first[b].mean == pytest.approx(10.5 / LIST)
    assert first[a].n == 6
    assert first[a].mean == pytest.approx((5 * 7.0 + 8.75) / 6 / LIST)
    surplus = buyer_metrics.buyer_surplus_extraction(records)
    assert surplus[b].n == 1 and surplus[b].mean == pytest.approx((LIST - 32.50) / 16.24)
    assert surplus[a].n == 1 and surplus[a].mean == pytest.approx((LIST - 26.62) / 16.24)
    closing = buyer_metrics.deal_rate_by_buyer_type(records)
    assert closing[a].n == 6 and closing[a].mean == pytest.approx(1 / 6)
    assert closing[b].n == 3 and closing[b].mean == pytest.approx(1 / 3)
    assert buyer_metrics.buyer_reward(records).n == 2


def test_buyer_lineup_must_name_every_slot():
    broken = record(buyers=("scripted:time",))
    with pytest.raises(ValueError, match=r"record\.buyers must name every buyer slot"):
        buyer_metrics.buyer_first_offer_ratio([broken])


def test_a_buyer_violation_counts_for_the_buyer_side_and_a_seller_violation_does_not():
    import dataclasses

    from arena.catalog import load_catalog
    from arena.config import get_preset
    from arena.game import Market
    from arena.money import format_price
    from arena.scenarios import make_scenario

    config = get_preset("bilateral")
    market = Market(config, make_scenario(config, load_catalog(), 5, 0))
    over = format_price(market.view(market.current).budget * 2)
    market.step(f"Thought: x\nTalk: hi\nAction: [BUY] {over}")  # twice its budget
    while not market.done:  # re-sampled, still over: the game penalises the buyer seat
        market.step(f"Thought: x\nTalk: hi\nAction: [BUY] {over}")
    seller_slip = record(violation="below_cost")
    buyer_slip = dataclasses.replace(seller_slip, result=market.result())
    assert buyer_slip.result.violation_by == "buyer_1"  # the game names the seat
    assert buyer_metrics.episode_buyer_violation(buyer_slip) == 1.0
    assert buyer_metrics.episode_buyer_violation(seller_slip) == 0.0
    assert buyer_metrics.episode_buyer_violation(record(deal=(1, 30.0))) == 0.0
