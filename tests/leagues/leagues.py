"""Shared by league tests: a small league config and a store holding its scripted round-robin;
a buyer training job with multi-turn streams, and TRL's view of its first batch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from arena.catalog import load_catalog
from arena.config import get_preset
from arena.scenarios import make_scenario
from leagues.config import LeagueConfig
from leagues.plan import eval_tournament
from leagues.rollout import LEARNER, GroupRow
from leagues.train_config import TrainConfig
from leagues.trainer import TrainJob
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
num_generations = 2
per_device_train_batch_size = 4
gradient_accumulation_steps = 1
learning_rate = 1e-3
max_completion_length = 16
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


def buyer_job(
    model: Path, out: Path, train: TrainConfig, steps: int = 1, seed: int = 8
) -> TrainJob:
    """A buyer learner in the in-distribution market (slot 1; scripted sellers and buyers around
    it): a random model's invalid openings are re-sampled, so every stream has several turns and
    glue between them."""
    market = get_preset("in-distribution")
    buyers = (LEARNER, "scripted:time", "scripted:time")
    rows = tuple(
        GroupRow(f"b{i}", make_scenario(market, load_catalog(), 31, i), "scripted:prober", buyers,
                 "buyer_1")
        for i in range(steps * train.scenarios_per_step)
    )  # fmt: skip
    return TrainJob(model, None, rows, market, train, steps, out / "trainer", out / "adapter", seed)


def scored_batch(trainer: Any, job: TrainJob) -> dict[str, Any]:
    """TRL's training batch of the job's first step: rollouts, rewards, advantages."""
    group = job.train.num_generations
    rows = job.rows[: job.train.scenarios_per_step]
    return trainer._generate_and_score_completions(
        [{"prompt": row.key} for row in rows for _ in range(group)]
    )


def recomputed_logprobs(trainer: Any, batch: dict[str, Any]) -> Any:
    """The trainer's own log-probabilities of the batch's completion tokens (what its loss and
    importance ratios use), and the mask of the learner's tokens."""
    import torch

    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    with torch.no_grad():
        logps, _, _ = trainer._get_per_token_logps_and_entropies(
            trainer.model, ids, mask, batch["completion_ids"].size(1)
        )
    return logps, (batch["completion_mask"] * batch["tool_mask"]).bool()
