"""leagues.evaluation: held-out figures paired against a reference, the view facing some
opponents only (the hand-off's question: how do sellers fare against trained buyers alone?),
and the bars a league's learning is judged by."""

from __future__ import annotations

import dataclasses

import pytest

from leagues.evaluation import (
    coevolving,
    facing,
    held_out,
    matches,
    opponent_filter,
    paired,
    targets,
)
from leagues.state import league_records, register_league
from tests.leagues.leagues import scripted_store


def test_an_agent_matches_by_spec_or_label_with_shell_patterns():
    spec = "hf:/runs/bases/abc/warm-start?lora=/runs/buyer-seed0/gen-003-buyer/adapter"
    assert matches(spec, "gen-3-buyer", ["gen-3-buyer"])
    assert matches(spec, "gen-3-buyer", ["hf:*"])
    assert matches(spec, "gen-3-buyer", ["scripted:*", "*buyer-seed0*"])
    assert not matches(spec, "gen-3-buyer", ["scripted:*", "gen-2-buyer"])


def test_facing_keeps_the_episodes_whose_every_opponent_matches(tmp_path):
    store, _ = scripted_store(tmp_path)
    records, _ = league_records(store, "t")
    store.close()
    versus_time = facing(records, "seller", opponent_filter(["scripted:time"], {}))
    assert versus_time and all(set(r.buyers) == {"scripted:time"} for r in versus_time)
    assert len(versus_time) < len(records)
    assert len(facing(records, "seller", opponent_filter(["scripted:t*"], {}))) == len(records)
    by_spec = opponent_filter(["scripted:time"], {"scripted:time": "x"})  # the spec still counts
    assert facing(records, "seller", by_spec) == versus_time
    by_label = opponent_filter(["x"], {"scripted:time": "x"})
    assert facing(records, "seller", by_label) == versus_time
    versus_prober = facing(records, "buyer", opponent_filter(["scripted:prober"], {}))
    assert versus_prober and {r.seller for r in versus_prober} == {"scripted:prober"}


def test_held_out_facing_one_buyer_pairs_and_rates_on_those_episodes_only(tmp_path):
    store, config = scripted_store(tmp_path)
    register_league(store, config)
    records, _ = league_records(store, "t")
    mine = facing(records, "seller", opponent_filter(["scripted:tit-for-tat"], {}))
    rows = held_out(store, "t", "seller", ["scripted:tit-for-tat"], "scripted:satisficer")
    by = {r["agent"]: r for r in rows}
    assert set(by) == {"scripted:satisficer", "scripted:prober"}

    def reward(seller):
        return {(r.scenario.index, r.buyers): r for r in mine if r.seller == seller}

    prober, satisficer = reward("scripted:prober"), reward("scripted:satisficer")
    expected = paired(prober, satisficer, lambda r: r.result.seller_reward)
    assert by["scripted:prober"]["reward"]["n"] == len(prober)
    assert by["scripted:prober"]["reward"]["gain"] == pytest.approx(expected["gain"])
    assert by["scripted:satisficer"]["reward"]["gain"] == 0.0  # the reference, against itself
    # Ratings are refitted on the chosen episodes, with the league's anchor (its first scripted
    # seller pinned at 1000): against tit-for-tat the two sellers tie on every scenario, so they
    # rate equal; against the time buyer the prober gains on the pairs, so it rates above.
    assert config.sellers[0] == "scripted:satisficer"
    assert expected["gain"] == 0.0 and all(r["reward"]["gain"] == 0.0 for r in rows)
    assert {a: r["rating"]["rating"] for a, r in by.items()} == pytest.approx(
        {"scripted:satisficer": 1000.0, "scripted:prober": 1000.0}
    )
    versus_time = held_out(store, "t", "seller", ["scripted:time"], "*satis*")
    by_time = {r["agent"]: r for r in versus_time}
    assert by_time["scripted:prober"]["reward"]["gain"] > 0
    assert by_time["scripted:satisficer"]["rating"]["rating"] == pytest.approx(1000.0)
    assert by_time["scripted:prober"]["rating"]["rating"] > 1000.0
    store.close()


def test_held_out_names_what_is_missing(tmp_path):
    store, config = scripted_store(tmp_path)
    register_league(store, config)
    with pytest.raises(ValueError, match=r"no held-out episode .* matching gen-9-buyer"):
        held_out(store, "t", "seller", ["gen-9-buyer"], "scripted:satisficer")
    with pytest.raises(ValueError, match=r"reference 'gen-1-seller' matches 0 .* one of scripted:"):
        held_out(store, "t", "seller", (), "gen-1-seller")
    with pytest.raises(ValueError, match=r"reference 'scripted:\*' matches 2 sellers"):
        held_out(store, "t", "seller", (), "scripted:*")
    rows = held_out(store, "t", "seller", (), "*satis*")  # a pattern that names one agent
    assert {r["agent"]: r["reward"]["gain"] for r in rows}["scripted:satisficer"] == 0.0
    store.close()


def row(agent: str, generation: int | None, rating: tuple[float, float, float], gain=(0.0, 0.0)):
    """A held-out row as :func:`held_out` gives it: rating (rating, low, high), paired gain, se."""
    return {
        "agent": agent,
        "spec": agent,
        "generation": generation,
        "rating": dict(zip(("rating", "ci_low", "ci_high"), rating, strict=True)),
        "reward": {"mean": 0.0, "gain": gain[0], "gain_se": gain[1]},
        "violation_rate": {"mean": 0.0},
    }


def test_the_learning_bar_wants_a_gain_of_a_tenth_and_ratings_rising_every_generation():
    rows = [
        row("base", 0, (850, 830, 870)),
        row("gen-1-buyer", 1, (900, 880, 920), (0.08, 0.01)),
        row("gen-2-buyer", 2, (890, 875, 905), (0.12, 0.01)),
    ]
    met = targets(rows, "buyer")
    assert met == {
        "gain_over_base": True,
        "interval_above_base": True,
        "ratings_rise": False,  # 900 -> 890
        "newest_above_parent": False,
    }


def test_the_coevolution_bar_reads_the_gain_at_two_standard_errors():
    rows = [
        row("base", 0, (850, 830, 870)),
        row("gen-2-buyer", 2, (880, 860, 900), (0.06, 0.01)),
        row("gen-4-buyer", 4, (900, 880, 920), (0.07, 0.012)),
    ]
    assert targets(rows, "buyer", coevolution=True) == {
        "gain_at_two_se": False,  # 0.07 - 2 x 0.012 = 0.046 < 0.05
        "interval_above_base": True,
        "newest_above_parent": True,
    }
    rows[-1]["reward"]["gain_se"] = 0.01  # 0.07 - 0.02 = 0.05: met
    assert targets(rows, "buyer", coevolution=True)["gain_at_two_se"] is True
    assert "gain_over_base" in targets(rows, "buyer")  # the same rows under the learning bar


def test_a_league_that_trains_both_sides_is_judged_as_coevolution(tmp_path):
    store, config = scripted_store(tmp_path)
    register_league(store, config)
    assert not coevolving(store, "t")
    both = dataclasses.replace(
        config, name="both", learner=dataclasses.replace(config.learner, side="both")
    )
    register_league(store, both)
    assert coevolving(store, "both")
    assert not coevolving(store, "absent")
    store.close()
