"""benchmarks/buyer_bids.py counts what docs/training.md quotes (why trained buyers take the list
price): on scripted episodes its counts agree with the records they come from."""

from __future__ import annotations

import statistics

from agents.engine import play_vs_pool
from arena.catalog import load_catalog
from arena.config import get_preset
from arena.scenarios import make_scenarios
from tests.benchmarks import load_script


def test_the_bid_counts_agree_with_the_episodes_they_are_read_from():
    config = get_preset("in-distribution")
    scenarios = make_scenarios(config, load_catalog(None), 5, 12)
    records, _ = play_vs_pool(config, scenarios, "scripted:prober", ["scripted:time"])
    figures = load_script("buyer_bids").bid_figures(records)

    assert figures["episodes"] == 12 and figures["malformed"] == 0
    buyer_turns = sum(1 for r in records for t in r.result.turns if t.agent != "seller")
    openings = sum(len({t.agent for t in r.result.turns if t.agent != "seller"}) for r in records)
    assert sum(figures["replies"].values()) == buyer_turns - openings  # the openings left out
    assert 0 < figures["bids"] <= figures["replies"]["BUY"]
    assert 0 <= figures["bids_at_or_above_cost"] <= figures["bids"]
    assert figures["bid_over_budget_median"] <= 1.0  # a time buyer never bids over its budget
    assert figures["deal_rate"] == sum(bool(r.result.deals) for r in records) / 12
    assert figures["deal_price_over_list"] <= 1.0
    assert figures["bids_on_the_ladder"] < figures["bids"]  # time bids between the rungs
    by_reply = figures["bid_over_budget_by_reply"]
    assert len(by_reply) >= 2 and by_reply == sorted(by_reply)  # a time buyer raises its bid


def test_the_bids_by_reply_are_the_medians_of_each_reply_after_the_opening():
    config = get_preset("bilateral")
    scenarios = make_scenarios(config, load_catalog(None), 5, 12)
    records, _ = play_vs_pool(config, scenarios, "scripted:prober", ["scripted:time"])
    by_reply: dict[int, list[float]] = {}
    for record in records:
        budget = record.scenario.valuations[0][0]
        buys = [t for t in record.result.turns if t.agent != "seller" and t.valid][1:]
        for i, turn in enumerate(buys, start=1):
            if turn.kind == "BUY":
                by_reply.setdefault(i, []).append(turn.price / budget)
    expected = [statistics.median(by_reply[i]) for i in sorted(by_reply)]
    assert load_script("buyer_bids").bid_figures(records)["bid_over_budget_by_reply"] == expected


def test_a_buyer_on_the_ladder_has_every_bid_after_its_opening_counted_on_it():
    config = get_preset("bilateral")
    scenarios = make_scenarios(config, load_catalog(None), 5, 12)
    climber = "scripted:time?e=1&opening=0.3&jitter=0&ladder=9"
    records, _ = play_vs_pool(config, scenarios, "scripted:prober", [climber])
    figures = load_script("buyer_bids").bid_figures(records)
    assert figures["bids"] > 0 and figures["bids_on_the_ladder"] == figures["bids"]


def test_the_side_reward_is_the_mean_over_episodes_of_the_buyers_mean_over_seats():
    config = get_preset("in-distribution")
    scenarios = make_scenarios(config, load_catalog(None), 5, 12)
    records, _ = play_vs_pool(config, scenarios, "scripted:prober", ["scripted:time"])
    figures = load_script("buyer_bids").bid_figures(records)
    seats = [statistics.fmean(r.result.buyer_rewards) for r in records]
    assert figures["side_reward"] == statistics.fmean(seats)
    assert len(records[0].result.buyer_rewards) == 3 and figures["side_reward"] > 0  # it closes
