"""leagues.seeds: one recipe under several seeds, and its figures across the runs."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from leagues.config import LeagueConfig
from leagues.models import tiny_model_folder
from leagues.seeds import (
    across_seeds,
    interquartile_mean,
    interval_across_runs,
    run_seeds,
    seed_configs,
)
from tests.leagues.leagues import league_config
from tournaments.store import Store


def test_each_seed_is_its_own_league_on_one_held_out_set(tmp_path):
    config = LeagueConfig.from_toml(league_config(tmp_path, "rec"))
    leagues = seed_configs(config, [4, 7])
    assert [c.name for c in leagues] == ["rec-seed4", "rec-seed7"]
    assert [c.seed for c in leagues] == [4, 7] and all(c.seeds == () for c in leagues)
    assert leagues[0].folder.endswith("seed-4") and leagues[1].folder.endswith("seed-7")
    assert leagues[0].evaluation_seed == leagues[1].evaluation_seed  # the same scenarios
    # ... however the seeds are split across runs (parallel runs of one seed each).
    assert seed_configs(config, [7])[0].evaluation_seed == leagues[0].evaluation_seed
    # Everything else is the recipe, unchanged.
    same = {"name", "seed", "folder", "eval_seed", "seeds"}
    for f in dataclasses.fields(LeagueConfig):
        if f.name not in same:
            assert getattr(leagues[0], f.name) == getattr(config, f.name), f.name
    assert seed_configs(config) == [config]  # no seeds: the league as written
    with pytest.raises(ValueError, match="distinct integers"):
        seed_configs(config, [1, 1])


def test_the_interval_across_runs_covers_the_mean_and_widens_with_spread():
    tight = interval_across_runs([0.30, 0.31, 0.29])
    wide = interval_across_runs([0.0, 0.3, 0.6])
    assert tight["ci_low"] <= tight["mean"] <= tight["ci_high"]
    assert math.isclose(wide["mean"], 0.3)
    assert wide["ci_high"] - wide["ci_low"] > 5 * (tight["ci_high"] - tight["ci_low"])
    assert interval_across_runs([])["n"] == 0


def test_the_iqm_drops_the_lowest_and_highest_quarter():
    assert interquartile_mean([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 100.0]) == 3.5
    assert interquartile_mean([1.0, 2.0, 9.0]) == pytest.approx(4.0)  # < 4 runs: the mean
    rng = np.random.default_rng(0)
    values = rng.normal(size=40)
    trimmed = np.sort(values)[10:30].mean()
    assert interquartile_mean(values) == pytest.approx(trimmed)


@pytest.mark.slow
def test_seeds_with_one_base_seed_share_one_base_and_are_summarised_together(tmp_path):
    config = LeagueConfig.from_toml(league_config(tmp_path, "rec"))
    config = dataclasses.replace(
        config,
        generations=1,
        seeds=(0, 1),
        learner=dataclasses.replace(config.learner, base_seed=0, steps_per_generation=1),
    )
    db = tmp_path / "rec.db"
    summaries = run_seeds(config, db, log=lambda line: None, report=False)
    assert [s.name for s in summaries] == ["rec-seed0", "rec-seed1"]
    leagues = seed_configs(config)
    bases = {tiny_model_folder(c, tmp_path / c.folder) for c in leagues}
    assert len(bases) == 1 and (next(iter(bases)) / "config.json").is_file()
    built = [p for p in (tmp_path / "files" / "bases").iterdir() if p.is_dir()]
    assert len(built) == 1  # built once (beside it, the lock it was built under)
    with Store.open(db, read_only=True) as store:
        summary = across_seeds(store, [c.name for c in leagues])
        specs = {r.seller for r in store.load_records(tournament="rec-seed1/gen-001-seller")}
    assert [s["league"] for s in summary["seeds"]] == ["rec-seed0", "rec-seed1"]
    assert summary["gain"]["n"] == 2 and "violation_rate" in summary
    assert all("seed-1" in spec for spec in specs)  # each seed trains its own checkpoint
