"""Evidence that the GRPO update is the intended one, beyond "the weights moved": the sampling
logprobs are the trainer's own, glue tokens carry no loss, groups with equal rewards are counted,
and a seeded step is reproducible to the bit."""

from __future__ import annotations

import pytest
import torch

from leagues.train_config import TrainConfig
from leagues.trainer import adapter_weights, build_trainer, train_learner
from tests.leagues.leagues import buyer_job, recomputed_logprobs, scored_batch

TRAIN = TrainConfig.from_dict(
    {
        "num_generations": 2,
        "per_device_train_batch_size": 4,
        "gradient_accumulation_steps": 1,
        "max_completion_length": 12,
        "learning_rate": 5e-3,
        "max_episode_tokens": 2048,
    }
)


def test_sampling_logprobs_equal_the_trainers_recomputed_logprobs(tiny_model_dir, tmp_path):
    job = buyer_job(tiny_model_dir, tmp_path, TRAIN)
    trainer = build_trainer(job)
    batch = scored_batch(trainer, job)
    trained, mask = recomputed_logprobs(trainer, batch)
    sampled = batch["sampling_per_token_logps"]
    assert int(mask.sum()) > 30 and bool((~mask & batch["completion_mask"].bool()).any())
    gap = (trained - sampled).abs()[mask]
    assert float(gap.max()) < 1e-4, f"max |trainer - sampler| = {float(gap.max()):.2e}"
    # Glue tokens were not sampled: their logprob is 0 in the rollout, and masked out.
    assert bool((sampled[~mask & batch["completion_mask"].bool()] == 0).all())


def _loss_gradient(trainer, batch) -> tuple[torch.Tensor, torch.Tensor]:
    """(d loss / d log p of every completion token, flattened LoRA weight gradient)."""
    captured = {}
    original = trainer._get_per_token_logps_and_entropies

    def capturing(*args, **kwargs):
        logps, entropies, aux = original(*args, **kwargs)
        if logps.requires_grad:
            logps.retain_grad()
            captured["logps"] = logps
        return logps, entropies, aux

    trainer._get_per_token_logps_and_entropies = capturing
    trainer.model.zero_grad()
    trainer.model.eval()  # no dropout, and TRL's eval-mode normaliser (no accumulation state)
    trainer.compute_loss(trainer.model, batch).backward()
    trainer._get_per_token_logps_and_entropies = original
    weights = [p.grad.flatten() for n, p in trainer.model.named_parameters() if "lora_" in n]
    return captured["logps"].grad, torch.cat(weights)


def test_glue_tokens_carry_zero_loss(tiny_model_dir, tmp_path):
    job = buyer_job(tiny_model_dir, tmp_path, TRAIN)
    trainer = build_trainer(job)
    batch = scored_batch(trainer, job)
    # Every completion gets a non-zero advantage, so each learner token has a gradient.
    batch["advantages"] = torch.tensor([1.0, -1.0, 0.5, -0.5])
    per_token, weights = _loss_gradient(trainer, batch)
    learner = (batch["completion_mask"] * batch["tool_mask"]).bool()
    glue = batch["completion_mask"].bool() & ~learner
    assert bool(glue.any()) and bool((per_token[glue] == 0).all())
    assert bool((per_token[learner] != 0).all())
    # What the rollout says about glue tokens (their logprobs) changes nothing in the update.
    batch["sampling_per_token_logps"] = batch["sampling_per_token_logps"].masked_fill(glue, -7.0)
    _, perturbed = _loss_gradient(trainer, batch)
    assert torch.equal(weights, perturbed) and float(weights.abs().max()) > 0


@pytest.mark.slow
def test_a_seeded_rerun_of_a_grpo_step_gives_identical_weights(warm_models, tmp_path):
    from tests.leagues.test_trainer import seller_job

    logs = {}
    weights = {}
    for run, seed in (("a", 5), ("b", 5), ("c", 6)):
        job = seller_job(warm_models["seller"], tmp_path / run, steps=1)
        job = type(job)(**{**job.__dict__, "seed": seed})
        train_learner(job, lambda step, entry, run=run: logs.setdefault(run, entry))
        weights[run] = adapter_weights(job.adapter_dir)
    assert logs["a"]["reward_std"] > 0, "the step must have something to learn from"
    assert weights["a"].keys() == weights["b"].keys()
    assert all(torch.equal(weights["a"][k], weights["b"][k]) for k in weights["a"])
    assert not all(torch.equal(weights["a"][k], weights["c"][k]) for k in weights["a"])
