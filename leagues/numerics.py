"""The numeric environment a base model was built in, recorded beside it and checked on reuse.

A league's seed fixes its scenarios, rollouts, LoRA initialisation and data order, so a rerun on
the same machine gives bit-identical adapters (docs/training.md). It does not fix the arithmetic:
torch dispatches its kernels (and MKL/oneDNN theirs) by the CPU's vector units, and float sums in
another order round differently. Over the 1,000 steps of copy pretraining and a warm start those
last bits grow into another model: the same recipe and seed built three different bases on an
earlier machine of this workplace, on an AVX-512 machine, and on that machine with torch, MKL and
oneDNN held to AVX2 (docs/training.md, "Numbers across machines"). So every built base records
what it was built with, and a league that reuses one built elsewhere says so: its figures will
match that machine's statistically, not to the digit.
"""

from __future__ import annotations

import json
import platform
from collections.abc import Callable
from pathlib import Path

NUMERICS_FILE = "numerics.json"
COMPARED = ("torch", "cpu_capability", "cpu")
"""The fields whose difference changes a build's bits."""


def cpu_model() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def numeric_environment() -> dict[str, str]:
    """torch's version, the CPU kernels it dispatches to (``ATEN_CPU_CAPABILITY`` may lower
    them) and the CPU: what decides a build's bits besides its settings and seed."""
    import torch

    return {
        "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpu": cpu_model(),
    }


def record_numerics(folder: Path) -> None:
    """Write this process's numeric environment into a model folder being built."""
    (folder / NUMERICS_FILE).write_text(json.dumps(numeric_environment(), indent=2))


def numerics_differ(folder: Path) -> dict[str, tuple[str | None, str]]:
    """Each compared field whose value at build time (``folder``'s record) differs from this
    process's, as (then, now); empty when they agree or the folder has no record (built before
    the record existed, or not built by a league)."""
    file = folder / NUMERICS_FILE
    if not file.is_file():
        return {}
    then, now = json.loads(file.read_text()), numeric_environment()
    return {k: (then.get(k), now[k]) for k in COMPARED if then.get(k) != now[k]}


def check_numerics(folder: Path, log: Callable[[str], None]) -> None:
    """Log a note when the base reused from ``folder`` was built in another numeric environment."""
    differ = numerics_differ(folder)
    if differ:
        shown = "; ".join(f"{k} {then!r} then, {now!r} now" for k, (then, now) in differ.items())
        log(
            f"note: {folder} was built in another numeric environment ({shown}): training on it "
            "here reproduces that machine's figures statistically, not bit for bit"
        )
