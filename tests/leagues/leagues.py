"""A small league config and a store holding its scripted round-robin, shared by league tests."""

from __future__ import annotations

from pathlib import Path

from leagues.config import LeagueConfig
from leagues.plan import eval_tournament
from tournaments.runner import run_tournament
from tournaments.store import Store

LEAGUE = """
[league]
name = "{name}"
preset = "in-distribution"
generations = 2
seed = 0
sellers = ["scripted:satisficer", "scripted:prober"]
buyers = ["scripted:time", "scripted:tit-for-tat"]
cpu_threads = 1
bootstrap_rounds = 20
folder = "files"

[league.learner]
model = "tiny"
side = "{side}"
steps_per_generation = 2
opponents = "{opponents}"
eval_episodes = 4

[league.learner.train]
batch_size = 4
group_size = 2
micro_batch_size = 4
learning_rate = 1e-3
max_new_tokens = 16
"""


def league_config(tmp_path: Path, name="t", side="seller", opponents="pfsp") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(LEAGUE.format(name=name, side=side, opponents=opponents))
    return path


def scripted_store(tmp_path: Path) -> tuple[Store, LeagueConfig]:
    """A store holding a scripted round-robin under a league's name."""
    config = LeagueConfig.from_toml(league_config(tmp_path))
    store = Store.open(tmp_path / "s.db")
    tournament = eval_tournament(config, "t/gen-000", config.sellers, [(b,) for b in config.buyers])
    run_tournament(tournament, store, workers=1, progress=False)
    return store, config
