"""Torch threads for the tiny model's training steps: one against two, on this machine's load.

The learning league's model (128 wide, 4 layers, 0.92M parameters) is trained in three places:
copy pretraining (32 short sequences a step), the warm start and GRPO's loss (8 long streams a
micro-batch). Each step here is a forward, a backward and an AdamW update on random tokens of
those shapes, timed with 1 and with 2 torch threads in child processes (a process's thread
count is fixed once its first parallel region ran). The load average is printed beside the
figures: with anything else running on a 2-core machine, two threads wait for each other at
every small op's barrier, which is why ``examples/learning-league.toml`` sets ``cpu_threads = 1``.

    python benchmarks/bench_threads.py                 # about a minute
    python benchmarks/bench_threads.py --steps 20 --json threads.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SHAPES = {"copy pretraining (32 x 70)": (32, 70), "warm start / GRPO (8 x 600)": (8, 600)}


def child(threads: int, steps: int) -> dict[str, float]:
    """Median seconds per training step for each shape, with ``threads`` torch threads."""
    import torch
    from transformers import AutoModelForCausalLM

    from agents.testing.tiny_model import build_tiny_model

    torch.set_num_threads(threads)
    folder = build_tiny_model(Path(tempfile.mkdtemp()) / "tiny", seed=0, hidden=128, layers=4,
                              heads=4, vocab_size=1024, max_positions=16384)  # fmt: skip
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(0)
    out = {}
    for name, (rows, width) in SHAPES.items():
        ids = torch.randint(0, 1000, (rows, width), generator=generator)
        times = []
        for _ in range(steps + 1):
            started = time.perf_counter()
            loss = model(input_ids=ids, labels=ids, use_cache=False).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            times.append(time.perf_counter() - started)
        out[name] = statistics.median(times[1:])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=8, help="timed steps per shape")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.steps)))
        return
    load = os.getloadavg()[0]
    results = {}
    for threads in (1, 2):
        command = [sys.executable, __file__, "--child", str(threads), "--steps", str(args.steps)]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        results[threads] = json.loads(done.stdout.strip().splitlines()[-1])
    print(
        f"load average before: {load:.1f}, after: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cpus)"
    )
    for name in SHAPES:
        one, two = results[1][name], results[2][name]
        print(f"{name}: 1 thread {one:.3f} s, 2 threads {two:.3f} s a step (2 threads / 1: "
              f"{two / one:.2f}x)")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps({"load": load, "seconds": results}, indent=2))


if __name__ == "__main__":
    main()
