from __future__ import annotations

import dataclasses
import json
import math

import pytest

from arena import metrics
from arena.catalog import Product, default_catalog
from arena.config import get_preset
from arena.records import ENV_VERSION, Deal, EpisodeRecord, EpisodeResult
from arena.rewards import seller_reward
from arena.scenarios import Scenario, make_scenarios
from tournaments.match import play_many

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
) -> EpisodeRecord:
    """A hand-built single-product episode; the seller reward follows equation (1)."""
    n = len(budgets)
    deals = (Deal(deal[0], 0, deal[1], "seller", 3),) if deal else ()
    if outcome is None:
        outcome = "violation" if violation else ("deal" if deal else "no_deal")
    if outcome == "violation":
        seller = -1.0
    elif outcome == "error":
        seller = 0.0
    else:
        seller = seller_reward([(0, deal[1])] if deal else [], [LIST], [COST], [1], n)
    buyer_rewards = [0.0] * n
    if deal and outcome == "deal":
        buyer_rewards[deal[0]] = (LIST - deal[1]) / (LIST - COST)
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
    return EpisodeRecord(
        env_version=ENV_VERSION,
        preset="in-distribution",
        scenario=scenario,
        seller="scripted:prober",
        buyers=buyers if buyers is not None else ("scripted:time",) * n,
        result=result,
    )


def scripted_records(preset: str, count: int, seed: int = 11) -> list[EpisodeRecord]:
    config = get_preset(preset)
    scenarios = make_scenarios(config, default_catalog(), seed, count)
    return play_many(config, scenarios, "scripted:prober", ["scripted:time"], keep_turns=False)


# Estimate --------------------------------------------------------------------------------------


def test_estimate_uses_sample_std_with_ddof_1_over_sqrt_n():
    est = metrics.estimate([1.0, 2.0, 3.0, 6.0])
    assert est.mean == 3.0
    assert est.n == 4
    # sample variance (4 + 1 + 0 + 9) / 3 = 14/3
    assert est.se == pytest.approx(math.sqrt(14 / 3) / 2)


def test_estimate_of_nothing_is_nan_and_of_one_value_has_zero_se():
    empty = metrics.estimate([])
    assert math.isnan(empty.mean) and math.isnan(empty.se) and empty.n == 0
    assert metrics.estimate([0.4]) == metrics.Estimate(0.4, 0.0, 1)
    assert metrics.estimate([0.4]).as_dict() == {"mean": 0.4, "se": 0.0, "n": 1}


# Reward and deal-only metrics ------------------------------------------------------------------


def test_reward_reproduces_the_papers_worked_examples():
    trained = record(deal=(1, 32.50))
    untrained = record(deal=(0, 19.00))
    assert round(metrics.episode_reward(trained), 3) == 0.847
    assert round(metrics.episode_reward(untrained), 3) == 0.015
    assert round(metrics.episode_surplus_extraction_ratio(trained), 3) == 0.847
    assert round(metrics.episode_surplus_extraction_ratio(untrained), 3) == 0.015


def test_surplus_ratio_is_capped_at_one_for_a_deal_above_list():
    assert metrics.episode_surplus_extraction_ratio(record(deal=(1, 36.00))) == 1.0


def test_deal_only_metrics_exclude_no_deal_and_violation_episodes():
    records = [
        record(deal=(1, 32.50)),
        record(deal=(0, 19.00)),
        record(),
        record(violation="below_cost"),
    ]
    ratio = metrics.surplus_extraction_ratio(records)
    assert ratio.n == 2
    assert ratio.mean == pytest.approx(((32.50 - COST) / (LIST - COST) + 0.25 / 16.24) / 2)
    assert metrics.deal_on_top_buyer_rate(records).n == 2
    assert metrics.deal_rate(records).mean == 0.5
    rewards = metrics.reward(records)
    assert rewards.n == 4
    assert rewards.mean == pytest.approx((13.75 / 16.24 + 0.25 / 16.24 + 0.0 - 1.0) / 4)


def test_error_episodes_count_for_no_metric_but_are_reported():
    good = [record(deal=(1, 32.50)), record()]
    errored = [*good, record(outcome="error", first_bids=(9.0, 12.0, 5.0))]
    for name in ("reward", "deal_rate", "distinct_buyers_engaged", "violation_rate"):
        assert getattr(metrics, name)(errored) == getattr(metrics, name)(good)
    assert metrics.summarize(errored)["errors"] == 1
    assert metrics.summarize(errored)["deal_rate"] == metrics.summarize(good)["deal_rate"]
    assert metrics.summarize(errored)["by_buyer_type"] == metrics.summarize(good)["by_buyer_type"]


def test_distinct_buyers_engaged_counts_buyers_that_got_a_seller_message():
    records = [record(engaged=(True, False, True)), record(engaged=(False, False, False))]
    assert metrics.distinct_buyers_engaged(records).mean == 1.0


# Top buyer and rank distribution ---------------------------------------------------------------


def test_deal_on_top_buyer_is_the_rank_1_budget_of_the_deal_buyer():
    budgets = (30.0, 38.37, 25.0)
    records = [
        record(budgets, deal=(1, 32.50)),
        record(budgets, deal=(0, 28.00)),
        record(budgets, deal=(1, 30.00)),
        record(budgets, deal=(2, 20.00)),
    ]
    assert metrics.deal_on_top_buyer_rate(records).mean == 0.5
    assert metrics.deal_buyer_rank_distribution(records) == [0.5, 0.25, 0.25]


def test_a_buyer_tied_for_the_highest_budget_is_rank_1():
    tied = record((38.37, 38.37, 25.0), deal=(0, 32.50))
    assert metrics.episode_deal_on_top_buyer(tied) == 1.0
    assert metrics.buyer_rank(tied.scenario, 1) == 1
    assert metrics.buyer_rank(tied.scenario, 2) == 3


def test_rank_distribution_sums_to_one_and_is_empty_without_deals():
    assert metrics.deal_buyer_rank_distribution([record(), record(violation="format")]) == []
    shares = metrics.deal_buyer_rank_distribution(scripted_records("in-distribution", 64))
    assert len(shares) == 3
    assert sum(shares) == pytest.approx(1.0)


# Violations ------------------------------------------------------------------------------------


def test_below_cost_rate_and_above_cost_accuracy_are_complements_over_all_episodes():
    records = [
        record(violation="below_cost"),
        record(violation="format"),
        record(deal=(1, 30.0)),
        record(),
    ]
    below = metrics.sell_below_cost_error_rate(records)
    above = metrics.sell_above_cost_accuracy(records)
    assert below.mean == 0.25 and below.n == 4
    assert above.mean == 0.75 and above.se == pytest.approx(below.se)
    assert metrics.violation_rate(records).mean == 0.5


def test_violation_rate_by_kind_has_every_kind_and_counts_each_episode_once():
    records = [record(violation="below_cost"), record(violation="format"), record(), record()]
    by_kind = metrics.violation_rate_by_kind(records)
    assert set(by_kind) == {
        "below_cost",
        "inactive_target",
        "bad_target",
        "format",
        "deal_mismatch",
        "bad_product",
        "sold_out",
        "buyer",
    }
    assert by_kind["below_cost"].mean == 0.25
    assert by_kind["format"].mean == 0.25
    assert by_kind["sold_out"].mean == 0.0 and by_kind["sold_out"].n == 4
    assert sum(e.mean for e in by_kind.values()) == metrics.violation_rate(records).mean


# First offers (Table 11) -----------------------------------------------------------------------


def test_first_offer_matches_compare_orderings():
    budgets = (30.0, 38.37, 25.0)
    same_order = record(budgets, first_bids=(9.5, 10.4, 8.0))
    top_only = record(budgets, first_bids=(8.0, 10.4, 9.5))
    neither = record(budgets, first_bids=(10.4, 9.5, 8.0))
    assert metrics.episode_first_offer_full_rank_match(same_order) == 1.0
    assert metrics.episode_first_offer_top1_match(same_order) == 1.0
    assert metrics.episode_first_offer_full_rank_match(top_only) == 0.0
    assert metrics.episode_first_offer_top1_match(top_only) == 1.0
    assert metrics.episode_first_offer_full_rank_match(neither) == 0.0
    assert metrics.episode_first_offer_top1_match(neither) == 0.0


def test_tied_first_bids_are_not_a_match():
    budgets = (30.0, 38.37, 25.0)
    tied_top = record(budgets, first_bids=(10.4, 10.4, 8.0))
    tied_bottom = record(budgets, first_bids=(8.0, 10.4, 8.0))
    assert metrics.episode_first_offer_top1_match(tied_top) == 0.0
    assert metrics.episode_first_offer_full_rank_match(tied_top) == 0.0
    assert metrics.episode_first_offer_top1_match(tied_bottom) == 1.0
    assert metrics.episode_first_offer_full_rank_match(tied_bottom) == 0.0


def test_episodes_with_tied_budgets_or_missing_bids_are_not_eligible():
    tied_budgets = record((30.0, 30.0, 25.0), first_bids=(9.0, 10.0, 8.0))
    missing_bid = record(first_bids=(9.0, None, 8.0))
    assert metrics.episode_first_offer_top1_match(tied_budgets) is None
    assert metrics.episode_first_offer_full_rank_match(missing_bid) is None
    eligible = record(first_bids=(9.0, 10.0, 8.0))
    assert metrics.first_offer_top1_match([tied_budgets, missing_bid, eligible]).n == 1


def test_regulated_openings_leak_no_rank_and_free_openings_do():
    """Table 11: near 1/N top-1 match with regulated openings, far above with free ones."""
    regulated = metrics.first_offer_top1_match(scripted_records("in-distribution", 512))
    assert regulated.n >= 500
    assert abs(regulated.mean - 1 / 3) < 0.08
    full = metrics.first_offer_full_rank_match(scripted_records("in-distribution", 512))
    assert abs(full.mean - 1 / 6) < 0.08
    free = metrics.first_offer_top1_match(scripted_records("ood", 512))
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
    first = metrics.buyer_first_offer_ratio(records)
    assert first[b].n == 2 and first[b].mean == pytest.approx(10.5 / LIST)
    assert first[a].n == 6
    assert first[a].mean == pytest.approx((5 * 7.0 + 8.75) / 6 / LIST)
    surplus = metrics.buyer_surplus_extraction(records)
    assert surplus[b].n == 1 and surplus[b].mean == pytest.approx((LIST - 32.50) / 16.24)
    assert surplus[a].n == 1 and surplus[a].mean == pytest.approx((LIST - 26.62) / 16.24)
    closing = metrics.deal_rate_by_buyer_type(records)
    assert closing[a].n == 6 and closing[a].mean == pytest.approx(1 / 6)
    assert closing[b].n == 3 and closing[b].mean == pytest.approx(1 / 3)
    assert metrics.buyer_reward(records).n == 2


def test_buyer_lineup_must_name_every_slot():
    broken = record(buyers=("scripted:time",))
    with pytest.raises(ValueError, match=r"record\.buyers must name every buyer slot"):
        metrics.buyer_first_offer_ratio([broken])


def test_resamples_and_deals_are_counted_per_episode():
    records = [record(resamples=(0, 2, 1), deal=(1, 30.0)), record(resamples=(1, 0, 0))]
    assert metrics.buyer_resample_rate(records).mean == 2.0
    assert metrics.deals_per_episode(records).mean == 0.5


def test_episodes_with_several_deals_average_their_deals():
    """Multi-product markets: every deal counts; one product is the case of one deal."""
    base = record((30.0, 38.37, 25.0))
    cheap = product(list_price=20.0, cost=10.0, pid="p1")
    scenario = dataclasses.replace(
        base.scenario,
        products=(product(), cheap),
        stock=(1, 1),
        valuations=((30.0, 19.0), (38.37, 15.0), (25.0, 12.0)),
    )
    deals = (Deal(1, 0, 32.50, "seller", 2), Deal(2, 1, 15.0, "buyer", 4))
    result = dataclasses.replace(base.result, outcome="deal", deals=deals, seller_reward=0.6)
    two = dataclasses.replace(base, scenario=scenario, result=result)
    assert metrics.episode_deals(two) == 2.0
    assert metrics.episode_surplus_extraction_ratio(two) == pytest.approx(
        ((32.50 - COST) / (LIST - COST) + 0.5) / 2
    )
    # buyer 2 is rank 3 for product 1 (valuations 19, 15, 12)
    assert metrics.episode_deal_on_top_buyer(two) == 0.5
    assert metrics.deal_buyer_rank_distribution([two]) == [0.5, 0.0, 0.5]


# summarize -------------------------------------------------------------------------------------


def test_summarize_has_exactly_the_documented_keys_and_is_json_ready():
    records = scripted_records("ood", 64)
    summary = metrics.summarize(records)
    estimates = {
        "reward",
        "surplus_extraction_ratio",
        "deal_rate",
        "distinct_buyers_engaged",
        "deal_on_top_buyer_rate",
        "sell_below_cost_error_rate",
        "sell_above_cost_accuracy",
        "violation_rate",
        "first_offer_full_rank_match",
        "first_offer_top1_match",
        "buyer_resamples",
        "deals_per_episode",
        "matching_quality",
        "optimal_pair_share",
        "seller_surplus_captured",
        "turns_per_deal",
    }
    rest = {"violation_rate_by_kind", "deal_buyer_rank_distribution", "by_buyer_type", "errors"}
    assert set(summary) == estimates | rest
    for key in estimates:
        assert set(summary[key]) == {"mean", "se", "n"}
    assert summary["reward"]["n"] == 64
    assert len(summary["deal_buyer_rank_distribution"]) == 5
    assert set(summary["by_buyer_type"]) == {"scripted:time"}
    assert set(summary["by_buyer_type"]["scripted:time"]) == {
        "first_offer_ratio",
        "buyer_surplus_extraction",
        "deal_rate",
    }
    assert summary["by_buyer_type"]["scripted:time"]["deal_rate"]["n"] == 64 * 5
    assert summary["errors"] == 0
    assert [key for key, _ in metrics.TABLE1_COLUMNS] == [
        "reward",
        "surplus_extraction_ratio",
        "deal_rate",
        "distinct_buyers_engaged",
        "deal_on_top_buyer_rate",
        "sell_below_cost_error_rate",
    ]
    assert json.loads(json.dumps(summary)) == summary


def test_summarize_of_real_records_agrees_with_the_game_results():
    records = scripted_records("in-distribution", 128)
    summary = metrics.summarize(records)
    deals = sum(r.result.outcome == "deal" for r in records)
    assert summary["deal_rate"]["mean"] == pytest.approx(deals / 128)
    assert summary["deals_per_episode"]["mean"] == pytest.approx(deals / 128)
    assert summary["surplus_extraction_ratio"]["n"] == deals
    assert summary["reward"]["mean"] == pytest.approx(
        sum(r.result.seller_reward for r in records) / 128
    )
    assert 0.0 <= summary["sell_above_cost_accuracy"]["mean"] <= 1.0
    assert summary["first_offer_top1_match"]["n"] <= 128


def test_summarize_of_no_records_is_all_empty_estimates():
    summary = metrics.summarize([])
    assert summary["reward"]["n"] == 0 and math.isnan(summary["reward"]["mean"])
    assert summary["deal_buyer_rank_distribution"] == []
    assert summary["by_buyer_type"] == {}
    assert summary["errors"] == 0
