"""When a generation's evaluation may play beside the next generation's training."""

from __future__ import annotations

import atexit
import dataclasses
import time
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest

from leagues.config import LeagueConfig
from leagues.learner_config import LearnerConfig
from leagues.rounds import Beside, can_overlap


def _config(**learner: object) -> LeagueConfig:
    return LeagueConfig(
        name="o",
        sellers=("scripted:satisficer",),
        buyers=("scripted:time",),
        learner=LearnerConfig(model="tiny", **learner),
        generations=4,
        overlap_evaluation=True,
    )


@pytest.mark.parametrize("solver", ["latest", "pfsp", "nash"])
def test_a_next_generation_whose_solver_reads_payoffs_waits_for_the_evaluation(solver):
    assert not any(can_overlap(_config(opponents=solver, side="both"), g) for g in range(5))


def test_a_uniform_next_generation_trains_beside_every_evaluation_but_the_last():
    config = _config(opponents="uniform", side="both")
    assert [can_overlap(config, g) for g in range(5)] == [True, True, True, True, False]
    off = dataclasses.replace(config, overlap_evaluation=False)
    assert not any(can_overlap(off, g) for g in range(5))


def test_the_side_that_trains_next_decides_by_its_own_solver():
    # The buyer draws uniformly, the seller by PFSP: an evaluation may play beside a buyer
    # generation's training (even generations) only.
    config = _config(opponents="pfsp", side="both", side_train={"buyer": {"opponents": "uniform"}})
    assert [can_overlap(config, g) for g in range(4)] == [False, True, False, True]


def test_self_play_draws_no_opponents_so_its_evaluations_always_overlap():
    config = _config(opponents="pfsp", side="self-play")
    assert [can_overlap(config, g) for g in range(5)] == [True, True, True, True, False]


def test_closing_the_background_process_stops_a_round_in_play_at_once(tmp_path: Path):
    # An error or Ctrl-C in the league's process must not wait minutes for a round to end.
    beside = Beside(_config(), tmp_path / "l.db")
    busy = beside.call(time.sleep, 60)
    while not busy.running():
        time.sleep(0.05)
    started = time.perf_counter()
    beside.close()
    assert time.perf_counter() - started < 10
    with pytest.raises(BrokenProcessPool):
        busy.result(timeout=0)


def test_closing_an_idle_background_process_lets_it_exit_by_itself(tmp_path: Path):
    # After a league that finished nothing is in flight: the process ends its own way (its
    # exit handlers run, its connection closes) rather than being killed.
    beside = Beside(_config(), tmp_path / "l.db")
    exited = tmp_path / "exited"
    beside.call(atexit.register, Path.touch, exited).result(timeout=120)
    beside.close()
    assert exited.exists()
