"""The project's tiny model as a league's base model: its size and its copy pretraining.

``[league.learner] model = "tiny"`` builds :func:`agents.testing.tiny_model.build_tiny_model`
into the league folder (nothing is downloaded), sized by ``[league.learner.tiny]``, and, with
``copy_pretrain_steps``, teaches it to copy prices out of its prompt
(:mod:`agents.testing.pretrain`) before any warm start: what a real pretrained model brings, and
what a random one cannot learn from a few hundred negotiation transcripts. The defaults are the
small model the league tests use; examples/learning-league.toml sets the size that learns.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agents.testing.pretrain import PretrainConfig, pretrain_copying
from agents.testing.tiny_model import build_tiny_model
from arena.settings import about, check_positive_int


@dataclass(frozen=True)
class TinyConfig:
    """The tiny base model: architecture, tokenizer and copy pretraining."""

    hidden: int = field(default=64, metadata=about("Hidden size."))
    layers: int = field(default=2, metadata=about("Transformer layers."))
    heads: int = field(
        default=4,
        metadata=about("Attention heads; vLLM's CPU kernels need hidden / heads >= 32."),
    )
    vocab_size: int = field(default=1024, metadata=about("BPE vocabulary (digits split)."))
    positions: int = field(default=16384, metadata=about("Context length (RoPE positions)."))
    copy_pretrain_steps: int = field(
        default=0, metadata=about("Steps of copy pretraining before the warm start (0: none).")
    )

    def __post_init__(self) -> None:
        where = "league.learner.tiny"
        for name in ("hidden", "layers", "heads", "vocab_size", "positions"):
            check_positive_int(where, name, getattr(self, name))
        if self.hidden % self.heads:
            raise ValueError(
                f"{where}.hidden={self.hidden} must be divisible by heads={self.heads}"
            )
        if self.copy_pretrain_steps < 0:
            raise ValueError(f"{where}.copy_pretrain_steps must be >= 0")


def build_league_tiny_model(
    path: Path, config: TinyConfig, seed: int, log: Callable[[str], None]
) -> None:
    """Write the tiny model described by ``config`` to ``path`` (an empty folder), pretrained
    to copy prices when ``config.copy_pretrain_steps`` asks for it."""
    build_tiny_model(
        path,
        seed=seed,
        vocab_size=config.vocab_size,
        hidden=config.hidden,
        layers=config.layers,
        heads=config.heads,
        max_positions=config.positions,
    )
    if config.copy_pretrain_steps:
        log(f"copy pretraining the tiny model for {config.copy_pretrain_steps} steps")
        pretrain_copying(
            path, path, PretrainConfig(steps=config.copy_pretrain_steps, seed=seed), log
        )
    (path / "tiny.json").write_text(json.dumps(config.__dict__, indent=2))
