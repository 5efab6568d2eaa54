"""Opponent sampling: PFSP weights, fictitious-play Nash mixtures, draws."""

from __future__ import annotations

import numpy as np
import pytest

from leagues.learner_config import LearnerConfig
from leagues.sampling import (
    META_SOLVERS,
    STRATEGIES,
    MetaGame,
    exploitability,
    fictitious_play,
    latest_weights,
    nash_weights,
    opponent_weights,
    pfsp_weights,
    sample_indices,
    uniform_weights,
    with_exploration,
)


def test_uniform_and_latest_weights_cover_the_population():
    assert uniform_weights(4).tolist() == [0.25] * 4
    assert latest_weights(3).tolist() == [0.0, 0.0, 1.0]


def test_empty_population_is_an_error_naming_the_problem():
    with pytest.raises(ValueError, match="population is empty"):
        uniform_weights(0)


def test_pfsp_weights_are_squared_loss_rates_normalised():
    weights = pfsp_weights([0.0, 0.5, 1.0])
    np.testing.assert_allclose(weights, np.array([1.0, 0.25, 0.0]) / 1.25)


def test_pfsp_counts_unmet_opponents_as_even_and_falls_back_to_uniform():
    np.testing.assert_allclose(pfsp_weights([float("nan"), 0.5]), [0.5, 0.5])
    np.testing.assert_allclose(pfsp_weights([1.0, 1.0, 1.0]), [1 / 3] * 3)


def test_pfsp_rejects_rates_outside_the_unit_interval():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        pfsp_weights([0.2, 1.5])


def test_fictitious_play_solves_matching_pennies_and_rock_paper_scissors():
    pennies = np.array([[1.0, -1.0], [-1.0, 1.0]])
    rows, cols = fictitious_play(pennies, iterations=4000)
    np.testing.assert_allclose(rows, [0.5, 0.5], atol=0.02)
    np.testing.assert_allclose(cols, [0.5, 0.5], atol=0.02)
    rps = np.array([[0.0, -1.0, 1.0], [1.0, 0.0, -1.0], [-1.0, 1.0, 0.0]])
    rows, cols = fictitious_play(rps, iterations=6000)
    np.testing.assert_allclose(cols, [1 / 3] * 3, atol=0.02)
    assert exploitability(rps, rows, cols) < 0.02


def test_exploitability_shrinks_with_more_iterations():
    rng = np.random.default_rng(3)
    payoff = rng.uniform(-1, 1, size=(4, 5))
    short = exploitability(payoff, *fictitious_play(payoff, iterations=20))
    long = exploitability(payoff, *fictitious_play(payoff, iterations=5000))
    assert long < short
    assert long < 0.02


def test_nash_puts_all_mass_on_the_opponent_that_holds_every_learner_lowest():
    # Opponent 1 concedes less than opponent 0 to every learner-side agent: a dominant choice.
    learner_payoffs = np.array([[0.9, 0.3], [0.6, 0.1], [0.7, 0.2]])
    np.testing.assert_allclose(nash_weights(learner_payoffs), [0.0, 1.0])


def test_exploration_gives_every_opponent_a_floor_and_keeps_a_mixture():
    nash = np.array([0.0, 0.0, 1.0, 0.0])
    mixed = with_exploration(nash, 0.5)
    np.testing.assert_allclose(mixed, [0.125, 0.125, 0.625, 0.125])
    assert np.isclose(mixed.sum(), 1.0)
    np.testing.assert_allclose(with_exploration(nash, 0.0), nash)  # 0: the solver's own
    np.testing.assert_allclose(with_exploration(nash, 1.0), [0.25] * 4)  # 1: uniform
    with pytest.raises(ValueError, match=r"exploration share must lie in \[0, 1\], got 1.5"):
        with_exploration(nash, 1.5)


def test_nash_rejects_a_payoff_matrix_with_unplayed_pairs():
    with pytest.raises(ValueError, match="every pair must have played"):
        nash_weights(np.array([[0.1, np.nan]]))


def test_opponent_weights_dispatch_checks_the_inputs_each_strategy_needs():
    np.testing.assert_allclose(opponent_weights("pfsp", 2, win_rates=[1.0, 0.0]), [0.0, 1.0])
    np.testing.assert_allclose(
        opponent_weights("nash", 2, learner_payoffs=np.array([[0.5, 0.1]])), [0.0, 1.0]
    )
    with pytest.raises(ValueError, match="one win rate per opponent"):
        opponent_weights("pfsp", 3, win_rates=[0.5])
    with pytest.raises(ValueError, match="unknown opponent strategy 'best'"):
        opponent_weights("best", 2)


def test_sample_indices_follow_the_weights_and_the_generator():
    weights = np.array([0.1, 0.0, 0.9])
    draws = sample_indices(np.random.default_rng(0), weights, 20000)
    assert 1 not in set(draws.tolist())
    assert abs(np.mean(draws == 2) - 0.9) < 0.01
    again = sample_indices(np.random.default_rng(0), weights, 20000)
    assert draws.tolist() == again.tolist()


def test_every_meta_solver_returns_a_mixture_and_a_registered_one_is_a_valid_setting(
    monkeypatch,
):
    game = MetaGame(np.array([0.2, np.nan, 0.9]), np.array([[0.4, 0.1, 0.3]]))
    assert tuple(META_SOLVERS) == STRATEGIES  # the settings' choices are the registry's names
    for name, solver in META_SOLVERS.items():
        weights = solver(game)
        assert weights.shape == (3,) and np.isclose(weights.sum(), 1.0) and weights.min() >= 0, name
        assert LearnerConfig(model="tiny", opponents=name).opponents == name
    np.testing.assert_allclose(META_SOLVERS["nash"](game), [0.0, 1.0, 0.0])
    np.testing.assert_allclose(
        META_SOLVERS["nash"](MetaGame(game.win_rates, np.zeros((0, 3)))), [1 / 3] * 3
    )
    monkeypatch.setitem(
        META_SOLVERS, "hardest", lambda g: np.eye(g.n)[int(np.nanargmin(g.win_rates))]
    )
    assert LearnerConfig(model="tiny", opponents="hardest").opponents == "hardest"
