"""The league's meta-game: statistics from the stored payoff table, equal to a rescan of the
records, and the meta-solver's opponent mixture over the other side's population."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from arena.buyer_metrics import episode_buyer_side_reward
from arena.metrics import episode_cross_score
from arena.records import EpisodeRecord
from leagues.metagame import PayoffTable, opponent_mixture, population
from tests.leagues.leagues import scripted_store


def rescanned(records: list[EpisodeRecord], role: str, agent: str, opponent: str) -> tuple:
    """(win rate, mean reward) of ``agent`` against ``opponent``, read off every record."""
    seller, buyer = (agent, opponent) if role == "seller" else (opponent, agent)
    met = [r for r in records if r.seller == seller and set(r.buyers) == {buyer}]
    scores = [episode_cross_score(r) for r in met]
    rewards = [r.result.seller_reward if role == "seller" else episode_buyer_side_reward(r)
               for r in met]  # fmt: skip
    share = math.fsum(scores) / len(scores)
    return (share if role == "seller" else 1 - share), math.fsum(rewards) / len(rewards)


def test_win_rates_and_payoffs_of_the_payoff_table_equal_a_rescan_of_the_records(tmp_path):
    store, config = scripted_store(tmp_path)
    records = store.load_records()
    assert len(records) == 2 * 2 * config.learner.eval_episodes
    table = PayoffTable.of_league(store, config.name)
    for seller in config.sellers:
        for buyer in config.buyers:
            rate, reward = rescanned(records, "seller", seller, buyer)
            assert table.win_rate("seller", seller, buyer) == pytest.approx(rate)
            assert table.mean_reward("seller", seller, buyer) == pytest.approx(reward)
            buyer_rate, buyer_reward = rescanned(records, "buyer", buyer, seller)
            assert table.win_rate("buyer", buyer, seller) == pytest.approx(buyer_rate)
            assert table.mean_reward("buyer", buyer, seller) == pytest.approx(buyer_reward)
            assert math.isclose(rate + buyer_rate, 1.0)
    assert math.isnan(table.win_rate("seller", "scripted:prober", "scripted:hardliner"))
    payoffs = table.learner_payoffs(
        "seller", ["scripted:prober", "nobody"], ["scripted:time", "scripted:tit-for-tat"]
    )
    assert payoffs.shape == (1, 2)  # the row of an agent that never played is left out
    assert payoffs[0, 1] == pytest.approx(
        rescanned(records, "seller", "scripted:prober", "scripted:tit-for-tat")[1]
    )
    store.close()


def test_the_mixture_is_the_meta_solvers_over_the_other_sides_population(tmp_path):
    store, config = scripted_store(tmp_path)
    opponents, weights = opponent_mixture(store, config, "seller", "scripted:prober")
    assert [m.spec for m in opponents] == list(config.buyers)
    assert [m.spec for m in population(store, config, "buyer")] == list(config.buyers)
    table = PayoffTable.of_league(store, config.name)
    rates = [table.win_rate("seller", "scripted:prober", b) for b in config.buyers]
    expected = np.array([(1 - r) ** 2 for r in rates])
    np.testing.assert_allclose(weights, expected / expected.sum())  # pfsp, the config's
    store.close()


def test_a_side_draws_its_opponents_by_its_own_meta_solver_and_the_other_by_the_leagues(tmp_path):
    store, config = scripted_store(tmp_path)
    learner = dataclasses.replace(
        config.learner, side="both", side_train={"seller": {"opponents": "uniform"}}
    )
    config = dataclasses.replace(config, learner=learner)
    assert (learner.opponents_for("seller"), learner.opponents_for("buyer")) == ("uniform", "pfsp")
    _, seller_weights = opponent_mixture(store, config, "seller", "scripted:prober")
    np.testing.assert_allclose(seller_weights, [1 / len(config.buyers)] * len(config.buyers))
    table = PayoffTable.of_league(store, config.name)
    league_rates = [table.win_rate("seller", "scripted:prober", b) for b in config.buyers]
    league_mix = np.array([(1 - r) ** 2 for r in league_rates])
    assert not np.allclose(league_mix / league_mix.sum(), seller_weights)  # the override mattered
    buyer = config.buyers[0]
    _, buyer_weights = opponent_mixture(store, config, "buyer", buyer)
    expected = np.array([(1 - table.win_rate("buyer", buyer, s)) ** 2 for s in config.sellers])
    assert not np.allclose(expected / expected.sum(), 1 / len(config.sellers))  # not uniform
    np.testing.assert_allclose(buyer_weights, expected / expected.sum())  # pfsp, the league's
    store.close()


def test_a_sides_exploration_share_floors_its_meta_solvers_mixture(tmp_path):
    store, config = scripted_store(tmp_path)
    solo = dataclasses.replace(
        config.learner, side="both", side_train={"seller": {"opponents": "latest"}}
    )
    explored = dataclasses.replace(
        solo, side_train={"seller": {"opponents": "latest", "opponents_explore": 0.5}}
    )
    n = len(config.buyers)
    _, latest = opponent_mixture(store, dataclasses.replace(config, learner=solo), "seller", "x")
    _, mixed = opponent_mixture(store, dataclasses.replace(config, learner=explored), "seller", "x")
    np.testing.assert_allclose(latest, [0.0] * (n - 1) + [1.0])
    np.testing.assert_allclose(mixed, [0.5 / n] * (n - 1) + [0.5 + 0.5 / n])
    config = dataclasses.replace(config, learner=explored)
    assert explored.opponents_explore_for("buyer") == 0.0  # the buyer keeps the league's
    _, buyer = opponent_mixture(store, config, "buyer", config.buyers[0])
    _, league = opponent_mixture(
        store, dataclasses.replace(config, learner=solo), "buyer", config.buyers[0]
    )
    np.testing.assert_allclose(buyer, league)
    store.close()


def test_a_side_drawing_from_scripted_opponents_never_trains_against_a_checkpoint(tmp_path):
    store, config = scripted_store(tmp_path)
    learner = dataclasses.replace(
        config.learner,
        side="both",
        side_train={"buyer": {"opponents": "uniform", "opponents_from": "scripted"}},
    )
    assert learner.opponent_rule("buyer") == "uniform over scripted"
    mixed = dataclasses.replace(
        config, learner=learner, sellers=(*config.sellers, "hf:models/c", "hf:models/d")
    )
    sellers, weights = opponent_mixture(store, mixed, "buyer", config.buyers[0])
    assert [m.spec for m in sellers] == list(mixed.sellers)  # the population stays whole
    scripted = len(config.sellers)
    assert weights == [1 / scripted] * scripted + [0.0, 0.0]
    _, seller_weights = opponent_mixture(store, mixed, "seller", "hf:models/c")
    assert min(seller_weights) > 0  # the other side keeps the league's pool, all
    models_only = dataclasses.replace(mixed, sellers=("hf:models/c", "hf:models/d"))
    _, fallback = opponent_mixture(store, models_only, "buyer", config.buyers[0])
    assert fallback == [0.5, 0.5]  # no scripted seller: all, rather than nothing to draw
    store.close()


def test_a_side_drawing_from_models_never_meets_a_scripted_opponent_until_there_is_no_model(
    tmp_path,
):
    store, config = scripted_store(tmp_path)
    models = ("hf:models/a", "hf:models/b")  # fixed model buyers, never evaluated here
    learner = dataclasses.replace(
        config.learner,
        side="both",
        side_train={"seller": {"opponents": "uniform", "opponents_from": "models"}},
    )
    assert learner.opponent_rule("seller") == "uniform over models"
    scripted_only = dataclasses.replace(config, learner=learner)
    opponents, weights = opponent_mixture(store, scripted_only, "seller", "scripted:prober")
    np.testing.assert_allclose(weights, [1 / len(config.buyers)] * len(config.buyers))  # all
    mixed = dataclasses.replace(
        scripted_only, buyers=(*config.buyers, *models), sellers=(*config.sellers, "hf:models/c")
    )
    opponents, weights = opponent_mixture(store, mixed, "seller", "scripted:prober")
    assert [m.spec for m in opponents] == [*config.buyers, *models]  # the population stays whole
    assert weights == [0.0] * len(config.buyers) + [0.5, 0.5]
    sellers, buyer_weights = opponent_mixture(store, mixed, "buyer", config.buyers[0])
    assert sellers[-1].spec == "hf:models/c"  # a model seller there, so "models" would drop
    assert min(buyer_weights) > 0  # the scripted ones: the buyer keeps the league's pool, all
    store.close()
