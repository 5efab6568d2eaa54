"""Session-wide fixtures shared by the test suite."""

from __future__ import annotations

import os
from pathlib import Path

# Tiny models on a 2-core machine: more torch threads than cores only adds contention (observed
# 10-40x slower tiny-model tests with 2 threads while other processes ran). Set before torch loads.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Qwen2 chat model + BPE tokenizer, built once per test session."""
    from agents.testing.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_model"), seed=0)
