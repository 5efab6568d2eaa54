"""The league report's training section tells the paper's story: one row of curves per training
phase, every training metric of the registry drawn, and a verdict per phase (visible or not)."""

from __future__ import annotations

from arena import metrics
from leagues.report import CURVES, PANEL_ROWS, PHASES, league_sections, phases_text, trend
from leagues.state import record_step, training_steps
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
    assert curves[1] is not None and curves[1].stat().st_size > 10_000
    assert "falls: as in the paper" in curves[2]
