"""The learning demo's time before and after issue 18's speed-ups, stage by stage, in one run.

``examples/learning-league.toml`` spends its time in three stages: building the base (tiny model,
copy pretraining, warm start), GRPO steps (rollouts, then TRL's loss and update) and evaluation
rounds (every checkpoint against the league's buyers on held-out scenarios). The speed-ups are
settings, so both sides run here on the same base, in the same process, under the same load:

* before: rollouts decoded ``per_device_train_batch_size`` (8) learner turns at a time,
  evaluation batches of 32 prompts (two generate calls a round), every seed building its own
  base, and a padded batch's attention through SDPA's mask (its CPU math path);
* after: a whole rollout round decoded at once (``decode_batch_size = 0``), evaluation batches
  of ``eval_batch_size`` from the config (one call a round), one base shared by the seeds
  (``base_seed``), and each padded row's span as one causal flash call
  (``agents.backends.hf_attention.padded_spans``; the loss, batched prefills, copy pretraining
  and the warm start).

GRPO steps alternate before/after (``--steps`` of each, after one warm-up step each), evaluation
plays the same ``--episodes`` held-out episodes with each setting, and ``--base-steps`` steps of
copy pretraining and of the warm-start fit are timed each way. The base is built once (after);
its time before adds the full stages' step counts times the per-step differences. The demo's
wall time for ``--seeds`` seeds follows from the stage times and the config's counts (printed
with the formula); docs/performance.md quotes the output.

    python benchmarks/bench_speed.py                      # ~30 minutes on 2 idle cores
    python benchmarks/bench_speed.py --steps 2 --episodes 64 --base runs/bases/<hash>/warm-start
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agents.backends import close_backends, hf_attention
from agents.finetune import FitConfig, fit_on_transcripts
from agents.llm import LLMAgentConfig
from agents.testing.pretrain import PretrainConfig, pretrain_copying
from leagues.config import LeagueConfig
from leagues.models import prepare_base_model, warm_start_records
from leagues.plan import eval_tournament, learner_name, model_spec, training_rows
from leagues.tiny import build_league_tiny_model
from leagues.trainer import TrainJob, train_learner
from tournaments.runner import run_tournament


@contextlib.contextmanager
def attention(name: str) -> Iterator[None]:
    """``before``: padded batches through SDPA's mask, as before the flash spans."""
    previous = hf_attention.use_spans(name != "before")
    try:
        yield
    finally:
        hf_attention.use_spans(previous)


def base_step_times(config: LeagueConfig, out: Path, steps: int) -> dict[str, dict[str, float]]:
    """Seconds per step of copy pretraining and of the warm-start fit, each way."""
    learner = config.learner
    tiny = out / "tiny"
    build_league_tiny_model(
        tiny, dataclasses.replace(learner.tiny, copy_pretrain_steps=0), 0, print
    )
    records = warm_start_records(config)
    times: dict[str, dict[str, float]] = {"before": {}, "after": {}}
    for name in times:
        with attention(name):
            started = time.perf_counter()
            pretrain_copying(tiny, out / f"copy-{name}", PretrainConfig(steps=steps, seed=0))
            times[name]["copy"] = (time.perf_counter() - started) / steps
            started = time.perf_counter()
            fit_on_transcripts(
                tiny, records, out / f"fit-{name}", FitConfig(steps=steps, seed=0),
                config=config.train_market_config(), roles=learner.warm_start_roles,
                agent=LLMAgentConfig(prompt=learner.prompt), talk=learner.warm_start_talk,
            )  # fmt: skip
            times[name]["fit"] = (time.perf_counter() - started) / steps
    return times


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
            with attention(name):
                train_learner(job, lambda _s, logs, logged=logged: logged.append(logs["step_time"]))
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
        with attention(name):
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
    parser.add_argument(
        "--base-steps", type=int, default=20, help="timed copy-pretraining and fit steps per way"
    )
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
        base_steps = base_step_times(config, out / "base-steps", args.base_steps)
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
        "base_step_seconds": base_steps,
    }
    print(f"GRPO step: before {step['before']:.1f} s, after {step['after']:.1f} s "
          f"({step['before'] / step['after']:.2f}x); per step: {steps}")  # fmt: skip
    print(f"evaluation of {args.episodes} episodes: before {evals['before']:.1f} s, after "
          f"{evals['after']:.1f} s ({evals['before'] / evals['after']:.2f}x)")  # fmt: skip
    for stage in ("copy", "fit"):
        b, a = base_steps["before"][stage], base_steps["after"][stage]
        print(f"{stage} step: before {b:.2f} s, after {a:.2f} s ({b / a:.2f}x)")
    if base_seconds is not None:
        counts = {"copy": learner.tiny.copy_pretrain_steps, "fit": learner.warm_start_steps}
        extra = sum(
            counts[stage] * (base_steps["before"][stage] - base_steps["after"][stage])
            for stage in counts
        )
        base = {"before": base_seconds + extra, "after": base_seconds}
        rl = {name: n_steps * step[name] + n_eval * per_episode[name] for name in step}
        before = args.seeds * (base["before"] + rl["before"])
        after = base["after"] + args.seeds * rl["after"]
        result["demo"] = {"seeds": args.seeds, "before": before, "after": after, "base": base}
        print(f"base built in {base_seconds:.0f} s (before: {base['before']:.0f} s = that + "
              f"copy and fit steps x their per-step differences); demo of {args.seeds} seeds "
              f"({n_steps} steps and {n_eval} evaluation episodes each): before "
              f"{before / 60:.1f} min = seeds x (base + steps + evaluation), after "
              f"{after / 60:.1f} min = base + seeds x (steps + evaluation): "
              f"{before / after:.2f}x")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
