"""The learner's samplers: learner streams in, sampled reply tokens and their logprobs out.

A generator is ``(contexts, seed) -> [(new token ids, sampling logprobs), ...]``, one pair per
:class:`Context` (:data:`Generate`). A context is a learner seat's token stream so far, where its
earlier turns' prompts ended, and the stream's identity. Both generators stop a reply at the tokens
of :func:`agents.backends.hf_backend.stop_token_ids` (the model's eos ids, the tokenizer's eos, the
chat template's end-of-turn token), the definition the ``hf`` back-end uses to end the same
checkpoint's replies in evaluation, so training and evaluation stop on the same tokens.

**HF** (:class:`HFGenerator`, CPU or a GPU without vLLM): the project's decoding loop
(:mod:`agents.backends.hf_decode`) on the model being trained. Each row samples from its own numpy
generator seeded from the call's seed and the row's place (or from its context's ``share``: a
tree-rollout group's shared replies), and returns the log-probability of each
token under the distribution it was drawn from (temperature, nucleus): what TRL recomputes.

*KV reuse between turns.* A learner's context at turn ``k`` is its context at turn ``k - 1`` plus
its reply and the glue to the next prompt. The generator keeps each stream's prefill KV cache (one
rollout long, within ``kv_cache_bytes``) and prefills only the new tokens. It is exact: a context
is always prefilled in segments that end where the stream's earlier contexts ended
(``Context.ends``), with or without a cache, so a cache hit skips segments computed with the same
tokens, segments and arithmetic (the argument of :mod:`agents.backends.kv_reuse`); only prefill KV
is kept, never KV written while decoding a padded batch. A cache lives for one ``rollout_func``
call: the weights change at every optimizer step.

**vLLM** (:class:`VLLMGenerator`): TRL's vLLM integration, whose weights TRL syncs with the model
being trained before each rollout. Colocated, every request gets its own seed (from the call's
seed and the row's place, as above) so a rollout is reproducible; a server samples unseeded. vLLM
reuses prompts through its own prefix cache.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from agents.backends.hf_backend import reply_end_token, stop_token_ids
from agents.backends.hf_decode import (
    Layers,
    RowSampling,
    cache_arg,
    cache_from_layers,
    cache_layers,
    decode,
    prefill,
)
from agents.backends.kv_reuse import ConversationCache, kv_nbytes
from agents.steering import Steer, token_steer


@dataclass(frozen=True)
class Context:
    """A learner stream to continue."""

    ids: list[int]
    """The stream's tokens so far (prompt, replies and glue), ending with a generation prompt."""
    ends: tuple[int, ...]
    """Lengths of the stream's earlier contexts: where its earlier turns' prompts ended."""
    key: int
    """The stream's identity within one rollout (its KV cache's key)."""
    steer: Steer | None = None
    """Forced tokens of a protocol-legal move (the learner's ``steer`` option)."""
    share: int | None = None
    """The row's own sampling seed, used instead of the call's: contexts with the same share
    and the same tokens draw the same reply (a tree-rollout group's shared replies,
    ``learner.shared_replies``); None for an independent draw."""


class Sample(NamedTuple):
    """A sampled reply: its tokens, their sampling logprobs, and which tokens were forced."""

    ids: list[int]
    logprobs: list[float]
    forced: tuple[bool, ...] = ()
    """Per token, True where the steer wrote it (:mod:`agents.steering`); () when none was."""


Generate = Callable[[list[Context], int], list[Sample]]
"""(contexts, seed) -> one sampled reply per context."""


def row_seed(seed: int, row: int) -> int:
    """The sampling seed of row ``row`` of a generator call seeded ``seed``."""
    return int(np.random.SeedSequence([seed, row]).generate_state(1)[0]) & 0x7FFFFFFF


def sampling_seed(context: Context, seed: int, row: int) -> int:
    """The seed a context samples with: its share when it has one, else its row's."""
    return row_seed(seed, row) if context.share is None else context.share


def learner_stop_ids(model: Any, tokenizer: Any) -> frozenset[int]:
    """The stop tokens of a (possibly PEFT-wrapped) model: the back-ends' definition."""
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    return stop_token_ids(eos, tokenizer)


def cut_at_stop(
    ids: list[int], logprobs: list[float], stops: frozenset[int], forced: Sequence[bool] = ()
) -> Sample:
    """The reply up to and including its first stop token (all of it when there is none)."""
    length = next((i + 1 for i, t in enumerate(ids) if t in stops), len(ids))
    marks = tuple(forced[:length]) if any(forced[:length]) else ()
    return Sample(ids[:length], logprobs[:length], marks)


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


@dataclass(frozen=True)
class StreamPrompt:
    """A stream's last prefilled context: its tokens and their KV cache."""

    ids: tuple[int, ...]
    layers: Layers
    nbytes: int


class HFGenerator:
    """Sampling with the project's decoding loop, ``chunk`` rows decoded together, each stream's
    KV kept between its turns (module docstring)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        temperature: float,
        top_p: float,
        max_new_tokens: int,
        chunk: int,
        kv_cache_bytes: int = 0,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.sampling = RowSampling(temperature, top_p, max_new_tokens)
        self.chunk = chunk
        self.stop_ids = learner_stop_ids(model, tokenizer)
        self.end_token = reply_end_token(tokenizer, self.stop_ids)
        self.cache: ConversationCache[StreamPrompt] = ConversationCache(kv_cache_bytes)
        self.arg = cache_arg(model)
        self.prefilled = 0
        """Context tokens prefilled so far (the rest came from the cache)."""
        self.reused = 0
        """Context tokens whose KV came from the cache."""

    def __call__(self, contexts: list[Context], seed: int) -> list[Sample]:
        import torch

        out: list[Sample] = []
        with torch.inference_mode():
            for start in range(0, len(contexts), self.chunk):
                part = contexts[start : start + self.chunk]
                rngs = [
                    np.random.default_rng(sampling_seed(c, seed, start + i))
                    for i, c in enumerate(part)
                ]
                caches, logits = zip(*(self._prefill(context) for context in part), strict=True)
                steers = [context.steer for context in part]
                decoded = decode(
                    self.model,
                    caches,
                    logits,
                    [self.sampling] * len(part),
                    rngs,
                    self.stop_ids,
                    self.arg,
                    logprobs=True,
                    steer=token_steer(self.tokenizer, steers, self.end_token, self.stop_ids),
                )
                out.extend(
                    cut_at_stop(ids, lps, self.stop_ids, forced)
                    for ids, lps, forced in zip(*decoded, strict=True)
                )
        return out

    def _prefill(self, context: Context) -> tuple[Any, Any]:
        """(KV cache, last logits) of a context, continuing its stream's cached prefill when the
        context extends it at one of its segment ends."""
        ids = context.ids
        ends = [*sorted(e for e in set(context.ends) if 0 < e < len(ids)), len(ids)]
        entry = self.cache.get(context.key) if self.cache.budget else None
        past, done = None, 0
        if (
            entry is not None
            and len(entry.ids) in ends[:-1]
            and tuple(ids[: len(entry.ids)]) == entry.ids
        ):
            past = cache_from_layers(entry.layers, self.model.config)
            done = len(entry.ids)
        past, logits = prefill(self.model, ids, ends, self.arg, past, done)
        self.prefilled += len(ids) - done
        self.reused += done
        if self.cache.budget:
            layers = cache_layers(past)
            self.cache.put(context.key, StreamPrompt(tuple(ids), layers, kv_nbytes(layers)))
        return past, logits


class VLLMGenerator:
    """Sampling through TRL's vLLM integration (colocate or server mode), with vLLM logprobs.

    ``trainer.vllm_generation`` holds the engine (colocate) or the client (server), the sampling
    settings (the trainer's temperature, top_p and ``max_completion_length``, set to the per-turn
    limit) and keeps the weights in sync with the model being trained (TRL syncs before each
    ``rollout_func`` call).
    """

    def __init__(self, trainer: Any, tokenizer: Any) -> None:
        self.generation = trainer.vllm_generation
        self.stop_ids = learner_stop_ids(trainer.model, tokenizer)

    def __call__(self, contexts: list[Context], seed: int) -> list[Sample]:
        if any(context.steer is not None for context in contexts):
            raise ValueError(
                "league.learner.steer: steered decoding runs on the hf sampler; with use_vllm "
                "set steer = 'none'"
            )
        prompts = [list(context.ids) for context in contexts]
        if self.generation.mode == "colocate":
            seeds = [sampling_seed(c, seed, row) for row, c in enumerate(contexts)]
            pairs = self._colocated(prompts, seeds)
        else:
            if any(context.share is not None for context in contexts):
                raise ValueError(
                    "league.learner.shared_replies: a vLLM server samples unseeded, so a "
                    "group's episodes cannot share replies; use vllm_mode = 'colocate' or the "
                    "hf sampler, or set shared_replies = [0]"
                )
            _, ids, logprobs, _ = self.generation.generate(
                prompts=prompts, images=None, num_generations=1
            )
            if logprobs is None:
                logprobs = [[[float("nan")]] * len(row) for row in ids]
            pairs = [
                (list(row), [_number(lp[0] if lp else None) for lp in lps])
                for row, lps in zip(ids, logprobs, strict=True)
            ]
        return [cut_at_stop(ids, lps, self.stop_ids) for ids, lps in pairs]

    def _colocated(self, prompts: Sequence[list[int]], seeds: Sequence[int]) -> list[Sample]:
        """One engine call, every request with its own seed, TRL's sampling settings."""
        from vllm import SamplingParams

        g = self.generation
        settings = {
            "n": 1,
            "repetition_penalty": g.repetition_penalty,
            "temperature": g.temperature,
            "top_p": g.top_p,
            "top_k": g.top_k,
            "min_p": 0.0 if g.min_p is None else g.min_p,
            "max_tokens": g.max_completion_length,
            "logprobs": 0,
            **g.generation_kwargs,
        }
        params = [SamplingParams(**{**settings, "seed": seed}) for seed in seeds]
        outputs = g.llm.generate(
            [{"prompt_token_ids": ids} for ids in prompts], sampling_params=params, use_tqdm=False
        )
        pairs = []
        for output in outputs:
            sample = output.outputs[0]
            ids = list(sample.token_ids)
            steps = sample.logprobs or [{}] * len(ids)
            chosen = [getattr(lp.get(t), "logprob", None) for t, lp in zip(ids, steps, strict=True)]
            pairs.append((ids, [_number(lp) for lp in chosen]))
        return pairs


def _number(value: float | None) -> float:
    """A logprob, NaN where vLLM has none (TRL then leaves that token's ratio at 1)."""
    return float("nan") if value is None else float(value)
