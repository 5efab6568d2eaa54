"""Opponent sampling for leagues: meta-solvers, pure numpy functions from the meta-game to a
mixture over the opponents.

A league trains one learner at a time against opponents drawn from the other side's population
(for a seller learner: the buyers; for a buyer learner: the sellers). What the league knows of
the meta-game (:class:`MetaGame`, built from the stored payoff table by :mod:`leagues.metagame`)
goes to a meta-solver, which returns a probability vector over that population, in population
order. :data:`META_SOLVERS` is the registry, a plain dict from name to solver as in OpenSpiel's
PSRO (``[league.learner] opponents`` names one):

* ``uniform``: every opponent equally often (fictitious self-play over the population).
* ``latest``: only the newest member (the last one in population order), as in naive self-play.
* ``pfsp``: prioritised fictitious self-play (AlphaStar, Vinyals et al. 2019): opponent ``j`` gets
  weight ``(1 - p_j) ** 2`` where ``p_j`` is the learner's win rate against it, so opponents the
  learner already beats are rarely drawn and the hard ones often.
* ``nash``: the opponent side of a Nash equilibrium of the empirical meta-game, as PSRO's
  meta-solver (Lanctot et al. 2017).

The negotiation meta-game is not zero-sum: on a deal at a price between cost and list price the
seller's and buyer's rewards sum to one, but a no-deal gives both zero and a violation only
penalises the violator. ``nash`` therefore works on the *learner-side* payoffs only: ``A[i, j]`` is
the mean reward of learner-side agent ``i`` (the learner's earlier checkpoints and the initial
population of its side) against opponent ``j``. It solves the zero-sum game in which the learner
side maximises ``A`` and the opponent side minimises it, by fictitious play (Brown 1951), which
converges in zero-sum games (Robinson 1951). The opponent mixture it returns is the one that holds
the best learner-side agent to the lowest payoff: the robust set of opponents to train against.
The opponents' own rewards do not enter; ``docs/training.md`` discusses the choice.

On a general-sum game that zero-sum reading can put all weight on an opponent that holds the
learner low by not trading at all, from which there is little to learn. :func:`with_exploration`
mixes a share of uniform into any solver's mixture (PSRO's exploration floor), so every opponent
keeps a minimum weight (``[league.learner] opponents_explore``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

UNKNOWN_WIN_RATE = 0.5
"""Win rate assumed against an opponent the learner has never met (PFSP)."""


def uniform_weights(n: int) -> np.ndarray:
    """Every one of ``n`` opponents with probability 1/n."""
    _check_count(n)
    return np.full(n, 1.0 / n)


def latest_weights(n: int) -> np.ndarray:
    """All mass on the newest opponent, the last of ``n`` in population order."""
    _check_count(n)
    weights = np.zeros(n)
    weights[-1] = 1.0
    return weights


def pfsp_weights(win_rates: Sequence[float], power: float = 2.0) -> np.ndarray:
    """AlphaStar's prioritised fictitious self-play: weight ``(1 - p) ** power``, normalised.

    ``win_rates[j]`` is the learner's win rate against opponent ``j`` in [0, 1]; NaN means never
    met and counts as ``UNKNOWN_WIN_RATE``. When the learner beats every opponent always (all
    weights zero) the mixture falls back to uniform rather than to nothing.
    """
    rates = np.asarray(win_rates, dtype=float)
    _check_count(rates.size)
    if rates.ndim != 1:
        raise ValueError(f"win_rates must be a flat sequence, got shape {rates.shape}")
    rates = np.where(np.isnan(rates), UNKNOWN_WIN_RATE, rates)
    if np.any(rates < 0.0) or np.any(rates > 1.0):
        raise ValueError(f"win rates must lie in [0, 1], got {rates.tolist()}")
    if not (np.isfinite(power) and power > 0):
        raise ValueError(f"power must be a positive number, got {power}")
    weights = (1.0 - rates) ** power
    total = weights.sum()
    if total <= 0.0:
        return uniform_weights(rates.size)
    return weights / total


def with_exploration(weights: np.ndarray, share: float) -> np.ndarray:
    """``(1 - share) * weights + share / n``: a meta-solver's mixture with ``share`` of it spread
    evenly, so each of the ``n`` opponents has weight at least ``share / n``."""
    probabilities = np.asarray(weights, dtype=float)
    if probabilities.ndim != 1 or probabilities.size == 0:
        raise ValueError("weights must be a non-empty flat vector")
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"the exploration share must lie in [0, 1], got {share}")
    return (1.0 - share) * probabilities + share / probabilities.size


def fictitious_play(payoff: np.ndarray, iterations: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """Approximate Nash equilibrium of the zero-sum game where rows maximise ``payoff``.

    The first moves are the best responses to a uniform opponent; then each round both players
    best-respond to the other's empirical mixture so far (ties go to the lowest index, so the
    result is deterministic). The empirical mixtures converge to an
    equilibrium (Robinson 1951), with exploitability shrinking roughly like 1/sqrt(iterations).
    Returns (row mixture, column mixture).
    """
    matrix = _check_matrix(payoff)
    if iterations < 1:
        raise ValueError(f"iterations must be >= 1, got {iterations}")
    m, n = matrix.shape
    row_counts = np.zeros(m)
    col_counts = np.zeros(n)
    row_value = np.zeros(m)  # cumulative payoff of each row against the columns played so far
    col_value = np.zeros(n)  # cumulative payoff conceded by each column against the rows so far
    row = int(np.argmax(matrix.mean(axis=1)))
    col = int(np.argmin(matrix.mean(axis=0)))
    for _ in range(iterations):
        row_counts[row] += 1
        col_counts[col] += 1
        row_value += matrix[:, col]
        col_value += matrix[row, :]
        row = int(np.argmax(row_value))
        col = int(np.argmin(col_value))
    return row_counts / iterations, col_counts / iterations


def exploitability(payoff: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> float:
    """How far (rows, cols) is from equilibrium in the zero-sum game: the sum of what a best
    response gains against each side; 0 exactly at a Nash equilibrium."""
    matrix = _check_matrix(payoff)
    x, y = np.asarray(rows, dtype=float), np.asarray(cols, dtype=float)
    return float(np.max(matrix @ y) - np.min(x @ matrix))


def nash_weights(learner_payoffs: np.ndarray, iterations: int = 2000) -> np.ndarray:
    """The opponent mixture of the zero-sum meta-game on learner-side payoffs (module docstring).

    ``learner_payoffs[i, j]``: mean reward of learner-side agent ``i`` against opponent ``j``.
    """
    _, cols = fictitious_play(learner_payoffs, iterations)
    return cols


@dataclass(frozen=True)
class MetaGame:
    """The empirical meta-game a solver reads, over ``n`` opponents in population order."""

    win_rates: np.ndarray
    """The learner's win rate against each opponent in [0, 1]; NaN: never met (PFSP)."""
    learner_payoffs: np.ndarray
    """Mean reward of each learner-side agent (rows) against each opponent (columns); only the
    agents that met every opponent have a row (the Nash solver needs every cell)."""

    @property
    def n(self) -> int:
        return len(self.win_rates)


def uniform_solver(game: MetaGame) -> np.ndarray:
    return uniform_weights(game.n)


def latest_solver(game: MetaGame) -> np.ndarray:
    return latest_weights(game.n)


def pfsp_solver(game: MetaGame) -> np.ndarray:
    return pfsp_weights(game.win_rates)


def nash_solver(game: MetaGame) -> np.ndarray:
    """Nash over the learner-side payoffs; uniform while no learner-side agent met everyone."""
    if game.learner_payoffs.shape[0] == 0:
        return uniform_weights(game.n)
    return nash_weights(game.learner_payoffs)


META_SOLVERS: dict[str, Callable[[MetaGame], np.ndarray]] = {
    "uniform": uniform_solver,
    "latest": latest_solver,
    "pfsp": pfsp_solver,
    "nash": nash_solver,
}
"""Meta-solvers by name: the mixture to draw training opponents from, given the meta-game."""

STRATEGIES = tuple(META_SOLVERS)
"""Opponent sampling strategies a league accepts (``[league.learner] opponents``)."""


def opponent_weights(
    strategy: str,
    n: int,
    win_rates: Sequence[float] | None = None,
    learner_payoffs: np.ndarray | None = None,
) -> np.ndarray:
    """The mixture over ``n`` opponents for ``strategy``: pfsp needs ``win_rates`` (length n),
    nash needs ``learner_payoffs`` (k x n); missing statistics are unknown (NaN, no rows)."""
    if strategy not in META_SOLVERS:
        raise ValueError(
            f"unknown opponent strategy {strategy!r}; use one of {', '.join(STRATEGIES)}"
        )
    if strategy == "pfsp" and (win_rates is None or len(win_rates) != n):
        raise ValueError(f"pfsp needs one win rate per opponent ({n}), got {win_rates!r}")
    if strategy == "nash" and (learner_payoffs is None or np.shape(learner_payoffs)[-1] != n):
        raise ValueError(f"nash needs a payoff matrix with {n} opponent columns")
    rates = np.full(n, np.nan) if win_rates is None else np.asarray(win_rates, dtype=float)
    payoffs = np.zeros((0, n)) if learner_payoffs is None else np.asarray(learner_payoffs)
    return META_SOLVERS[strategy](MetaGame(rates, payoffs))


def sample_indices(rng: np.random.Generator, weights: np.ndarray, count: int) -> np.ndarray:
    """``count`` opponent indices drawn independently from the mixture ``weights``."""
    probabilities = np.asarray(weights, dtype=float)
    if probabilities.ndim != 1 or probabilities.size == 0:
        raise ValueError("weights must be a non-empty flat vector")
    if np.any(probabilities < 0) or not np.isclose(probabilities.sum(), 1.0):
        raise ValueError(f"weights must be non-negative and sum to 1, got {probabilities}")
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    return rng.choice(probabilities.size, size=count, p=probabilities / probabilities.sum())


def _check_count(n: int) -> None:
    if n < 1:
        raise ValueError(f"the opponent population is empty (n={n}); list at least one opponent")


def _check_matrix(payoff: np.ndarray) -> np.ndarray:
    matrix = np.asarray(payoff, dtype=float)
    if matrix.ndim != 2 or matrix.size == 0:
        raise ValueError(f"payoff must be a non-empty 2-D matrix, got shape {matrix.shape}")
    if not np.all(np.isfinite(matrix)):
        raise ValueError(
            "payoff has missing (NaN) or infinite entries; every pair must have played"
        )
    return matrix
