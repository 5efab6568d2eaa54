from __future__ import annotations

import dataclasses
import json
import math

import pytest

from arena import metrics
from arena.records import Deal
from arena.rules import Violation
from tests.arena.episodes import COST, LIST, product, record, scripted_records

M = metrics.METRICS

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
    assert empty.as_dict() == {"mean": None, "se": None, "n": 0}  # JSON null, never NaN


# Reward and deal-only metrics ------------------------------------------------------------------


def test_the_reward_metric_is_the_seller_reward_the_game_stored():
    played = record(deal=(1, 32.50))
    stored = dataclasses.replace(played.result, seller_reward=0.123)
    assert metrics.episode_reward(dataclasses.replace(played, result=stored)) == 0.123


def test_surplus_extraction_ratio_reproduces_the_papers_worked_examples_from_the_deal_price():
    trained = record(deal=(1, 32.50))
    untrained = record(deal=(0, 19.00))
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
    ratio = M["surplus_extraction_ratio"].over(records)
    assert ratio.n == 2
    assert ratio.mean == pytest.approx(((32.50 - COST) / (LIST - COST) + 0.25 / 16.24) / 2)
    assert M["deal_on_top_buyer_rate"].over(records).n == 2
    assert M["deal_rate"].over(records).mean == 0.5
    rewards = M["reward"].over(records)
    assert rewards.n == 4
    assert rewards.mean == pytest.approx((13.75 / 16.24 + 0.25 / 16.24 + 0.0 - 1.0) / 4)


def test_error_episodes_count_for_no_metric_but_are_reported():
    good = [record(deal=(1, 32.50)), record()]
    errored = [*good, record(outcome="error", first_bids=(9.0, 12.0, 5.0))]
    for metric in metrics.METRICS.values():
        assert metric.over(errored) == metric.over(good), metric.name
    assert metrics.summarize(errored)["errors"] == 1
    assert metrics.summarize(errored)["deal_rate"] == metrics.summarize(good)["deal_rate"]
    assert metrics.summarize(errored)["by_buyer_type"] == metrics.summarize(good)["by_buyer_type"]


def test_distinct_buyers_engaged_counts_buyers_that_got_a_seller_message():
    records = [record(engaged=(True, False, True)), record(engaged=(False, False, False))]
    assert M["distinct_buyers_engaged"].over(records).mean == 1.0


# Top buyer and rank distribution ---------------------------------------------------------------


def test_deal_on_top_buyer_is_the_rank_1_budget_of_the_deal_buyer():
    budgets = (30.0, 38.37, 25.0)
    records = [
        record(budgets, deal=(1, 32.50)),
        record(budgets, deal=(0, 28.00)),
        record(budgets, deal=(1, 30.00)),
        record(budgets, deal=(2, 20.00)),
    ]
    assert M["deal_on_top_buyer_rate"].over(records).mean == 0.5
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
    below = M["sell_below_cost_error_rate"].over(records)
    above = M["sell_above_cost_accuracy"].over(records)
    assert below.mean == 0.25 and below.n == 4
    assert above.mean == 0.75 and above.se == pytest.approx(below.se)
    assert M["violation_rate"].over(records).mean == 0.5


def test_violation_rate_by_kind_has_every_kind_and_counts_each_episode_once():
    records = [record(violation="below_cost"), record(violation="format"), record(), record()]
    by_kind = metrics.violation_rate_by_kind(records)
    assert set(by_kind) == {kind.value for kind in Violation}
    assert by_kind["below_cost"].mean == 0.25
    assert by_kind["format"].mean == 0.25
    assert by_kind["sold_out"].mean == 0.0 and by_kind["sold_out"].n == 4
    assert sum(e.mean for e in by_kind.values()) == M["violation_rate"].over(records).mean


# Counts and several deals ------------------------------------------------------------------


def test_resamples_and_deals_are_counted_per_episode():
    records = [record(resamples=(0, 2, 1), deal=(1, 30.0)), record(resamples=(1, 0, 0))]
    assert M["buyer_resamples_per_episode"].over(records).mean == 2.0
    assert M["deals_per_episode"].over(records).mean == 0.5


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


def test_summarize_has_every_registered_metric_and_the_extras_and_is_json_ready():
    records = scripted_records("ood", 64)
    summary = metrics.summarize(records)
    estimates = set(metrics.METRICS)
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
    assert [m.name for m in metrics.group(metrics.TABLE1)] == [
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
    assert summary["reward"] == {"mean": None, "se": None, "n": 0}
    assert json.loads(json.dumps(summary, allow_nan=False)) == summary
    assert summary["deal_buyer_rank_distribution"] == []
    assert summary["by_buyer_type"] == {}
    assert summary["errors"] == 0


# The registry and the seller's surplus share ---------------------------------------------------


def test_every_deal_only_metric_is_undefined_on_episodes_without_a_deal():
    no_deal, broke = record(), record(violation="below_cost")
    for metric in metrics.METRICS.values():
        if metric.deal_only:
            assert metric.per_episode(no_deal) is None, metric.name
            assert metric.per_episode(broke) is None, metric.name
    on_deal = record(deal=(1, 32.50))
    assert all(m.per_episode(on_deal) is not None for m in metrics.group(metrics.TABLE1))


def test_groups_list_the_training_curves_with_their_phases_and_headers_are_unique():
    training = metrics.group(metrics.TRAINING)
    assert [m.figure for m in sorted(training, key=lambda m: m.figure)] == [0, 5, 6, 7, 8, 9]
    # Every training curve belongs to one of the paper's phases (Sec 4.3), and so does the reward.
    assert {m.phase for m in training} | {metrics.METRICS["reward"].phase} == {1, 2, 3}
    assert metrics.METRICS["violation_rate"] in training
    assert "reward" not in {m.name for m in training}  # TRL logs the reward itself
    headers = [m.header for m in metrics.METRICS.values()]
    assert len(set(headers)) == len(headers)
    assert all(m.reference for m in metrics.METRICS.values())


def test_the_seller_surplus_share_is_the_sellers_part_of_the_realised_gains():
    """One definition (docs/metrics.md): clip(sum(P - C) / sum(B - C), 0, 1) over the deals."""
    on_deal = record(deal=(1, 32.50))
    assert metrics.episode_seller_surplus_share(on_deal) == pytest.approx(
        (32.50 - COST) / (38.37 - COST)
    )
    assert metrics.episode_cross_score(on_deal) == metrics.episode_seller_surplus_share(on_deal)
    base = record((30.0, 38.37, 25.0))
    cheap = product(list_price=20.0, cost=10.0, pid="p1")
    scenario = dataclasses.replace(
        base.scenario, products=(product(), cheap), stock=(1, 1),
        valuations=((30.0, 19.0), (38.37, 15.0), (25.0, 12.0)),
    )  # fmt: skip
    deals = (Deal(1, 0, 32.50, "seller", 2), Deal(2, 1, 11.0, "buyer", 4))
    result = dataclasses.replace(base.result, outcome="deal", deals=deals)
    two = dataclasses.replace(base, scenario=scenario, result=result)
    gains = (38.37 - COST) + (12.0 - 10.0)
    expected = ((32.50 - COST) + (11.0 - 10.0)) / gains
    assert metrics.episode_seller_surplus_share(two) == pytest.approx(expected)
    assert metrics.episode_cross_score(two) == pytest.approx(expected)
    assert M["seller_surplus_share"].over([two, on_deal, record()]).n == 2
