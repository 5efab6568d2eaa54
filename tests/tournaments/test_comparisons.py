"""Paired comparisons: who is compared with whom, on what, and which entries an episode
counts for."""

from __future__ import annotations

import dataclasses

import pytest

from agents.driver import buyer_lineup
from agents.engine import play_vs_pool
from arena.buyer_metrics import episode_buyer_side_reward
from arena.catalog import default_catalog
from arena.config import get_preset
from arena.metrics import episode_cross_score
from arena.records import Deal, EpisodeRecord
from arena.scenarios import Scenario, make_scenarios
from tests.tournaments.episodes import ENTRIES, POOL, TFT, TIME, hand_made_base, made, triples
from tournaments.comparisons import buyer_entries_of, comparisons, lineup_label
from tournaments.leaderboard import leaderboard
from tournaments.ratings import RatingConfig

NO_BOOTSTRAP = RatingConfig(bootstrap_rounds=0)


@pytest.fixture(scope="module")
def base() -> tuple[list[Scenario], EpisodeRecord]:
    return hand_made_base()


def test_seller_comparisons_pair_sellers_on_the_same_scenario_and_lineup(base) -> None:
    other = ("scripted:hardliner",) * 3
    records = [
        made(base, "A", 0, 0.5),
        made(base, "B", 0, 0.3),
        made(base, "A", 0, 0.0),  # the same match again: the first one counts
        made(base, "C", 0, 0.5),
        made(base, "A", 0, 0.9, buyers=other),  # other lineup: nobody to compare with
        made(base, "B", 1, 0.4),
        made(base, "A", 1, 0.2),
        made(base, "C", 1, 1.0, outcome="error"),  # back-end error: left out
    ]
    assert triples(comparisons(records, "seller")) == [
        ("seller:A", "seller:B", 1.0),
        ("seller:A", "seller:C", 0.5),
        ("seller:B", "seller:C", 0.0),
        ("seller:A", "seller:B", 0.0),
    ]
    rows = {r["agent"]: r for r in leaderboard(records, "seller", NO_BOOTSTRAP)}
    assert {k: (v["games"], v["wins"], v["episodes"]) for k, v in rows.items()} == {
        "A": (3, 1.5, 3),
        "B": (3, 1.0, 2),
        "C": (2, 1.5, 1),
    }


def test_buyer_comparisons_pair_entries_that_met_the_same_seller(base) -> None:
    hard = ("scripted:hardliner",) * 3
    records = [
        made(base, "A", 0, buyer_rewards=(0.0, 0.6, 0.0)),
        made(base, "A", 0, buyers=hard, buyer_rewards=(0.3, 0.0, 0.0)),
        made(base, "B", 0, buyers=hard, buyer_rewards=(0.0, 0.0, -1.0)),  # no partner
        made(base, "A", 1, buyer_rewards=(0.0, 0.0, 0.0)),
        made(base, "A", 1, buyers=hard, buyer_rewards=(0.0, 0.0, 0.0)),
    ]
    assert episode_buyer_side_reward(records[0]) == pytest.approx(0.2)
    assert triples(comparisons(records, "buyer")) == [
        ("buyer:scripted:hardliner", "buyer:scripted:time", 0.0),
        ("buyer:scripted:hardliner", "buyer:scripted:time", 0.5),
    ]


def test_cross_comparisons_give_one_game_per_episode(base) -> None:
    records = [made(base, "A", 0), made(base, "A", 1), made(base, "B", 0)]
    comps = comparisons(records, "cross")
    assert [(c.a, c.b) for c in comps] == [
        ("seller:A", "buyer:scripted:time"),
        ("seller:B", "buyer:scripted:time"),
        ("seller:A", "buyer:scripted:time"),
    ]


def test_cross_score_is_the_sellers_share_of_the_realised_gains(base) -> None:
    scenarios, _ = base
    sc = scenarios[0]
    cost, budget = sc.products[0].cost, sc.valuations[1][0]
    price = round(cost + 0.25 * (budget - cost), 2)
    deal = Deal(buyer=1, product=0, price=price, closed_by="seller", turn=2)
    on_deal = made(base, "A", 0, outcome="deal", deals=(deal,), violation_by=None)
    assert episode_cross_score(on_deal) == pytest.approx((price - cost) / (budget - cost))
    above = dataclasses.replace(deal, price=round(budget + 5.0, 2))
    assert (
        episode_cross_score(made(base, "A", 0, outcome="deal", deals=(above,), violation_by=None))
        == 1.0
    )
    assert (
        episode_cross_score(made(base, "A", 0, outcome="no_deal", deals=(), violation_by=None))
        == 0.5
    )
    seller_breaks = made(base, "A", 0, outcome="violation", deals=(), violation_by="seller")
    assert episode_cross_score(seller_breaks) == 0.0
    buyer_breaks = made(base, "A", 0, outcome="violation", deals=(), violation_by="buyer_2")
    assert episode_cross_score(buyer_breaks) == 1.0
    assert episode_cross_score(made(base, "A", 0, outcome="error", deals=())) is None


def test_a_pool_episode_counts_for_every_entry_that_gives_its_lineup() -> None:
    config = get_preset("in-distribution")
    scenarios = make_scenarios(config, default_catalog(), 0, 64)
    shared = next(sc for sc in scenarios if buyer_lineup(sc, (TIME, TFT)) == (TIME,) * 3)
    mixed = next(sc for sc in scenarios if len(set(buyer_lineup(sc, (TIME, TFT)))) == 2)
    [on_shared] = play_vs_pool(config, [shared], "scripted:prober", [TIME], keep_turns=False)[0]
    [on_mixed] = play_vs_pool(config, [mixed], "scripted:prober", [TIME, TFT], keep_turns=False)[0]
    assert buyer_entries_of(on_shared, ENTRIES) == [TIME, POOL]
    assert buyer_entries_of(on_mixed, ENTRIES) == [POOL]
    assert (
        buyer_entries_of(on_mixed)
        == [lineup_label(on_mixed.buyers)]
        == [f"{TIME}|{TFT}" if TIME < TFT else f"{TFT}|{TIME}"]
    )
    with pytest.raises(ValueError, match="matches none of the buyer_entries"):
        buyer_entries_of(on_mixed, [(TIME,)])
