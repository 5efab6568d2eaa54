"""Fixtures shared by the agent tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agents.backends import close_backends


@pytest.fixture(autouse=True)
def fresh_backends() -> Iterator[None]:
    """Every test starts and ends without cached back-ends (engines, HTTP clients)."""
    close_backends()
    yield
    close_backends()


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Torch on one thread for the tiny model: on a shared 2-core machine two OpenMP threads
    can spin against other processes and run ten times slower."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
