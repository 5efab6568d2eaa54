"""Where a GRPO step of the learning league spends its time: run two steps under py-spy, then
fold the samples into the step's phases.

    py-spy record -r 20 -f raw -o step.raw -- python benchmarks/profile_step.py \\
        --base runs/bases/<hash>/warm-start
    python benchmarks/profile_step.py --summary step.raw

The phases are named by the frames they contain: the rollout (``rollout_func``: decoding and
prefill), the trainer's forward for the loss (``_get_per_token_logps_and_entropies``), the
backward pass, and attention inside them. docs/performance.md quotes the output.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from pathlib import Path

PHASES = {
    "rollout (rollout_func)": "rollout_func",
    "  decoding (hf_decode.decode)": "decode (",
    "  prefill (hf_decode.prefill)": "prefill (",
    "loss forward (per-token logprobs)": "_get_per_token_logps_and_entropies",
    "backward": "_engine_run_backward",
    "attention through masked sdpa (any phase)": "sdpa_attention_forward",
    "imports (first step only)": "_find_and_load",
}


def summarize(raw: Path) -> None:
    """Share of samples whose stack holds each phase's frame (phases may nest)."""
    shares: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        total += int(count)
        for phase, frame in PHASES.items():
            if frame in stack:
                shares[phase] += int(count)
    for phase in PHASES:
        print(f"{shares[phase] / max(total, 1):6.1%}  {phase}")
    print(f"{total} samples")


def run(config_path: Path, base: Path, steps: int) -> None:
    """``steps`` GRPO steps of the config's learner on ``base``, one torch thread."""
    import torch

    from leagues.config import LeagueConfig
    from leagues.plan import learner_name, training_rows
    from leagues.trainer import TrainJob, train_learner

    torch.set_num_threads(1)
    config = LeagueConfig.from_toml(config_path)
    learner = config.learner
    weights = [1 / len(config.buyers)] * len(config.buyers)
    rows = training_rows(config, 1, learner.side, config.buyers, weights)
    rows = rows[: learner.train.scenarios_per_step * steps]
    out = Path(tempfile.mkdtemp())
    job = TrainJob(base, None, tuple(rows), config.train_market_config(), learner.train, steps,
                   out / "trainer", out / "adapter", seed=0,
                   learner_name=learner_name("profile", learner))  # fmt: skip
    started = time.perf_counter()
    train_learner(job, lambda step, logs: print(f"step {step}: {logs['step_time']:.1f} s"))
    print(f"{steps} steps in {time.perf_counter() - started:.1f} s (imports included)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=Path("examples/learning-league.toml"))
    parser.add_argument("--base", type=Path, help="the league's base model folder")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--summary", type=Path, help="a py-spy raw file to fold into phases")
    args = parser.parse_args()
    if args.summary is not None:
        summarize(args.summary)
    elif args.base is None:
        parser.error("--base is required to run steps")
    else:
        run(args.config, args.base, args.steps)


if __name__ == "__main__":
    main()
