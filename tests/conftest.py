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


@pytest.fixture(scope="session")
def lora_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model both hf and vllm run (head size 32: vLLM's CPU kernels need >= 32), with a
    8,192-token context so multi-turn seller conversations fit."""
    from agents.testing.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("lora_model"), heads=2, max_positions=8192)


def save_random_adapter(model_dir: Path, out: Path, seed: int, rank: int = 8) -> Path:
    """A LoRA adapter with random A and B (``init_lora_weights=False``): PEFT's default init has
    B = 0, an adapter that changes nothing."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_dir))
    config = LoraConfig(
        r=rank,
        lora_alpha=2 * rank,
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
        init_lora_weights=False,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        peft_model = get_peft_model(model, config)
    peft_model.save_pretrained(str(out))
    return out


@pytest.fixture(scope="session")
def lora_adapters(lora_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Three different random rank-8 adapters of ``lora_model_dir``: a league of three."""
    root = tmp_path_factory.mktemp("adapters")
    return [save_random_adapter(lora_model_dir, root / name, seed) for seed, name in
            enumerate(("gen1", "gen2", "gen3"), start=11)]  # fmt: skip
