"""benchmarks/gpu_throughput.py keeps up with the library it times: its rollout generator,
sampler and trainer calls run end to end (on the CPU, on a model of one small layer).

It is run on a GPU machine only when one is lent, so nothing else would notice when a library
change breaks it: the first GPU run found two such breaks (docs/performance.md, "GPU")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("trl", reason="the benchmark trains with TRL: pip install -e '.[train]'")


@pytest.mark.slow
def test_the_gpu_benchmark_measures_generation_and_every_grpo_step_on_a_small_model(tmp_path):
    out = tmp_path / "numbers.json"
    small = ["--layers", "1", "--hidden", "64", "--prompts", "4", "--max-new-tokens", "8"]
    batch = ["--steps", "2", "--batch-size", "8", "--group-size", "4", "--micro-batch-size", "4"]
    script = ["benchmarks/gpu_throughput.py", "--device", "cpu", "--generator", "hf"]
    subprocess.run(
        [sys.executable, *script, *small, *batch, "--json", str(out)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=600,
    )
    numbers = json.loads(out.read_text())
    generation, steps = numbers["generation"], numbers["training"]["steps"]
    assert generation["prompts"] == 4 and 0 < generation["generated_tokens"] <= 4 * 8
    assert generation["prompt_tokens"] > 4 * 100  # the seller's real first prompt, not a stub
    assert len(steps) == 2
    assert all(step["tokens"] > 0 and step["tokens_per_second"] > 0 for step in steps)
