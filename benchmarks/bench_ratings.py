"""Time Bradley-Terry ratings with bootstrap intervals on a large simulated tournament.

Run: python benchmarks/bench_ratings.py --players 100 --comparisons 1000000 --rounds 200
Comparisons are simulated under a Bradley-Terry model (10% of them are the average of two games,
so 0.5 scores occur without biasing the expected score) and passed as Python lists,
the way they come out of the tournament store. The one-line summary gives the seconds for
`compress`, for `bradley_terry` on the compressed counts, for the bootstrap refits alone (the
module's private `_cells` and `_bootstrap`, timed apart because the public call does all three),
and for one full `bradley_terry_ratings` call, which is what a leaderboard pays.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from tournaments.ratings import (
    RatingConfig,
    _bootstrap,
    _cells,
    _encode,
    bradley_terry,
    bradley_terry_ratings,
    compress,
)


def simulate(
    players: int, comparisons: int, seed: int
) -> tuple[list[str], list[str], list[float], np.ndarray]:
    """Random pairings scored under Bradley-Terry with true ratings ~ N(1000, 200); a tenth of
    the scores average two games, so their expectation stays the Bradley-Terry probability."""
    rng = np.random.default_rng(seed)
    names = np.array([f"agent_{k:03d}" for k in range(players)])
    true = 1000.0 + 200.0 * rng.standard_normal(players)
    ia = rng.integers(0, players, comparisons)
    ib = (ia + rng.integers(1, players, comparisons)) % players
    p_a = 1.0 / (1.0 + 10.0 ** ((true[ib] - true[ia]) / 400.0))
    first = (rng.random(comparisons) < p_a).astype(float)
    second = (rng.random(comparisons) < p_a).astype(float)
    score = np.where(rng.random(comparisons) < 0.1, (first + second) / 2.0, first)
    return names[ia].tolist(), names[ib].tolist(), score.tolist(), true


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--players", type=int, default=100)
    parser.add_argument("--comparisons", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    a, b, score, true = simulate(args.players, args.comparisons, args.seed)
    config = RatingConfig(bootstrap_rounds=args.rounds, seed=args.seed)

    start = time.perf_counter()
    players, wins, games = compress(a, b, score)
    compress_s = time.perf_counter() - start

    start = time.perf_counter()
    fitted = bradley_terry(players, wins, games, config)
    fit_s = time.perf_counter() - start

    _, ia, ib, encoded = _encode(a, b, score)
    start = time.perf_counter()
    cells = _cells(ia, ib, encoded, len(players))
    theta = (fitted - config.initial) / config.elo_per_nat
    _bootstrap(cells, len(players), theta, config)
    bootstrap_s = time.perf_counter() - start

    start = time.perf_counter()
    table = bradley_terry_ratings(a, b, score, config)
    total_s = time.perf_counter() - start

    centred_true = true - true.mean() + config.initial
    max_error = float(np.max(np.abs(fitted - centred_true)))
    mean_width = float(np.mean([row.ci_high - row.ci_low for row in table]))
    print(
        f"players={args.players} comparisons={args.comparisons} rounds={args.rounds} "
        f"compress={compress_s:.2f}s fit={fit_s:.3f}s "
        f"bootstrap={bootstrap_s:.2f}s total={total_s:.2f}s "
        f"max_abs_error={max_error:.1f}elo mean_ci_width={mean_width:.1f}elo"
    )


if __name__ == "__main__":
    main()
