"""Ratings recomputed from match records: Bradley-Terry with bootstrap intervals, and online Elo.

Every function here is pure: it takes the full list of comparisons and returns ratings, so a
leaderboard can always be rebuilt from the tournament store without hidden state.

A comparison is ``(player_a, player_b, score_a)`` with ``score_a`` in [0, 1]: 1 means a won,
0 means b won, 0.5 is a tie, and any other fraction is a partial win (used for cross-role
scores). Under the Bradley-Terry model a fractional score counts as that fraction of a win for
a and the rest for b, so a tie is half a win each.

Ratings use the Elo scale: a gap of ``scale`` points means the stronger player is expected to
score ``base`` times as often as the weaker one, i.e.
``P(a beats b) = 1 / (1 + base ** ((R_b - R_a) / scale))``.
Internally the fit works with natural-log strengths ``theta``; ``R = initial + theta * scale /
ln(base)``.

Only differences are identified, so the scale needs a fixed point. Without an ``anchor`` the
ratings average ``initial`` and every new player shifts everyone (a league's curves drift); with
one, that player is pinned at ``initial`` in the fit, in every bootstrap resample and in online
Elo: a new player leaves it in place, and differences do not depend on the anchor chosen.

Fitting choice: Newton's method on the logistic log-likelihood of the count matrices, with a
tiny L2 prior ``l2_prior * theta**2 / 2`` (default 1e-6). The prior makes the problem strictly
convex, so players who never lost (whose maximum-likelihood strength is infinite) and separate
groups of players who never met still get finite, reproducible ratings; with any realistic
amount of data it moves ordinary ratings by far less than 0.01 Elo. A player who never lost
ends up a few thousand points above the field (only the order is meaningful there), and each
group of players that never met another group is centred on ``initial`` on its own, so ratings
across such groups cannot be compared. A backtracking line search keeps the Newton steps safe
when they start far from the optimum.

The bootstrap resamples whole comparisons with replacement, but does so on the distinct
``(pair, score)`` cells: one multinomial draw over the cells, weighted by how many comparisons
each cell holds, is the same distribution as resampling the comparisons one by one, and costs
O(cells) instead of O(comparisons) per round.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from arena.settings import check_positive_int


@dataclass(frozen=True)
class RatingConfig:
    """Settings shared by the Bradley-Terry fit, its bootstrap, and online Elo."""

    scale: float = field(
        default=400.0,
        metadata={"help": "Elo points for which the stronger player scores `base` times as often"},
    )
    base: float = field(default=10.0, metadata={"help": "odds ratio per `scale` points; > 1"})
    initial: float = field(
        default=1000.0,
        metadata={
            "help": "starting Elo rating, and the Bradley-Terry fixed point: the anchor's rating, "
            "or the ratings' mean when there is no anchor"
        },
    )
    bootstrap_rounds: int = field(
        default=200,
        metadata={"help": "bootstrap resamples for the intervals; 0 skips them (bounds are NaN)"},
    )
    ci: float = field(default=0.95, metadata={"help": "coverage of the percentile interval"})
    seed: int = field(default=0, metadata={"help": "seed of the bootstrap random generator"})
    elo_k: float = field(default=16.0, metadata={"help": "online Elo update step K"})
    max_iter: int = field(
        default=100, metadata={"help": "most Newton iterations per Bradley-Terry fit"}
    )
    tol: float = field(
        default=1e-6,
        metadata={"help": "the fit stops once no rating moves more than tol Elo points in a step"},
    )
    anchor: str = field(
        default="",
        metadata={
            "help": "player pinned at `initial` (e.g. a scripted reference agent); empty: the "
            "ratings average `initial`"
        },
    )
    l2_prior: float = field(
        default=1e-6,
        metadata={
            "help": "weight of the L2 prior on natural-log strengths; keeps undefeated and "
            "disconnected players finite; must be > 0"
        },
    )

    def __post_init__(self) -> None:
        _require(math.isfinite(self.scale) and self.scale > 0, "scale", self.scale, "> 0")
        _require(math.isfinite(self.base) and self.base > 1, "base", self.base, "> 1")
        _require(math.isfinite(self.initial), "initial", self.initial, "a finite number")
        _require(
            _is_int(self.bootstrap_rounds) and self.bootstrap_rounds >= 0,
            "bootstrap_rounds",
            self.bootstrap_rounds,
            "an integer >= 0",
        )
        _require(0 < self.ci < 1, "ci", self.ci, "strictly between 0 and 1, e.g. 0.95")
        _require(_is_int(self.seed) and self.seed >= 0, "seed", self.seed, "an integer >= 0")
        _require(math.isfinite(self.elo_k) and self.elo_k > 0, "elo_k", self.elo_k, "> 0")
        _require(_is_int(self.max_iter) and self.max_iter >= 1, "max_iter", self.max_iter, ">= 1")
        _require(math.isfinite(self.tol) and self.tol > 0, "tol", self.tol, "> 0 (Elo points)")
        _require(
            math.isfinite(self.l2_prior) and self.l2_prior > 0,
            "l2_prior",
            self.l2_prior,
            "> 0 (it keeps undefeated players finite); use a tiny value such as 1e-6",
        )

    @property
    def elo_per_nat(self) -> float:
        """Elo points per unit of natural-log strength."""
        return self.scale / math.log(self.base)


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _require(ok: bool, name: str, value: object, expected: str) -> None:
    if not ok:
        raise ValueError(f"RatingConfig.{name} must be {expected}; got {value!r}")


@dataclass(frozen=True)
class Rating:
    """One leaderboard row: a Bradley-Terry rating with its bootstrap interval."""

    player: str
    rating: float
    ci_low: float
    ci_high: float
    games: int
    wins: float  # sum of the player's scores, ties counting 0.5


def unzip_comparisons(
    records: Iterable[tuple[str, str, float]],
) -> tuple[list[str], list[str], list[float]]:
    """Turn ``[(player_a, player_b, score_a), ...]`` into the three columns the rating
    functions take."""
    rows = list(records)
    if not rows:
        return [], [], []
    a, b, score = zip(*rows, strict=True)
    return list(a), list(b), [float(x) for x in score]


def _encode(
    a: Sequence[str], b: Sequence[str], score_a: Sequence[float]
) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """Validate comparisons and map names to indices into the sorted player list."""
    names_a = np.asarray(a)
    names_b = np.asarray(b)
    score = np.asarray(score_a, dtype=float)
    for label, arr in (("a", names_a), ("b", names_b), ("score_a", score)):
        if arr.ndim != 1:
            raise ValueError(f"{label} must be one-dimensional; got shape {arr.shape}")
    m = len(score)
    if not len(names_a) == len(names_b) == m:
        raise ValueError(
            f"a, b and score_a must have the same length; got {len(names_a)}, "
            f"{len(names_b)} and {m}"
        )
    if m == 0:
        raise ValueError("no comparisons given; ratings need at least one")
    for label, arr in (("a", names_a), ("b", names_b)):
        if arr.dtype.kind not in "US":
            raise TypeError(f"player names in {label} must be strings; got dtype {arr.dtype}")
    bad = np.flatnonzero(~(np.isfinite(score) & (score >= 0) & (score <= 1)))
    if bad.size:
        k = int(bad[0])
        raise ValueError(
            f"score_a must lie in [0, 1]; comparison {k} has score_a={float(score[k])!r} "
            f"({bad.size} bad in total)"
        )
    players, inverse = np.unique(np.concatenate([names_a, names_b]), return_inverse=True)
    ia, ib = inverse[:m], inverse[m:]
    same = np.flatnonzero(ia == ib)
    if same.size:
        k = int(same[0])
        raise ValueError(
            f"a player cannot be compared with itself; comparison {k} has "
            f"a == b == {str(names_a[k])!r} ({same.size} such comparisons)"
        )
    return [str(p) for p in players.tolist()], ia, ib, score


def _cells(
    ia: np.ndarray, ib: np.ndarray, score: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Group comparisons into distinct cells (i < j, score of i) with their counts."""
    swap = ia > ib
    i = np.where(swap, ib, ia)
    j = np.where(swap, ia, ib)
    s = np.where(swap, 1.0 - score, score)
    values, code = np.unique(s, return_inverse=True)
    key = (i.astype(np.int64) * n + j) * len(values) + code
    cell_keys, counts = np.unique(key, return_counts=True)
    pair, code = np.divmod(cell_keys, len(values))
    cell_i, cell_j = np.divmod(pair, n)
    return cell_i, cell_j, values[code], counts.astype(float)


def _count_matrices(
    cell_i: np.ndarray, cell_j: np.ndarray, cell_s: np.ndarray, counts: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Score matrix W and games matrix G from weighted cells."""
    upper = cell_i * n + cell_j
    lower = cell_j * n + cell_i
    size = n * n
    games = np.bincount(upper, counts, size) + np.bincount(lower, counts, size)
    wins = np.bincount(upper, counts * cell_s, size) + np.bincount(
        lower, counts * (1.0 - cell_s), size
    )
    return wins.reshape(n, n), games.reshape(n, n)


def compress(
    a: Sequence[str], b: Sequence[str], score_a: Sequence[float]
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Reduce comparisons to ``(players, W, G)``.

    ``players`` is sorted; ``G[i, j]`` counts comparisons between players i and j (symmetric,
    zero diagonal) and ``W[i, j]`` is the total score of i against j, so ``W + W.T == G``.
    """
    players, ia, ib, score = _encode(a, b, score_a)
    n = len(players)
    wins, games = _count_matrices(*_cells(ia, ib, score, n), n)
    return players, wins, games


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -x))


def _objective(theta: np.ndarray, wins: np.ndarray, l2: float) -> float:
    """Negative penalised log-likelihood: -sum W_ij log sigmoid(theta_i - theta_j) + prior."""
    diff = theta[:, None] - theta[None, :]
    return float(np.sum(wins * np.logaddexp(0.0, -diff)) + 0.5 * l2 * theta @ theta)


def _fit(
    wins: np.ndarray, games: np.ndarray, theta: np.ndarray, config: RatingConfig
) -> np.ndarray:
    """Newton's method with backtracking for the penalised Bradley-Terry MLE (natural-log
    strengths, mean zero)."""
    l2 = config.l2_prior
    tol_nat = config.tol / config.elo_per_nat
    n = len(theta)
    theta = theta.copy()
    value = _objective(theta, wins, l2)
    for _ in range(config.max_iter):
        # q[i, j] is the model probability that j beats i; using it for both directions
        # avoids the cancellation in W_ij - G_ij * p_ij when p_ij is close to 1.
        q = _sigmoid(theta[None, :] - theta[:, None])
        flow = wins * q
        grad = flow.sum(axis=0) - flow.sum(axis=1) + l2 * theta
        weight = games * q * q.T
        hessian = -weight
        hessian[np.diag_indices(n)] = weight.sum(axis=1) + l2
        step = -np.linalg.solve(hessian, grad)
        slope = float(grad @ step)
        if np.max(np.abs(step)) < tol_nat or -slope < 1e-13 * (1.0 + abs(value)):
            return theta + step - np.mean(theta + step)
        t = 1.0
        for _halving in range(60):
            candidate = theta + t * step
            candidate_value = _objective(candidate, wins, l2)
            if candidate_value <= value + 1e-4 * t * slope:
                break
            t *= 0.5
        else:
            raise RuntimeError(
                "Bradley-Terry line search failed to decrease the objective; "
                "check W and G for NaN or negative entries"
            )
        theta, value = candidate, candidate_value
    raise RuntimeError(
        f"Bradley-Terry fit did not converge in RatingConfig.max_iter={config.max_iter} "
        f"iterations to RatingConfig.tol={config.tol} Elo; raise max_iter or tol"
    )


def _anchor_shift(theta: np.ndarray, players: Sequence[str], config: RatingConfig) -> np.ndarray:
    """``theta`` (one row per fit) moved so that the anchor's strength is 0 (module docstring);
    unchanged without an anchor."""
    if not config.anchor:
        return theta
    if config.anchor not in players:
        raise ValueError(
            f"RatingConfig.anchor {config.anchor!r} is not among the rated players; choose one "
            f"of {', '.join(players)}"
        )
    k = list(players).index(config.anchor)
    return theta - theta[..., k : k + 1]


def _check_matrices(players: Sequence[str], wins: np.ndarray, games: np.ndarray) -> None:
    n = len(players)
    if n < 2:
        raise ValueError(f"Bradley-Terry needs at least 2 players; got {n}")
    for label, mat in (("W", wins), ("G", games)):
        if mat.shape != (n, n):
            raise ValueError(
                f"{label} must have shape ({n}, {n}) to match players; got {mat.shape}"
            )
        if not np.all(np.isfinite(mat)) or np.any(mat < 0):
            raise ValueError(f"{label} must be finite and non-negative")
    if not np.allclose(games, games.T):
        raise ValueError("G must be symmetric: G[i, j] counts comparisons between i and j")
    if np.any(np.diag(games) != 0):
        raise ValueError("G must have a zero diagonal: a player cannot play itself")
    if not np.allclose(wins + wins.T, games):
        raise ValueError("W + W.T must equal G: each comparison's scores for both sides sum to 1")


def bradley_terry(
    players: Sequence[str], W: np.ndarray, G: np.ndarray, config: RatingConfig = RatingConfig()
) -> np.ndarray:
    """Maximum-likelihood Bradley-Terry ratings on the Elo scale, in ``players`` order, with
    mean ``config.initial`` (see the module docstring for the L2 prior)."""
    wins = np.asarray(W, dtype=float)
    games = np.asarray(G, dtype=float)
    _check_matrices(players, wins, games)
    theta = _anchor_shift(_fit(wins, games, np.zeros(len(players)), config), players, config)
    return config.initial + config.elo_per_nat * theta


def _bootstrap(
    cells: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    players: Sequence[str],
    theta: np.ndarray,
    config: RatingConfig,
) -> np.ndarray:
    """Bradley-Terry ratings refitted on ``bootstrap_rounds`` resamples; shape (rounds, n)."""
    cell_i, cell_j, cell_s, counts = cells
    total = int(counts.sum())
    probabilities = counts / total
    rng = np.random.default_rng(config.seed)
    n = len(players)
    samples = np.empty((config.bootstrap_rounds, n))
    for r in range(config.bootstrap_rounds):
        drawn = rng.multinomial(total, probabilities).astype(float)
        wins, games = _count_matrices(cell_i, cell_j, cell_s, drawn, n)
        samples[r] = _fit(wins, games, theta, config)
    return config.initial + config.elo_per_nat * _anchor_shift(samples, players, config)


def bradley_terry_ratings(
    a: Sequence[str],
    b: Sequence[str],
    score_a: Sequence[float],
    config: RatingConfig = RatingConfig(),
) -> list[Rating]:
    """Bradley-Terry leaderboard with bootstrap percentile intervals, best first.

    Intervals come from ``config.bootstrap_rounds`` resamples of the comparisons drawn with a
    generator seeded by ``config.seed``; with 0 rounds the bounds are NaN.
    """
    players, ia, ib, score = _encode(a, b, score_a)
    n = len(players)
    cells = _cells(ia, ib, score, n)
    wins, games = _count_matrices(*cells, n)
    theta = _fit(wins, games, np.zeros(n), config)
    point = config.initial + config.elo_per_nat * _anchor_shift(theta, players, config)
    if config.bootstrap_rounds > 0:
        samples = _bootstrap(cells, players, theta, config)
        tail = (1.0 - config.ci) / 2.0
        low, high = np.quantile(samples, [tail, 1.0 - tail], axis=0)
    else:
        low = high = np.full(n, np.nan)
    rows = [
        Rating(
            player=players[k],
            rating=float(point[k]),
            ci_low=float(low[k]),
            ci_high=float(high[k]),
            games=round(games[k].sum()),
            wins=float(wins[k].sum()),
        )
        for k in range(n)
    ]
    return sorted(rows, key=lambda row: (-row.rating, row.player))


def _elo_run(
    a: Sequence[str],
    b: Sequence[str],
    score_a: Sequence[float],
    config: RatingConfig,
    every: int,
) -> tuple[list[str], list[float], list[list[float]]]:
    """Online Elo over the comparisons in order; snapshots after every ``every``-th one
    (``every=0`` records none)."""
    players, ia, ib, score = _encode(a, b, score_a)
    ratings = [config.initial] * len(players)
    per_point = math.log(config.base) / config.scale
    k_factor = config.elo_k
    history: list[list[float]] = []
    for t, (i, j, s) in enumerate(zip(ia.tolist(), ib.tolist(), score.tolist(), strict=True)):
        # Clamping the exponent only matters for absurd gaps and avoids OverflowError.
        x = min(700.0, max(-700.0, (ratings[j] - ratings[i]) * per_point))
        delta = k_factor * (s - 1.0 / (1.0 + math.exp(x)))
        ratings[i] += delta
        ratings[j] -= delta
        if every and (t + 1) % every == 0:
            history.append(list(ratings))
    if every and len(score) % every:
        history.append(list(ratings))
    return players, ratings, history


def elo_ratings(
    a: Sequence[str],
    b: Sequence[str],
    score_a: Sequence[float],
    config: RatingConfig = RatingConfig(),
) -> dict[str, float]:
    """Online Elo with step ``config.elo_k``, applied in the given (episode) order; keys are
    the players sorted by name."""
    players, ratings, _ = _elo_run(a, b, score_a, config, every=0)
    if config.anchor:
        shifted = _anchor_shift(np.asarray(ratings), players, config) + config.initial
        ratings = shifted.tolist()
    return dict(zip(players, ratings, strict=True))


def elo_history(
    a: Sequence[str],
    b: Sequence[str],
    score_a: Sequence[float],
    config: RatingConfig = RatingConfig(),
    every: int = 1,
) -> tuple[list[str], np.ndarray]:
    """Elo ratings over time, for plots: ``(players, history)`` where ``history[t]`` holds
    every player's rating after comparison ``(t + 1) * every`` (the last row is always the
    final ratings). Use a larger ``every`` for long runs: the array is rows x players."""
    check_positive_int("", "every", every)
    players, _, history = _elo_run(a, b, score_a, config, every=every)
    if config.anchor:
        return players, _anchor_shift(np.asarray(history), players, config) + config.initial
    return players, np.asarray(history)
