"""Matching quality: the optimal assignment against brute force on small random markets."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from arena.matching import (
    gains,
    matching_quality,
    on_optimal_assignment,
    optimal_assignment,
    optimal_pair_share,
    realised_gains,
)


def brute_force(valuations, costs, stock) -> tuple[float, set[tuple[int, int]]]:
    """Best total gains by enumerating every buyer's choice (a product or nothing)."""
    w = gains(valuations, costs)
    n, m = len(valuations), len(costs)
    best, best_pairs = 0.0, set()
    optimal_pairs: set[tuple[int, int]] = set()
    results = []
    for choice in itertools.product(range(-1, m), repeat=n):
        if any(choice.count(p) > stock[p] for p in range(m)):
            continue
        value = round(sum(w[i][p] * 100 for i, p in enumerate(choice) if p >= 0))
        pairs = {(i, p) for i, p in enumerate(choice) if p >= 0 and w[i][p] > 0}
        results.append((value, pairs))
    best = max(v for v, _ in results)
    for value, pairs in results:
        if value == best:
            optimal_pairs |= pairs
    best_pairs = optimal_pairs
    return best / 100, best_pairs


def random_market(rng: np.random.Generator):
    n, m = int(rng.integers(1, 5)), int(rng.integers(1, 4))
    costs = [round(float(c), 2) for c in rng.uniform(5, 50, size=m)]
    valuations = [[round(float(c * rng.uniform(0.6, 1.8)), 2) for c in costs] for _ in range(n)]
    stock = [int(s) for s in rng.integers(1, 3, size=m)]
    return valuations, costs, stock


@pytest.mark.parametrize("seed", range(60))
def test_optimal_assignment_value_equals_brute_force(seed: int) -> None:
    valuations, costs, stock = random_market(np.random.default_rng(seed))
    value, pairs = optimal_assignment(valuations, costs, stock)
    expected, optimal_pairs = brute_force(valuations, costs, stock)
    assert value == pytest.approx(expected, abs=1e-9)
    assert set(pairs) <= optimal_pairs
    assert realised_gains(pairs, valuations, costs) == pytest.approx(expected, abs=1e-9)
    for p in range(len(costs)):
        assert sum(1 for _, q in pairs if q == p) <= stock[p]
    assert len({i for i, _ in pairs}) == len(pairs)  # unit demand


@pytest.mark.parametrize("seed", range(30))
def test_pair_is_on_an_optimal_assignment_exactly_when_brute_force_says_so(seed: int) -> None:
    valuations, costs, stock = random_market(np.random.default_rng(100 + seed))
    _, optimal_pairs = brute_force(valuations, costs, stock)
    for i in range(len(valuations)):
        for p in range(len(costs)):
            assert on_optimal_assignment(i, p, valuations, costs, stock) == (
                (i, p) in optimal_pairs
            )


def test_quality_is_one_on_the_optimal_deals_and_lower_on_a_worse_matching() -> None:
    valuations, costs, stock = [[10.0, 8.0], [9.0, 3.0]], [5.0, 2.0], [1, 1]
    best, pairs = optimal_assignment(valuations, costs, stock)
    assert best == 10.0 and pairs == [(0, 1), (1, 0)]
    assert matching_quality(pairs, valuations, costs, stock) == 1.0
    assert matching_quality([(0, 0)], valuations, costs, stock) == 0.5
    assert optimal_pair_share([(0, 0), (1, 0)], valuations, costs, stock) == 0.5
    assert optimal_pair_share([], valuations, costs, stock) is None


def test_quality_is_undefined_when_no_pair_can_gain() -> None:
    assert matching_quality([], [[4.0]], [5.0], [1]) is None
