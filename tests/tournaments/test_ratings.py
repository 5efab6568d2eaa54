from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from tournaments.ratings import (
    Rating,
    RatingConfig,
    bradley_terry,
    bradley_terry_ratings,
    compress,
    elo_history,
    elo_ratings,
    unzip_comparisons,
)

NO_BOOTSTRAP = RatingConfig(bootstrap_rounds=0)


def simulate(
    true: np.ndarray, comparisons: int, rng: np.random.Generator, tie_share: float = 0.1
) -> tuple[list[str], list[str], np.ndarray]:
    """Random pairings scored under Bradley-Terry on the default Elo scale. A `tie_share` of
    the scores average two games (0, 0.5 or 1), which keeps the expected score unbiased."""
    n = len(true)
    names = np.array([f"p{k}" for k in range(n)])
    ia = rng.integers(0, n, comparisons)
    ib = (ia + rng.integers(1, n, comparisons)) % n
    p_a = 1.0 / (1.0 + 10.0 ** ((true[ib] - true[ia]) / 400.0))
    first = (rng.random(comparisons) < p_a).astype(float)
    second = (rng.random(comparisons) < p_a).astype(float)
    score = np.where(rng.random(comparisons) < tie_share, (first + second) / 2.0, first)
    return names[ia].tolist(), names[ib].tolist(), score


def by_player(rows: list[Rating]) -> dict[str, Rating]:
    return {row.player: row for row in rows}


def centred(true: np.ndarray, initial: float = 1000.0) -> np.ndarray:
    return true - true.mean() + initial


# compress


def test_compress_counts_games_and_scores_per_pair_with_sorted_players() -> None:
    a = ["b", "a", "a", "c", "b"]
    b = ["a", "b", "c", "a", "a"]
    score = [1.0, 0.5, 0.25, 0.0, 0.0]
    players, wins, games = compress(a, b, score)
    assert players == ["a", "b", "c"]
    np.testing.assert_array_equal(games, [[0, 3, 2], [3, 0, 0], [2, 0, 0]])
    # a vs b: b won once, tie once, a won once (b scored 0) -> a has 0 + 0.5 + 1 = 1.5
    np.testing.assert_allclose(wins, [[0, 1.5, 1.25], [1.5, 0, 0], [0.75, 0, 0]])


def test_compress_scores_of_both_sides_sum_to_games() -> None:
    rng = np.random.default_rng(3)
    a, b, _ = simulate(np.array([1000.0, 1100.0, 900.0, 1200.0, 1050.0]), 5000, rng)
    score = rng.random(5000)  # arbitrary fractional scores
    players, wins, games = compress(a, b, score)
    assert len(players) == 5
    np.testing.assert_allclose(wins + wins.T, games)
    np.testing.assert_array_equal(games, games.T)
    assert np.all(np.diag(games) == 0)
    assert games.sum() == 2 * 5000
    assert wins.sum() == pytest.approx(5000)


def test_compress_accepts_numpy_string_arrays_like_lists() -> None:
    a, b, s = ["x", "y", "z"], ["y", "z", "x"], [1.0, 0.0, 0.5]
    from_lists = compress(a, b, s)
    from_arrays = compress(np.array(a), np.array(b), np.array(s))
    assert from_lists[0] == from_arrays[0]
    np.testing.assert_array_equal(from_lists[1], from_arrays[1])
    np.testing.assert_array_equal(from_lists[2], from_arrays[2])


def test_unzip_comparisons_splits_tuples_into_columns() -> None:
    a, b, s = unzip_comparisons([("x", "y", 1), ("y", "z", 0.5)])
    assert (a, b, s) == (["x", "y"], ["y", "z"], [1.0, 0.5])
    assert unzip_comparisons([]) == ([], [], [])


@pytest.mark.parametrize(
    ("a", "b", "score", "message"),
    [
        (["x"], ["y", "z"], [1.0], "same length"),
        ([], [], [], "no comparisons"),
        (["x", "y"], ["y", "x"], [1.0, 1.5], "comparison 1 has score_a=1.5"),
        (["x"], ["y"], [float("nan")], "must lie in"),
        (["x", "y"], ["y", "y"], [1.0, 0.0], "cannot be compared with itself; comparison 1"),
    ],
)
def test_bad_comparisons_are_rejected_with_the_reason(
    a: list[str], b: list[str], score: list[float], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        compress(a, b, score)


def test_non_string_player_names_are_rejected() -> None:
    with pytest.raises(TypeError, match="must be strings"):
        compress([1, 2], [2, 1], [1.0, 0.0])


# Bradley-Terry point estimates


def test_expected_scores_recover_the_true_ratings_exactly() -> None:
    """One comparison per pair scored with the model probability makes the truth the MLE."""
    true = np.array([1400.0, 1250.0, 1100.0, 1000.0, 950.0, 800.0])
    names = [f"p{k}" for k in range(len(true))]
    a, b, score = [], [], []
    for i in range(len(true)):
        for j in range(i + 1, len(true)):
            a.append(names[i])
            b.append(names[j])
            score.append(1.0 / (1.0 + 10.0 ** ((true[j] - true[i]) / 400.0)))
    players, wins, games = compress(a, b, score)
    fitted = bradley_terry(players, wins, games, NO_BOOTSTRAP)
    np.testing.assert_allclose(fitted, centred(true), atol=1e-3)
    assert fitted.mean() == pytest.approx(1000.0)


def test_simulated_tournament_recovers_known_strengths_and_order() -> None:
    true = np.array([1350.0, 1250.0, 1150.0, 1050.0, 950.0, 850.0, 750.0, 650.0])
    a, b, score = simulate(true, 20_000, np.random.default_rng(7))
    table = bradley_terry_ratings(a, b, score, NO_BOOTSTRAP)
    # About 5,000 games each gives a standard error near 6 Elo; 20 is over 3 of them.
    fitted = np.array([by_player(table)[f"p{k}"].rating for k in range(len(true))])
    assert np.max(np.abs(fitted - centred(true))) < 20.0
    assert [row.player for row in table] == [f"p{k}" for k in range(len(true))]
    assert np.mean(fitted) == pytest.approx(1000.0)


def test_scale_base_and_initial_set_the_units_of_the_ratings() -> None:
    # a beats b 3 times out of 4: natural-log odds ln 3, so the gap is scale * log_base(3).
    a, b, score = ["a"] * 4, ["b"] * 4, [1.0, 1.0, 1.0, 0.0]
    config = RatingConfig(scale=1.0, base=math.e, initial=0.0, bootstrap_rounds=0)
    players, wins, games = compress(a, b, score)
    fitted = bradley_terry(players, wins, games, config)
    assert fitted[0] - fitted[1] == pytest.approx(math.log(3.0), abs=1e-5)
    assert fitted[0] + fitted[1] == pytest.approx(0.0, abs=1e-9)
    default = bradley_terry(players, wins, games, NO_BOOTSTRAP)
    assert default[0] - default[1] == pytest.approx(400.0 * math.log10(3.0), abs=1e-3)


def test_symmetric_round_robin_gives_equal_ratings() -> None:
    names = ["ann", "bob", "cat", "dan", "eve"]
    a, b, score = [], [], []
    for x in names:
        for y in names:
            if x != y:
                a += [x, x]
                b += [y, y]
                score += [1.0, 0.0]
    table = bradley_terry_ratings(a, b, score, RatingConfig(bootstrap_rounds=20))
    for row in table:
        assert row.rating == pytest.approx(1000.0, abs=1e-9)
        assert row.games == 16
        assert row.wins == 8.0
        assert row.ci_low < 1000.0 < row.ci_high


def test_all_ties_give_equal_ratings() -> None:
    a, b = ["x", "y", "z", "x"], ["y", "z", "x", "z"]
    table = bradley_terry_ratings(a, b, [0.5] * 4, NO_BOOTSTRAP)
    assert [row.rating for row in table] == pytest.approx([1000.0] * 3, abs=1e-9)


def test_swapping_sides_and_complementing_scores_leaves_ratings_unchanged() -> None:
    true = np.array([1200.0, 1000.0, 900.0, 1100.0])
    a, b, score = simulate(true, 3000, np.random.default_rng(11))
    config = RatingConfig(bootstrap_rounds=30, seed=5)
    original = bradley_terry_ratings(a, b, score, config)
    swapped = bradley_terry_ratings(b, a, 1.0 - score, config)
    assert [r.player for r in original] == [r.player for r in swapped]
    for x, y in zip(original, swapped, strict=True):
        assert x.rating == pytest.approx(y.rating, abs=1e-9)
        assert x.ci_low == pytest.approx(y.ci_low, abs=1e-9)
        assert x.ci_high == pytest.approx(y.ci_high, abs=1e-9)
        assert (x.games, x.wins) == (y.games, y.wins)


def test_undefeated_and_disconnected_players_get_finite_ratings() -> None:
    # "top" never loses; the pair u/v never meets the others.
    a = ["top", "top", "mid", "mid", "low", "u", "v"]
    b = ["mid", "low", "low", "low", "mid", "v", "u"]
    score = [1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0]
    table = bradley_terry_ratings(a, b, score, RatingConfig(bootstrap_rounds=20))
    rows = by_player(table)
    assert all(math.isfinite(r.rating) and math.isfinite(r.ci_low) for r in table)
    assert rows["top"].rating > rows["mid"].rating > rows["low"].rating
    assert rows["u"].rating > rows["v"].rating
    # Each separate group is centred on the initial rating on its own.
    assert (rows["u"].rating + rows["v"].rating) / 2 == pytest.approx(1000.0, abs=1e-6)
    assert table[0].player == "top"


def test_rating_rows_report_games_and_summed_scores_best_first() -> None:
    a, b, score = ["a", "a", "b", "c"], ["b", "c", "c", "a"], [1.0, 0.5, 0.25, 0.0]
    table = bradley_terry_ratings(a, b, score, NO_BOOTSTRAP)
    rows = by_player(table)
    assert (rows["a"].games, rows["a"].wins) == (3, 2.5)
    assert (rows["b"].games, rows["b"].wins) == (2, 0.25)
    assert (rows["c"].games, rows["c"].wins) == (3, 1.25)
    assert [r.rating for r in table] == sorted((r.rating for r in table), reverse=True)
    assert all(math.isnan(r.ci_low) and math.isnan(r.ci_high) for r in table)


def test_bradley_terry_rejects_inconsistent_count_matrices() -> None:
    players = ["a", "b"]
    games = np.array([[0.0, 2.0], [2.0, 0.0]])
    with pytest.raises(ValueError, match=r"W \+ W.T must equal G"):
        bradley_terry(players, np.array([[0.0, 2.0], [1.0, 0.0]]), games)
    with pytest.raises(ValueError, match="shape"):
        bradley_terry(["a", "b", "c"], np.zeros((2, 2)), games)
    with pytest.raises(ValueError, match="symmetric"):
        bradley_terry(players, np.zeros((2, 2)), np.array([[0.0, 1.0], [2.0, 0.0]]))


def test_fit_that_cannot_converge_names_max_iter() -> None:
    a, b, score = ["a"] * 4, ["b"] * 4, [1.0, 1.0, 1.0, 0.0]
    players, wins, games = compress(a, b, score)
    with pytest.raises(RuntimeError, match="max_iter=1"):
        bradley_terry(players, wins, games, RatingConfig(max_iter=1, tol=1e-12))


# bootstrap intervals


def test_bootstrap_intervals_are_seeded_and_reproducible() -> None:
    a, b, score = simulate(np.array([1100.0, 1000.0, 900.0]), 600, np.random.default_rng(2))
    first = bradley_terry_ratings(a, b, score, RatingConfig(bootstrap_rounds=40, seed=9))
    again = bradley_terry_ratings(a, b, score, RatingConfig(bootstrap_rounds=40, seed=9))
    other = bradley_terry_ratings(a, b, score, RatingConfig(bootstrap_rounds=40, seed=10))
    assert first == again
    assert [r.ci_low for r in first] != [r.ci_low for r in other]


def test_bootstrap_intervals_cover_the_true_ratings_at_about_the_nominal_rate() -> None:
    true = np.array([1200.0, 1100.0, 1000.0, 950.0, 850.0])
    rng = np.random.default_rng(21)
    config = RatingConfig(bootstrap_rounds=60, ci=0.95)
    covered = []
    for dataset in range(40):
        a, b, score = simulate(true, 1500, rng)
        rows = by_player(
            bradley_terry_ratings(a, b, score, dataclasses.replace(config, seed=dataset))
        )
        for k, target in enumerate(centred(true)):
            covered.append(rows[f"p{k}"].ci_low <= target <= rows[f"p{k}"].ci_high)
    rate = float(np.mean(covered))
    # 200 intervals at 95%: far below 0.8 means intervals too narrow, 1.0 means too wide.
    assert 0.8 <= rate < 1.0


def test_intervals_shrink_as_data_grows() -> None:
    true = np.array([1150.0, 1050.0, 1000.0, 900.0])
    config = RatingConfig(bootstrap_rounds=60)
    rng = np.random.default_rng(4)
    small = bradley_terry_ratings(*simulate(true, 1000, rng), config)
    large = bradley_terry_ratings(*simulate(true, 16_000, rng), config)
    small_width = np.mean([r.ci_high - r.ci_low for r in small])
    large_width = np.mean([r.ci_high - r.ci_low for r in large])
    # Width goes as 1 / sqrt(comparisons): 16x the data should give about a quarter.
    assert large_width < small_width / 2.5
    assert all(r.ci_low <= r.rating <= r.ci_high for r in small + large)


# Elo


def test_elo_single_win_between_equals_moves_each_by_half_k() -> None:
    ratings = elo_ratings(["a"], ["b"], [1.0], RatingConfig(elo_k=16.0))
    assert ratings == {"a": pytest.approx(1008.0), "b": pytest.approx(992.0)}


def test_elo_applies_updates_in_the_given_order() -> None:
    config = RatingConfig(elo_k=32.0)
    ratings = elo_ratings(["a", "a"], ["b", "b"], [1.0, 0.0], config)
    # After a wins, a is 1016 and expected to score ~0.546, so losing costs ~17.5.
    expected_a = 1016.0 - 32.0 * (1.0 / (1.0 + 10.0 ** (-32.0 / 400.0)))
    assert ratings["a"] == pytest.approx(expected_a)
    assert ratings["a"] + ratings["b"] == pytest.approx(2000.0)
    reversed_order = elo_ratings(["a", "a"], ["b", "b"], [0.0, 1.0], config)
    assert reversed_order["a"] == pytest.approx(2000.0 - expected_a)


def test_elo_and_bradley_terry_agree_on_order_for_clear_cut_data() -> None:
    true = np.array([1500.0, 1300.0, 1100.0, 900.0, 700.0])
    a, b, score = simulate(true, 4000, np.random.default_rng(13))
    elo = elo_ratings(a, b, score)
    bt = bradley_terry_ratings(a, b, score, NO_BOOTSTRAP)
    elo_order = sorted(elo, key=elo.__getitem__, reverse=True)
    assert elo_order == [row.player for row in bt] == [f"p{k}" for k in range(len(true))]


def test_elo_history_rows_follow_the_comparisons_and_end_at_the_final_ratings() -> None:
    a, b, score = ["a", "b", "a"], ["b", "c", "c"], [1.0, 1.0, 0.5]
    players, history = elo_history(a, b, score)
    assert players == ["a", "b", "c"]
    assert history.shape == (3, 3)
    np.testing.assert_allclose(history[0], [1008.0, 992.0, 1000.0])
    final = elo_ratings(a, b, score)
    np.testing.assert_allclose(history[-1], [final[p] for p in players])
    np.testing.assert_allclose(history.sum(axis=1), 3000.0)
    _, sparse = elo_history(a, b, score, every=2)
    np.testing.assert_allclose(sparse, history[[1, 2]])
    with pytest.raises(ValueError, match="every"):
        elo_history(a, b, score, every=0)


# configuration


@pytest.mark.parametrize(
    ("field_name", "value"),
    [
        ("scale", 0.0),
        ("scale", float("inf")),
        ("base", 1.0),
        ("initial", float("nan")),
        ("bootstrap_rounds", -1),
        ("bootstrap_rounds", 2.5),
        ("ci", 1.0),
        ("ci", 0.0),
        ("seed", -3),
        ("elo_k", 0.0),
        ("max_iter", 0),
        ("tol", 0.0),
        ("l2_prior", 0.0),
    ],
)
def test_invalid_config_names_the_field(field_name: str, value: float) -> None:
    with pytest.raises(ValueError, match=rf"RatingConfig\.{field_name} must be"):
        RatingConfig(**{field_name: value})


# Anchored ratings -----------------------------------------------------------------------------


def test_an_anchor_stays_at_the_initial_rating_when_a_new_player_joins() -> None:
    rng = np.random.default_rng(3)
    a, b, score = simulate(np.array([1000.0, 1100.0, 900.0]), 3000, rng)
    config = RatingConfig(bootstrap_rounds=20, anchor="p0")
    before = by_player(bradley_terry_ratings(a, b, score, config))
    # A strong newcomer that only met p1: the mean-centred fit shifts everyone, the anchor stays.
    newcomer = (["p3"] * 400, ["p1"] * 400, [1.0] * 300 + [0.0] * 100)
    a2, b2, s2 = a + newcomer[0], b + newcomer[1], [*score, *newcomer[2]]
    after = by_player(bradley_terry_ratings(a2, b2, s2, config))
    assert before["p0"].rating == after["p0"].rating == 1000.0
    assert before["p0"].ci_low == before["p0"].ci_high == 1000.0
    assert after["p3"].rating > after["p1"].rating
    centred = by_player(bradley_terry_ratings(a2, b2, s2, NO_BOOTSTRAP))
    assert centred["p0"].rating != pytest.approx(1000.0, abs=1.0)
    assert elo_ratings(a2, b2, s2, config)["p0"] == pytest.approx(1000.0)


def test_rating_differences_do_not_depend_on_the_anchor() -> None:
    rng = np.random.default_rng(4)
    a, b, score = simulate(np.array([950.0, 1000.0, 1200.0, 1050.0]), 2000, rng)
    boards = [
        by_player(bradley_terry_ratings(a, b, score, RatingConfig(bootstrap_rounds=0, anchor=x)))
        for x in ("", "p0", "p2")
    ]
    for board in boards[1:]:
        for p, q in (("p0", "p1"), ("p2", "p3"), ("p1", "p3")):
            assert board[p].rating - board[q].rating == pytest.approx(
                boards[0][p].rating - boards[0][q].rating, abs=1e-9
            )
    assert boards[2]["p2"].rating == 1000.0
    players, history = elo_history(a, b, score, RatingConfig(anchor="p2"), every=500)
    assert np.allclose(history[:, players.index("p2")], 1000.0)


def test_an_anchor_that_never_played_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="anchor 'p9' is not among the rated players"):
        bradley_terry_ratings(["p0"], ["p1"], [1.0], RatingConfig(anchor="p9"))
