"""A league whose evaluation rounds run on the Ray pool (``[league] executor = "ray"``), on a real
two-node cluster on this machine, against the same league in one process."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from agents.backends import close_backends
from leagues.config import LeagueConfig
from leagues.league import run_league
from leagues.state import register_league
from tests.leagues.leagues import league_config
from tests.ray_cluster import two_node_cluster
from tournaments.store import Store, load_records


def stored(db: Path, folder: Path) -> tuple[list[tuple[str, str]], list[tuple], list[tuple]]:
    """(every episode as (tournament, record JSON), the stored ratings, every training step's
    reward and loss), sorted, with the league's folder written as FOLDER so two leagues in two
    folders compare."""

    def plain(text: str) -> str:
        return text.replace(str(folder), "FOLDER")

    with Store.open(db) as store:
        names = [r[0] for r in store.db.execute("SELECT name FROM tournaments")]
        ratings = store.db.execute(
            "SELECT generation, role, agent, rating, games, episodes FROM league_ratings"
        ).fetchall()
        steps = store.db.execute(
            "SELECT generation, side, step, reward, loss FROM training_steps"
        ).fetchall()
    episodes = sorted(
        (name, plain(json.dumps(r.to_dict(), sort_keys=True)))
        for name in names
        for r in load_records(db, tournament=name)
    )
    return (
        episodes,
        sorted(tuple(plain(str(v)) for v in row) for row in ratings),
        sorted(tuple(row) for row in steps),
    )


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_a_league_on_the_pool_stores_the_episodes_steps_and_ratings_of_one_process(
    tmp_path: Path,
) -> None:
    # Both sides train (seller, then buyer): the buyer's rollouts meet the seller checkpoint of
    # generation 1 among its opponents, whose turns the pool's actors answer. Requests are
    # seeded from their episodes (leagues.plan.model_spec, agents.llm.request_seed): the pool
    # must reproduce one process exactly, LLM texts and training rewards included.
    config = LeagueConfig.from_toml(league_config(tmp_path, "pooled", "both", "uniform"))
    local = dataclasses.replace(config, folder=str(tmp_path / "local"))
    run_league(local, tmp_path / "local.db", log=lambda _m: None, report=False)
    close_backends()
    pooled = dataclasses.replace(config, folder=str(tmp_path / "pooled"), executor="ray", workers=2)
    lines: list[str] = []
    with two_node_cluster():
        run_league(pooled, tmp_path / "pooled.db", log=lines.append, report=False)
    episodes, ratings, steps = stored(tmp_path / "pooled.db", tmp_path / "pooled")
    assert (episodes, ratings, steps) == stored(tmp_path / "local.db", tmp_path / "local")
    assert sum("lora=" in record for _, record in episodes) >= 8  # the checkpoints played
    assert {side for _, side, *_ in steps} == {"seller", "buyer"}
    # The buyer's rollouts' LLM opponent was answered by the pool (the seller's had none).
    served = [int(m[1]) for line in lines if (m := re.search(r"opponents' (\d+) requests", line))]
    assert len(served) == 1 and served[0] > 0, lines
    # Every round's model group (the base, then its adapters) ran on one pool kept for the
    # league: each actor loaded the base model once for all the rounds and rollouts.
    actors = [int(m[1]) for line in lines if (m := re.search(r": (\d+) actor\(s\)$", line))]
    loads = [int(m[1]) for line in lines if (m := re.search(r": (\d+) model load\(s\)$", line))]
    assert len(actors) == 3 and sum(loads) == max(actors), lines


def test_where_a_league_is_evaluated_may_change_when_it_resumes(tmp_path: Path) -> None:
    config = LeagueConfig.from_toml(league_config(tmp_path))
    with Store.open(tmp_path / "l.db") as store:
        register_league(store, config)
        register_league(store, dataclasses.replace(config, executor="ray", workers=4))
        assert config.config_hash() == dataclasses.replace(config, executor="ray").config_hash()
        with pytest.raises(ValueError, match="differs in: seed"):
            register_league(store, dataclasses.replace(config, seed=5))
    with pytest.raises(ValueError, match=r"league\.workers must be an integer >= 1"):
        dataclasses.replace(config, workers=0)
