"""A generation's plan: its JSON round trip (old plans included) and its training rows."""

from __future__ import annotations

import dataclasses
import json

import pytest

from leagues.config import LeagueConfig
from leagues.plan import GenerationPlan, spare_scenarios, training_rows
from leagues.rollout import LEARNER
from tests.leagues.leagues import league_config


def test_a_plan_survives_its_json_round_trip_and_old_plans_still_read():
    plan = GenerationPlan(
        label="gen-2-buyer", side="buyer", parent="hf:/m?x=1", parent_label="base",
        opponents=("scripted:prober", "hf:/c1"), weights=(0.25, 0.75),
        adapter="/runs/a", checkpoint={"buyer": "hf:/c2"},
    )  # fmt: skip
    assert GenerationPlan.from_json(plan.to_json()) == plan
    # As the league stored plans before they were typed (generation 0, then a trained one).
    setup = GenerationPlan.from_json('{"label": "base", "checkpoint": {}, "base": "hf:/m"}')
    assert (setup.label, setup.base, setup.side, setup.opponents) == ("base", "hf:/m", "", ())
    old = {"side": "seller", "label": "gen-1-seller", "parent": "hf:/m", "parent_label": "base",
           "parent_adapter": None, "checkpoint": {}, "opponents": ["scripted:time"],
           "weights": [1.0]}  # fmt: skip
    assert GenerationPlan.from_json(json.dumps(old)).weights == (1.0,)
    with pytest.raises(ValueError, match=r"league_generations.plan: unknown key 'colour'"):
        GenerationPlan.from_json('{"label": "x", "colour": 1}')


def test_training_rows_fill_every_opponent_seat_with_the_drawn_opponent(tmp_path):
    config = LeagueConfig.from_toml(league_config(tmp_path))
    opponents = ["scripted:time", "scripted:tit-for-tat"]
    rows = training_rows(config, 1, "seller", opponents, [0.0, 1.0])
    assert len(rows) == 2 * 2  # steps x scenarios per step
    assert all(r.seller == LEARNER and r.buyers == ("scripted:tit-for-tat",) * 3 for r in rows)
    later = training_rows(config, 2, "seller", opponents, [0.0, 1.0])
    assert {r.scenario.index for r in rows}.isdisjoint({r.scenario.index for r in later})
    buyer = training_rows(config, 1, "buyer", ["scripted:prober"], [1.0])
    assert all(r.seller == "scripted:prober" and r.buyers[0] == LEARNER for r in buyer)
    assert all(set(r.buyers[1:]) <= set(config.buyers) for r in buyer)


def test_self_play_rows_pair_the_seller_and_buyer_seat_of_each_scenario(tmp_path):
    config = LeagueConfig.from_toml(league_config(tmp_path, side="self-play"))
    rows = training_rows(config, 1, "self-play", [], [])
    assert [r.trained for r in rows[:4]] == ["seller", "buyer_1", "seller", "buyer_1"]
    assert rows[0].scenario == rows[1].scenario != rows[2].scenario
    assert all(r.seller == LEARNER and set(r.buyers) == {LEARNER} for r in rows)


def buyer_in_every_seat(tmp_path, accumulation: int) -> LeagueConfig:
    config = LeagueConfig.from_toml(league_config(tmp_path, side="both"))
    train = config.learner.train
    train = dataclasses.replace(
        train, grpo={**train.grpo, "gradient_accumulation_steps": accumulation}
    )
    learner = dataclasses.replace(config.learner, buyer_seats="all", train=train)
    return dataclasses.replace(config, learner=learner)


def test_a_buyer_in_every_seat_gets_a_group_per_seat_and_scenario_within_one_step(tmp_path):
    config = buyer_in_every_seat(tmp_path, 3)  # 6 groups a step: 2 scenarios x 3 seats
    rows = training_rows(config, 2, "buyer", ["scripted:prober"], [1.0])
    per_step = config.learner.train.scenarios_per_step
    assert len(rows) == config.learner.steps_per_generation * per_step == 12
    assert all(r.seller == "scripted:prober" and r.buyers == (LEARNER,) * 3 for r in rows)
    assert [r.trained for r in rows[:3]] == ["buyer_1", "buyer_2", "buyer_3"]
    for step in range(2):  # a scenario's seats never straddle two steps
        chunk = rows[step * per_step : (step + 1) * per_step]
        scenarios = [r.scenario.index for r in chunk]
        assert all(scenarios.count(x) == 3 for x in scenarios)
    assert len({r.key for r in rows}) == 12
    # The seller generations around it train on scenarios of their own.
    sellers = [training_rows(config, g, "seller", ["scripted:time"], [1.0]) for g in (1, 3)]
    seller_scenarios = {r.scenario.index for g in sellers for r in g}
    assert seller_scenarios.isdisjoint({r.scenario.index for r in rows})
    with pytest.raises(ValueError, match=r"buyer_seats = 'all' .* = 4\) must be a multiple of 3"):
        buyer_in_every_seat(tmp_path, 2)


def test_the_groups_of_a_step_cycle_through_the_shared_replies_a_scenarios_seats_alike(tmp_path):
    config = buyer_in_every_seat(tmp_path, 3)
    assert {r.shared for r in training_rows(config, 2, "buyer", ["scripted:prober"], [1.0])} == {0}
    side_train = {"buyer": {"shared_replies": [0, 3]}}
    learner = dataclasses.replace(config.learner, side_train=side_train)
    config = dataclasses.replace(config, learner=learner)
    rows = training_rows(config, 2, "buyer", ["scripted:prober"], [1.0])
    assert [r.shared for r in rows] == [0, 0, 0, 3, 3, 3] * 2  # three seats of each scenario
    sellers = training_rows(config, 1, "seller", ["scripted:time"], [1.0])
    assert {r.shared for r in sellers} == {0}  # the buyer's setting only


def test_buyer_credit_reaches_every_buyer_row_whoever_fills_the_other_seats(tmp_path):
    config = buyer_in_every_seat(tmp_path, 3)
    assert {r.credit for r in training_rows(config, 2, "buyer", ["scripted:prober"], [1.0])} == {
        "seat"
    }
    for seats in ("all", "first"):  # the learner everywhere, or in slot 1 beside scripted buyers
        side = dataclasses.replace(config.learner, buyer_credit="side", buyer_seats=seats)
        rows = training_rows(dataclasses.replace(config, learner=side), 2, "buyer", ["x"], [1.0])
        assert {r.credit for r in rows} == {"side"}
    assert {r.buyers[1] for r in rows} <= set(config.buyers)
    with pytest.raises(ValueError, match="buyer_credit must be one of seat, side, got 'team'"):
        dataclasses.replace(side, buyer_credit="team")


def test_a_side_with_more_steps_trains_on_more_scenarios_and_no_generation_shares_one(tmp_path):
    config = buyer_in_every_seat(tmp_path, 3)  # 2 steps a generation, 2 scenarios a step
    learner = dataclasses.replace(config.learner, side_train={"buyer": {"steps_per_generation": 5}})
    config = dataclasses.replace(config, learner=learner)
    steps = (learner.steps_for("buyer"), learner.steps_for("seller"), learner.most_steps)
    assert steps == (5, 2, 5)
    assert learner.steps_through(3) == 2 + 5 + 2  # seller, buyer, seller
    buyer = training_rows(config, 2, "buyer", ["scripted:prober"], [1.0])
    assert len(buyer) == 5 * config.learner.train.scenarios_per_step  # a group per seat
    sellers = [training_rows(config, g, "seller", ["scripted:time"], [1.0]) for g in (1, 3)]
    assert [len(rows) for rows in sellers] == [2 * 6, 2 * 6]
    scenarios = [{r.scenario.index for r in rows} for rows in (sellers[0], buyer, sellers[1])]
    assert sum(map(len, scenarios)) == len(set().union(*scenarios))  # pairwise disjoint
    assert learner.train_for("buyer") == learner.train  # steps are the league's, not TRL's


def test_spare_scenarios_are_one_per_group_and_round_and_never_a_generations_own(tmp_path):
    config = LeagueConfig.from_toml(league_config(tmp_path))
    assert spare_scenarios(config, 1) == []  # dynamic sampling off: no spares
    train = dataclasses.replace(config.learner.train, dynamic_sampling=2)
    config = dataclasses.replace(config, learner=dataclasses.replace(config.learner, train=train))
    first, second = spare_scenarios(config, 1), spare_scenarios(config, 2)
    assert len(first) == len(second) == 2 * 2 * 2  # steps x groups per step x rounds
    rows = [training_rows(config, g, "seller", ["scripted:time"], [1.0]) for g in (1, 2, 3)]
    own = {r.scenario.index for generation in rows for r in generation}
    spare = {s.index for s in first + second}
    assert len(spare) == 16 and spare.isdisjoint(own)
    assert spare_scenarios(config, 1) == first  # seeded: a resume replays the same spares


def test_a_buyer_with_exploring_starts_marks_its_groups_to_explore_and_a_seller_never(tmp_path):
    config = buyer_in_every_seat(tmp_path, 3)
    assert {r.explore for r in training_rows(config, 2, "buyer", ["x"], [1.0])} == {"none"}
    side_train = {"buyer": {"exploring_starts": "move"}}
    learner = dataclasses.replace(config.learner, steer="ladder", ladder=9, side_train=side_train)
    config = dataclasses.replace(config, learner=learner)
    assert {r.explore for r in training_rows(config, 2, "buyer", ["x"], [1.0])} == {"move"}
    assert {r.explore for r in training_rows(config, 1, "seller", ["x"], [1.0])} == {"none"}
