"""Session-wide fixtures shared by the test suite."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Qwen2 chat model + BPE tokenizer, built once per test session."""
    from agents.testing.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_model"), seed=0)
