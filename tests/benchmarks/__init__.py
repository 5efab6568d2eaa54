"""Tests of the scripts in benchmarks/ (plain scripts, not a package: :func:`load_script`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_script(name: str) -> ModuleType:
    """The benchmark script ``benchmarks/<name>.py`` imported as a module, so a test calls the
    functions the script prints from."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None, f"no benchmarks/{name}.py"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
