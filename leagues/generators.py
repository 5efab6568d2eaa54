"""The learner's samplers: token streams in, sampled reply tokens and their logprobs out.

A generator is ``(streams, seed) -> [(new token ids, sampling logprobs), ...]``, one pair per
stream (:data:`Generate`). Both stop a reply at the tokens of
:func:`agents.backends.hf_backend.stop_token_ids` (the model's eos ids, the tokenizer's eos, the
chat template's end-of-turn token), the definition the ``hf`` back-end uses to end the same
checkpoint's replies in evaluation, so training and evaluation stop on the same tokens.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from agents.backends.hf_backend import stop_token_ids

Generate = Callable[[list[list[int]], int], list[tuple[list[int], list[float]]]]
"""(token streams, seed) -> one (new token ids, their sampling logprobs) per stream."""


def learner_stop_ids(model: Any, tokenizer: Any) -> frozenset[int]:
    """The stop tokens of a (possibly PEFT-wrapped) model: the back-ends' definition."""
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    return stop_token_ids(eos, tokenizer)


def cut_at_stop(
    ids: list[int], logprobs: list[float], stops: frozenset[int]
) -> tuple[list[int], list[float]]:
    """The reply up to and including its first stop token (all of it when there is none)."""
    length = next((i + 1 for i, t in enumerate(ids) if t in stops), len(ids))
    return ids[:length], logprobs[:length]


@contextlib.contextmanager
def eval_mode(model: Any) -> Iterator[Any]:
    """The model in eval mode for generation, back in train mode afterwards."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        if was_training:
            model.train()


class HFGenerator:
    """Sampling with the model's own ``generate`` (CPU, or GPU without vLLM), in chunks."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        temperature: float,
        top_p: float,
        max_new_tokens: int,
        chunk: int,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.temperature = temperature
        self.top_p = top_p
        self.max_new_tokens = max_new_tokens
        self.chunk = chunk
        self.stop_ids = learner_stop_ids(model, tokenizer)

    def __call__(self, streams: list[list[int]], seed: int) -> list[tuple[list[int], list[float]]]:
        out: list[tuple[list[int], list[float]]] = []
        for start in range(0, len(streams), self.chunk):
            out.extend(self._generate(streams[start : start + self.chunk], seed + start))
        return out

    def _generate(self, streams: list[list[int]], seed: int) -> list[tuple[list[int], list[float]]]:
        import torch

        pad = self.tokenizer.pad_token_id
        if pad is None:
            pad = self.tokenizer.eos_token_id
        width = max(len(s) for s in streams)
        device = self.model.device
        input_ids = torch.tensor([[pad] * (width - len(s)) + s for s in streams], device=device)
        attention = torch.tensor(
            [[0] * (width - len(s)) + [1] * len(s) for s in streams], device=device
        )
        devices = [device.index or 0] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices), torch.no_grad():
            torch.manual_seed(seed)
            output = self.model.generate(
                input_ids=input_ids,
                attention_mask=attention,
                do_sample=True,
                temperature=self.temperature,
                top_p=self.top_p,
                top_k=0,
                max_new_tokens=self.max_new_tokens,
                pad_token_id=pad,
                eos_token_id=sorted(self.stop_ids),
                return_dict_in_generate=True,
                output_scores=True,
            )
        new = output.sequences[:, width:]
        steps = torch.stack(output.scores, dim=1).float().log_softmax(dim=-1)
        chosen = steps.gather(-1, new.unsqueeze(-1)).squeeze(-1)
        return [
            cut_at_stop(row, logps, self.stop_ids)
            for row, logps in zip(new.tolist(), chosen.tolist(), strict=True)
        ]


class VLLMGenerator:
    """Sampling through TRL's vLLM integration (colocate or server mode), with vLLM logprobs.

    ``trainer.vllm_generation`` samples with the trainer's temperature, top_p and
    ``max_completion_length`` (set to the per-turn limit), and keeps its weights in sync with the
    model being trained (TRL syncs before each ``rollout_func`` call).
    """

    def __init__(self, trainer: Any, tokenizer: Any) -> None:
        self.trainer = trainer
        self.stop_ids = learner_stop_ids(trainer.model, tokenizer)

    def __call__(self, streams: list[list[int]], seed: int) -> list[tuple[list[int], list[float]]]:
        generation = self.trainer.vllm_generation
        _, completion_ids, logprobs, _ = generation.generate(
            prompts=streams, images=None, num_generations=1
        )
        if logprobs is None:
            logprobs = [[[0.0]] * len(ids) for ids in completion_ids]
        results = []
        for ids, logps in zip(completion_ids, logprobs, strict=True):
            flat = [float("nan") if lp is None or lp[0] is None else float(lp[0]) for lp in logps]
            results.append(cut_at_stop(list(ids), flat, self.stop_ids))
        return results
