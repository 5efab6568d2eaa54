"""The decoding loop of a local transformers model, shared by the hf back-end and the GRPO
learner's sampler (``leagues.generators``): segmented prefill, one padded batch decoded together.

* ``prefill``: one prompt, unpadded, in segments that end at given token positions, continuing a
  cached prefix. Prefilling the same tokens in the same segments gives bit-identical keys, values
  and logits, which is what makes KV reuse between turns exact (``agents.backends.kv_reuse``).
* ``decode``: the prefilled caches left-padded into one static cache (``batch_cache``) and decoded
  together, one token per step, with an attention mask that hides the padding and per-row position
  ids; finished rows leave the batch (``keep_rows``). Each row samples with its own settings and
  its own numpy generator (``next_tokens``), so a row's tokens do not depend on its neighbours'
  random draws; optionally the sampling log-probability of every chosen token is returned
  (``token_logprobs``).

The tensor steps are pure functions, tested on their own.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from agents.steering import TokenSteer

Layers = tuple[tuple[Any, Any], ...]
"""Per layer (keys, values) of one prompt's cache, each (1, kv heads, tokens, head dim)."""


@dataclass(frozen=True)
class RowSampling:
    """How one row is decoded: its temperature (0: greedy), nucleus mass and token limit."""

    temperature: float
    top_p: float
    max_tokens: int


class Decoded(NamedTuple):
    """What :func:`decode` returns, one list per row."""

    tokens: list[list[int]]
    logprobs: list[list[float]]
    """Sampling log-probabilities (empty lists unless asked for); 0.0 for a forced token."""
    forced: list[list[bool]]
    """Per token: written by the steer (:mod:`agents.steering`), not sampled."""


def cache_arg(model: Any) -> str:
    """The forward argument that takes the KV cache (transformers 5 renamed ``past_key_values``
    to ``cache`` in some releases); PEFT models are asked through their base model."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    parameters = inspect.signature(base.forward).parameters
    return "cache" if "cache" in parameters else "past_key_values"


def cache_layers(past: Any) -> Layers:
    """The (keys, values) tensors of a DynamicCache, per layer."""
    return tuple((layer.keys, layer.values) for layer in past.layers)


def cache_from_layers(layers: Layers, config: Any) -> Any:
    """A DynamicCache continuing from ``layers`` (the tensors are not modified: new tokens are
    concatenated into new tensors)."""
    from transformers import DynamicCache

    return DynamicCache(ddp_cache_data=layers, config=config)


def prefill(
    model: Any,
    ids: Sequence[int],
    ends: Sequence[int],
    arg: str,
    past: Any = None,
    done: int = 0,
) -> tuple[Any, Any]:
    """(KV cache, last-position logits (1, vocab)) of ``ids``: the tokens after the first
    ``done`` (already in ``past``) prefilled in segments ending at each of ``ends`` beyond
    ``done``; the last end must be ``len(ids)``."""
    import torch

    if not ends or ends[-1] != len(ids) or done >= len(ids):
        raise ValueError(f"segments {list(ends)} after {done} cached tokens do not end a prompt of "
                         f"{len(ids)} tokens")  # fmt: skip
    device = model.device
    output = None
    for end in ends:
        if end <= done:
            continue
        cache = {} if past is None else {arg: past}
        output = model(
            input_ids=torch.tensor([list(ids[done:end])], device=device),
            use_cache=True,
            logits_to_keep=1,
            **cache,
        )
        past = getattr(output, arg)
        done = end
    assert output is not None
    return past, output.logits[:, -1]


def token_logprobs(logits: Any, temperature: Any, top_p: Any, tokens: Any) -> Any:
    """Log-probability of each row's ``tokens`` under the distribution it was drawn from: the
    softmax of the logits divided by the temperature (greedy rows: by 1), renormalised over the
    nucleus when ``top_p < 1`` (the kept set of ``next_tokens``). Float32, (rows,)."""
    import torch

    logits = logits.float()
    sampling = temperature > 0
    scaled = logits / torch.where(sampling, temperature, 1.0).unsqueeze(-1)
    logp = scaled.log_softmax(dim=-1)
    chosen = logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    truncated = sampling & (top_p < 1)
    if not bool(truncated.any()):
        return chosen
    probs, _ = torch.sort(logp.exp(), dim=-1, descending=True, stable=True)
    before = probs.cumsum(dim=-1) - probs
    kept = (probs * (before < top_p.unsqueeze(-1))).sum(dim=-1)
    return torch.where(truncated, chosen - kept.log(), chosen)


def next_tokens(logits: Any, temperature: Any, top_p: Any, uniform: Any) -> Any:
    """One token per row: argmax where temperature is 0, else an inverse-CDF draw.

    `logits` is (rows, vocab); `temperature`, `top_p` and `uniform` (numbers in [0, 1), one per
    row) are (rows,) float tensors. A sampling row keeps the smallest set of most likely tokens
    whose mass reaches top_p (at least one), renormalised; `uniform` picks the token whose
    cumulative-mass interval contains it, so equal uniforms give equal tokens.
    """
    import torch

    logits = logits.float()
    greedy = logits.argmax(dim=-1)
    sampling = temperature > 0
    if not bool(sampling.any()):
        return greedy
    scaled = logits / torch.where(sampling, temperature, 1.0).unsqueeze(-1)
    probs, order = torch.sort(scaled.softmax(dim=-1), dim=-1, descending=True, stable=True)
    before = probs.cumsum(dim=-1) - probs  # mass of the more likely tokens
    probs = probs * (before < top_p.unsqueeze(-1))
    cumulative = probs.cumsum(dim=-1)
    target = (uniform * cumulative[:, -1]).unsqueeze(-1)
    picked = torch.searchsorted(cumulative, target, right=True).clamp(max=probs.shape[-1] - 1)
    drawn = order.gather(-1, picked).squeeze(-1)
    return torch.where(sampling, drawn, greedy)


def batch_cache(caches: Sequence[Any], lengths: Sequence[int], size: int, config: Any) -> Any:
    """One StaticCache of `size` positions holding every row's prefill cache, left-padded.

    A static cache is written in place; transformers' DynamicCache concatenates the whole cache
    at every step, which measured 5x slower per decode step on 16 rows of 1,700 tokens.
    """
    import torch
    from transformers import StaticCache

    width = max(lengths)
    cache = StaticCache(config=config, max_cache_len=size)
    for index, layer in enumerate(cache.layers):
        if layer.is_sliding:
            raise ValueError(
                f"layer {index} uses sliding-window attention; the hf back-end pads caches for "
                "full attention only: use the vllm back-end for this model"
            )
        keys, values = [], []
        for row, length in zip(caches, lengths, strict=True):
            pad = (0, 0, width - length, 0)  # left-pad the sequence axis (dim -2)
            keys.append(torch.nn.functional.pad(row.layers[index].keys, pad))
            values.append(torch.nn.functional.pad(row.layers[index].values, pad))
        keys_batch, values_batch = torch.cat(keys), torch.cat(values)
        positions = torch.arange(width, device=keys_batch.device)
        layer.update(keys_batch, values_batch, cache_kwargs={"cache_position": positions})
    return cache


def fill_holes(keep: Sequence[int], count: int) -> list[int]:
    """The batch order after keeping the rows at places ``keep`` (ascending) of ``count``: as
    ``order[new place] = old place``, a kept row in the first ``len(keep)`` places stays where
    it is, and the kept rows beyond them move into the places the dropped rows left."""
    kept = len(keep)
    movers = iter(place for place in keep if place >= kept)
    staying = set(keep)
    order = [place if place in staying else next(movers) for place in range(kept)]
    assert len(order) == kept and count >= kept
    return order


def drop_rows(cache: Any, order: Sequence[int]) -> None:
    """Keep the rows ``order`` (from :func:`fill_holes`) of a StaticCache, in that order: the
    rows that move are copied into their places and each tensor is cut to its first
    ``len(order)`` rows (a view). Selecting the kept rows into new tensors copied the whole
    cache at every finished row, a quarter of an evaluation's time (docs/performance.md)."""
    import torch

    moves = [(new, old) for new, old in enumerate(order) if new != old]
    for layer in cache.layers:
        if moves:
            targets = torch.tensor([new for new, _ in moves], device=layer.keys.device)
            sources = torch.tensor([old for _, old in moves], device=layer.keys.device)
            layer.keys[targets] = layer.keys[sources]
            layer.values[targets] = layer.values[sources]
        layer.keys = layer.keys[: len(order)]
        layer.values = layer.values[: len(order)]
        layer.batch_size = len(order)


def decode(
    model: Any,
    caches: Sequence[Any],
    first_logits: Sequence[Any],
    rows: Sequence[RowSampling],
    rngs: Sequence[np.random.Generator],
    stop_ids: frozenset[int],
    arg: str,
    logprobs: bool = False,
    steer: TokenSteer | None = None,
) -> Decoded:
    """The new tokens of every prefilled row, with their sampling log-probabilities (empty
    lists unless ``logprobs``) and which of them were forced; a row ends at its first stop
    token or at its ``max_tokens``.

    ``caches`` and ``first_logits`` come from ``prefill``. ``steer(row, tokens so far)``, asked
    before the first draw and after every token, guides a row's next draw
    (:mod:`agents.steering`): tokens to force, which replace the sampled ones, one a step; or
    banned tokens, which when drawn are drawn again from the same distribution without them (the
    same uniform number); or allowed tokens, a draw outside which is drawn again among them.
    Either way the token is marked forced, with log-probability 0 (not the policy's free
    choice), except a draw held for an exploring start (``Guidance.explored``), which keeps
    its log-probability under the unheld distribution and counts as sampled; every row draws
    its uniform number each step, so a steered and an unsteered run share their random
    streams.
    """
    import torch

    device = model.device
    lengths = [layer_length(cache) for cache in caches]
    width = max(lengths)
    most = max(r.max_tokens for r in rows)
    size = width + most - 1  # a row's last token is never fed back to the model
    config = model.config
    cache = batch_cache(caches, lengths, size, config)
    logits = torch.cat(list(first_logits))
    mask = torch.zeros(len(rows), size, dtype=torch.long, device=device)
    for row, length in enumerate(lengths):
        mask[row, width - length : width] = 1
    positions = torch.tensor(lengths, device=device)
    live = list(range(len(rows)))  # rows still in the batch, in batch order
    generated: list[list[int]] = [[] for _ in rows]
    scores: list[list[float]] = [[] for _ in rows]
    forced: list[list[bool]] = [[] for _ in rows]
    queued: list[list[int]] = [[] for _ in rows]
    banned: list[frozenset[int]] = [frozenset() for _ in rows]
    allowed: list[frozenset[int]] = [frozenset() for _ in rows]
    explored = [False] * len(rows)
    if steer is not None:  # a reply may open with forced tokens (a field label)
        for row in live:
            guidance = steer(row, [])
            queued[row], banned[row], allowed[row], explored[row] = (
                guidance.forced[:],
                *guidance[1:],
            )
    for step in range(most):
        temperature = torch.tensor([rows[r].temperature for r in live], device=device)
        top_p = torch.tensor([rows[r].top_p for r in live], device=device)
        uniform = torch.tensor(
            [rngs[r].random() if rows[r].temperature > 0 else 0.0 for r in live], device=device
        )
        tokens = next_tokens(logits, temperature, top_p, uniform)
        steered = [bool(queued[r]) for r in live]
        if any(steered):
            tokens = torch.tensor(
                [queued[r].pop(0) if s else t for r, s, t in zip(live, steered, tokens.tolist(),
                 strict=True)], dtype=tokens.dtype, device=device,
            )  # fmt: skip
        redraw = [place for place, (row, token) in enumerate(zip(live, tokens.tolist(),
                  strict=True)) if token in banned[row] or (allowed[row] and token not in
                  allowed[row])]  # fmt: skip
        if redraw:
            tokens = tokens.clone()
            for place in redraw:
                one, row = slice(place, place + 1), live[place]
                if allowed[row]:
                    kept = torch.full_like(logits[one], float("-inf"))
                    only = sorted(allowed[row])
                    kept[0, only] = logits[place, only]
                else:
                    kept = logits[one].clone()
                    kept[0, sorted(banned[row])] = float("-inf")
                tokens[place] = next_tokens(kept, temperature[one], top_p[one], uniform[one])[0]
                steered[place] = not explored[row]
        if logprobs:
            chosen = token_logprobs(logits, temperature, top_p, tokens).tolist()
            for row, value, was_forced in zip(live, chosen, steered, strict=True):
                scores[row].append(0.0 if was_forced else value)
        keep = []
        for place, (row, token) in enumerate(zip(live, tokens.tolist(), strict=True)):
            generated[row].append(token)
            forced[row].append(steered[place])
            banned[row] = allowed[row] = frozenset()
            explored[row] = False
            if steer is not None and not queued[row]:
                guidance = steer(row, generated[row])
                queued[row], banned[row], allowed[row], explored[row] = (
                    guidance.forced[:],
                    *guidance[1:],
                )
            if token not in stop_ids and len(generated[row]) < rows[row].max_tokens:
                keep.append(place)
        if not keep:
            break
        if len(keep) < len(live):
            order = fill_holes(keep, len(live))
            drop_rows(cache, order)
            chosen_rows = torch.tensor(order, device=device)
            mask, positions = mask[chosen_rows], positions[chosen_rows]
            tokens = tokens[chosen_rows]
            live = [live[place] for place in order]
        mask[:, width + step] = 1
        output = model(
            input_ids=tokens.unsqueeze(-1),
            attention_mask=mask,
            position_ids=positions.unsqueeze(-1),
            use_cache=True,
            **{arg: cache},
        )
        positions = positions + 1
        logits = output.logits[:, -1]
    return Decoded(generated, scores, forced)


def layer_length(cache: Any) -> int:
    """Tokens held by a one-row DynamicCache."""
    return int(cache.layers[0].keys.shape[-2])
