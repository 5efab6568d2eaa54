"""The learning demo's time before and after issue 18's speed-ups, stage by stage, in one run.

``examples/learning-league.toml`` spends its time in three stages: building the base (tiny model,
copy pretraining, warm start), GRPO steps (rollouts, then TRL's loss and update) and evaluation
rounds (every checkpoint against the league's buyers on held-out scenarios). The speed-ups are
settings, so both sides run here on the same base, in the same process, under the same load:

* before: rollouts decoded ``per_device_train_batch_size`` (8) learner turns at a time,
  evaluation batches of 32 prompts (two generate calls a round), and every seed building its
  own base;
* after: a whole rollout round decoded at once (``decode_batch_size = 0``), evaluation batches
  of ``eval_batch_size`` from the config (one call a round), one base shared by the seeds
  (``base_seed``).

GRPO steps alternate before/after (``--steps`` of each, after one warm-up step each), evaluation
plays the same ``--episodes`` held-out episodes with each setting. The demo's wall time for
``--seeds`` seeds follows from the stage times and the config's counts (printed with the
formula); docs/performance.md quotes the output.

    python benchmarks/bench_speed.py                      # ~15 minutes on 2 idle cores
    python benchmarks/bench_speed.py --steps 2 --episodes 64 --base runs/bases/<hash>/warm-start
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from agents.backends import close_backends
from leagues.config import LeagueConfig
from leagues.models import prepare_base_model
from leagues.plan import eval_tournament, learner_name, model_spec, training_rows
from leagues.trainer import TrainJob, train_learner
from tournaments.runner import run_tournament


def step_times(config: LeagueConfig, base: Path, out: Path, steps: int) -> dict[str, list[float]]:
    """TRL's ``step_time`` of each GRPO step after the first, with each rollout setting; the
    settings take turns (before, after, before, after) so that a change of load hits both."""
    learner = config.learner
    settings = {
        "before": dataclasses.replace(
            learner.train, decode_batch_size=learner.train.grpo["per_device_train_batch_size"]
        ),
        "after": dataclasses.replace(learner.train, decode_batch_size=0),
    }
    per_step = learner.train.scenarios_per_step
    weights = [1 / len(config.buyers)] * len(config.buyers)
    rows = training_rows(config, 1, "seller", config.buyers, weights)[: per_step * (steps + 1)]
    times: dict[str, list[float]] = {name: [] for name in settings}
    for turn in range(2):
        for name, train in settings.items():
            folder = out / f"{name}-{turn}"
            job = TrainJob(
                base, None, tuple(rows), config.train_market_config(), train, steps + 1,
                folder / "trainer", folder / "adapter", seed=turn,
                learner_name=learner_name("bench", learner),
            )  # fmt: skip
            logged: list[float] = []
            train_learner(job, lambda _step, logs, logged=logged: logged.append(logs["step_time"]))
            times[name] += logged[1:]  # the first step warms caches and imports up
    return times


def eval_times(config: LeagueConfig, base: Path, episodes: int) -> dict[str, float]:
    """Seconds to play ``episodes`` held-out episodes of the base with each evaluation setting."""
    seconds = {}
    per_buyer = max(1, episodes // len(config.buyers))
    for name, batch in (("before", 32), ("after", config.learner.eval_batch_size)):
        learner = dataclasses.replace(
            config.learner, eval_batch_size=batch, eval_episodes=per_buyer
        )
        league = dataclasses.replace(config, learner=learner)
        sellers = [model_spec(league, base)]
        tournament = eval_tournament(
            league, f"speed-{name}", sellers, [(b,) for b in league.buyers]
        )
        started = time.perf_counter()
        run_tournament(tournament, None, workers=1, progress=False, chunk_size=max(64, batch))
        seconds[name] = time.perf_counter() - started
        close_backends()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=Path("examples/learning-league.toml"))
    parser.add_argument(
        "--base", type=Path, default=None, help="a built base to reuse (else built and timed)"
    )
    parser.add_argument("--steps", type=int, default=3, help="timed GRPO steps per setting")
    parser.add_argument("--episodes", type=int, default=96, help="evaluation episodes per setting")
    parser.add_argument("--seeds", type=int, default=3, help="seeds of the demo to project")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    import torch

    config = LeagueConfig.from_toml(args.config)
    if config.cpu_threads:
        torch.set_num_threads(config.cpu_threads)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        started = time.perf_counter()
        base = args.base or prepare_base_model(config, out / "league", print)
        base_seconds = time.perf_counter() - started if args.base is None else None
        steps = step_times(config, base, out / "steps", args.steps)
        evals = eval_times(config, base, args.episodes)
    learner = config.learner
    n_steps = config.generations * learner.steps_per_generation
    n_eval = (config.generations + 1) * learner.eval_episodes * len(config.buyers)
    step = {name: statistics.mean(ts) for name, ts in steps.items()}
    per_episode = {name: s / args.episodes for name, s in evals.items()}
    result: dict[str, Any] = {
        "base_seconds": base_seconds,
        "step_seconds": steps,
        "eval_seconds": evals,
        "episodes": args.episodes,
    }
    print(f"GRPO step: before {step['before']:.1f} s, after {step['after']:.1f} s "
          f"({step['before'] / step['after']:.2f}x); per step: {steps}")  # fmt: skip
    print(f"evaluation of {args.episodes} episodes: before {evals['before']:.1f} s, after "
          f"{evals['after']:.1f} s ({evals['before'] / evals['after']:.2f}x)")  # fmt: skip
    if base_seconds is not None:
        rl = {name: n_steps * step[name] + n_eval * per_episode[name] for name in step}
        before = args.seeds * (base_seconds + rl["before"])
        after = base_seconds + args.seeds * rl["after"]
        result["demo"] = {"seeds": args.seeds, "before": before, "after": after}
        print(f"base built in {base_seconds:.0f} s; demo of {args.seeds} seeds ({n_steps} steps "
              f"and {n_eval} evaluation episodes each): before {before / 60:.1f} min = seeds x "
              f"(base + steps + evaluation), after {after / 60:.1f} min = base + seeds x (steps "
              f"+ evaluation): {before / after:.2f}x")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
