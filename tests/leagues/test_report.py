"""The league report's training section tells the paper's story: one row of curves per training
phase, every training metric of the registry drawn, and a verdict per phase (visible or not)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from arena import metrics
from leagues.config import LeagueConfig
from leagues.league import run_league
from leagues.report import CURVES, PANEL_ROWS, PHASES, league_sections, phases_text, trend
from leagues.state import record_step, training_steps
from tests.leagues.leagues import league_config
from tournaments.store import Store


def test_the_panels_are_the_registrys_training_metrics_and_reward_by_phase():
    phase_rows = PANEL_ROWS[: len(PHASES)]
    drawn = {column for row in phase_rows for column, _ in row}
    assert drawn == {m.name for m in metrics.group(metrics.TRAINING)} | {"reward"}
    for phase, row in zip(PHASES, phase_rows, strict=True):
        assert {metrics.METRICS[column].phase for column, _ in row} == {phase}
    assert ("zero_advantage_groups", "Zero-advantage groups (equal rewards)") in CURVES


def test_a_trend_compares_the_first_and_last_quarter_of_the_steps():
    assert trend([1.0, 0.9, 0.5, 0.2, 0.1, 0.1, 0.0, 0.0]) == (0.95, 0.0, "falls")
    assert trend([0.0, 0.0, 0.01, 0.01])[2] == "flat"
    assert trend([0.1, 0.5])[2] == "rises"


def _steps(store: Store, count: int) -> None:
    for step in range(1, count + 1):
        falling = 1.0 - step / count
        logs = {"reward": -falling, "violation_rate": falling, "sell_below_cost_error_rate":
                falling / 2, "deal_rate": 0.0, "distinct_buyers_engaged": 1.0 + step / count,
                "zero_advantage_groups": float(step % 3), "loss": 0.1}  # fmt: skip
        record_step(store, "demo", 1, "seller", step, step, logs)


def test_the_training_section_says_which_phases_are_visible_and_draws_every_row(tmp_path):
    db = tmp_path / "league.db"
    with Store.open(db) as store:
        _steps(store, 8)
        text = phases_text(training_steps(store, "demo"))
    assert "seller, 8 steps" in text
    phase1, phase2, phase3 = text.splitlines()[1:4]
    assert phase1.startswith(f"  {PHASES[1]}")
    assert "violation_rate 0.812 -> 0.062 (falls: as in the paper)" in phase1
    assert "deal_rate 0.000 -> 0.000 (flat: not visible)" in phase2
    assert "reward -0.812 -> -0.062 (rises: as in the paper)" in phase2
    assert "distinct_buyers_engaged 1.188 -> 1.938 (rises: as in the paper)" in phase3
    assert "deal_on_top_buyer_rate -" in phase3  # never logged: no deal closed
    (curves, _ratings) = league_sections(db, tmp_path / "report", "demo")
    assert curves[1] is not None
    image = imread(curves[1])  # a real PNG with panels drawn on it, not a blank canvas
    assert image.shape[0] > 400 and image.shape[1] > 400
    assert len(np.unique(image.reshape(-1, image.shape[-1]), axis=0)) > 50
    assert "falls: as in the paper" in curves[2]


@pytest.mark.slow
def test_a_league_too_small_for_intervals_finishes_with_a_report(tmp_path):
    """Eight evaluation episodes and one opponent a side: a seller that never closes gets a
    bootstrap interval that excludes its rating; the run still ends with its report."""
    config = LeagueConfig.from_toml(league_config(tmp_path, "small"))
    config = dataclasses.replace(
        config,
        sellers=("scripted:satisficer",),
        buyers=("scripted:time",),
        market=dict(config.market, total_turns=2),
        learner=dataclasses.replace(config.learner, steps_per_generation=1, eval_episodes=8),
    )
    summary = run_league(config, tmp_path / "small.db", log=lambda line: None, report=True)
    assert summary.report is not None and Path(summary.report).is_file()
    page = Path(summary.report).read_text(encoding="utf-8")
    assert "ratings per generation" in page
