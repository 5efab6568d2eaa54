"""tournaments.plots: error bars from intervals that may exclude the point, and a plot that
fails is a note on the page, never a failed run."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tournaments.plots import drawn, interval_bars


def test_an_interval_that_excludes_its_point_gives_a_zero_bar_never_a_negative_one():
    rows = [
        {"rating": 1000.0, "ci_low": 950.0, "ci_high": 1075.0},
        {"rating": -1536.0, "ci_low": -1500.0, "ci_high": -1459.0},  # the point below the interval
        {"rating": 800.0, "ci_low": None, "ci_high": math.nan},
    ]
    low, high = interval_bars(rows)
    assert low == [50.0, 0.0, 0.0]
    assert high == [75.0, 77.0, 0.0]


def test_a_plot_that_fails_becomes_a_note_naming_the_error(tmp_path: Path):
    def broken() -> None:
        raise ValueError("'yerr' must not contain negative values")

    image, note = drawn(tmp_path / "x.png", broken)
    assert image is None
    assert "plot not drawn: ValueError: 'yerr' must not contain negative values" in note


def test_a_plot_that_draws_returns_its_path_and_no_note(tmp_path: Path):
    pytest.importorskip("matplotlib", reason="the report extra draws with matplotlib")
    from tournaments.plots import plot_leaderboard

    path = tmp_path / "board.png"
    rows = [{"agent": "a", "role": "seller", "rating": 1000.0, "ci_low": 1010.0, "ci_high": 990.0}]
    assert drawn(path, lambda: plot_leaderboard({"seller": rows}, path)) == (path, "")
    assert path.read_bytes().startswith(b"\x89PNG")
