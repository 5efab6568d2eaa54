"""The hf back-end's and the trainer's attention on CPU: flash kernels where SDPA would take a mask.

When a prompt is prefilled after cached tokens (a conversation's next turn, ``kv_reuse``), its
queries see every cached key and their own segment causally. transformers hands SDPA that as an
explicit (segment x all keys) boolean mask, which sends PyTorch's CPU kernel down its masked path,
measured 1.5-2x slower than the unmasked flash kernel. Here such a segment is two flash calls, all
cached keys without a mask and its own keys with ``is_causal``, merged by their log-sum-exps: the
same attention, bit for bit the same whenever the same segments are computed (which is what makes
conversation reuse exact).

A padded batch without a cache (the trainer's loss over streams whose prompts are left-padded
and completions right-padded; a batched prefill) has one contiguous span of real tokens per row,
each attending causally within its span. transformers hands SDPA that as a (rows x q x keys)
boolean mask, and PyTorch's CPU kernel then materialises every row's score matrix (its math path;
18.5% of a GRPO step, docs/performance.md). Here each row's span is one causal flash call
(autograd included), padding positions output zeros: the same attention for every real token,
since no real query ever sees a padding key. :func:`padded_spans` reads the spans off the mask and
checks the mask is exactly that; any other mask keeps SDPA. transformers hands every layer of one
forward the same mask tensor, so the spans are read once per forward (:func:`_spans_of`), not once
per layer. ``use_spans(False)`` turns the span path off (padded batches through SDPA's mask, as
before it existed): ``benchmarks/bench_speed.py`` measures the two side by side.

Decoding steps of a padded batch keep SDPA with the mask, given as additive floats (measured ~20%
faster than boolean on CPU). Registered with transformers' attention and mask interfaces as
``ATTENTION``; anything else (GPU tensors, dropout, sliding-window layers) goes to transformers'
own SDPA function.
"""

from __future__ import annotations

from typing import Any

ATTENTION = "arena_cpu_segments"
_registered = False
_spans_enabled = True
_last_spans: tuple[Any, list[tuple[int, int]] | None] = (None, None)
"""(mask, its spans) of the last padded batch: the mask is held so its identity stays unique."""


def use_spans(enabled: bool) -> bool:
    """Turn the flash-span path for padded batches on or off; returns the previous setting."""
    global _spans_enabled
    previous, _spans_enabled = _spans_enabled, enabled
    return previous


def _spans_of(attention_mask: Any) -> list[tuple[int, int]] | None:
    """:func:`padded_spans` of ``attention_mask``, read once for the layers of one forward."""
    global _last_spans
    if not _spans_enabled:
        return None
    mask, spans = _last_spans  # one read: another thread may replace the pair meanwhile
    if mask is not attention_mask:
        spans = padded_spans(attention_mask)
        _last_spans = (attention_mask, spans)
    return spans


def segment_attention(
    module: Any,
    query: Any,
    key: Any,
    value: Any,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[Any, None]:
    """transformers attention function: (batch, q, heads, dim) output and no weights."""
    import torch
    from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward

    q_length, kv_length = query.shape[2], key.shape[2]
    one_row_after_cache = query.shape[0] == 1 and 1 < q_length < kv_length
    windowed = kwargs.get("sliding_window") is not None
    plain = query.device.type == "cpu" and not dropout and not windowed
    spans = _spans_of(attention_mask) if plain and q_length == kv_length > 1 else None
    if spans is not None and len(spans) == query.shape[0]:  # a broadcast mask keeps SDPA
        return span_attention(module, query, key, value, spans, scaling), None
    if not plain or not one_row_after_cache:
        cpu_mask = query.device.type == "cpu" and attention_mask is not None
        if cpu_mask and attention_mask.dtype == torch.bool:
            additive = torch.zeros(attention_mask.shape, dtype=query.dtype)
            attention_mask = additive.masked_fill_(~attention_mask, float("-inf"))
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    groups = getattr(module, "num_key_value_groups", 1)
    if groups > 1:
        key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    cached = kv_length - q_length
    past, past_lse = flash(query, key[:, :, :cached], value[:, :, :cached], scale=scaling)[:2]
    own, own_lse = flash(
        query, key[:, :, cached:], value[:, :, cached:], is_causal=True, scale=scaling
    )[:2]
    top = torch.maximum(past_lse, own_lse)
    past_weight = (past_lse - top).exp().unsqueeze(-1)
    own_weight = (own_lse - top).exp().unsqueeze(-1)
    output = (past * past_weight + own * own_weight) / (past_weight + own_weight)
    return output.to(query.dtype).transpose(1, 2).contiguous(), None


def padded_spans(attention_mask: Any) -> list[tuple[int, int]] | None:
    """Each row's (start, end) of real tokens when ``attention_mask`` (rows, 1, n, n; boolean or
    additive) is causal attention within one contiguous span per row, else None."""
    import torch

    if attention_mask is None or attention_mask.dim() != 4 or attention_mask.shape[1] != 1:
        return None
    allowed = (
        attention_mask[:, 0] if attention_mask.dtype == torch.bool else attention_mask[:, 0] == 0
    )
    n, keys = allowed.shape[1:]
    if n != keys:
        return None
    real = allowed[:, -1]  # under causal padding masks the last query sees exactly the real keys
    count = real.sum(-1)
    start = real.to(torch.int8).argmax(-1)
    where = torch.arange(n)
    if not torch.equal(real, (where >= start[:, None]) & (where < (start + count)[:, None])):
        return None
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    expected = causal & real[:, None, :]
    queries = real[:, :, None]  # what a padding query sees does not matter
    if not torch.equal(allowed & queries, expected & queries):
        return None
    return list(zip(start.tolist(), (start + count).tolist(), strict=True))


def span_attention(
    module: Any, query: Any, key: Any, value: Any, spans: list[tuple[int, int]], scaling: Any
) -> Any:
    """(rows, n, heads, dim): each row's span attends causally to itself by one flash call."""
    import torch
    from torch.nn.functional import pad, scaled_dot_product_attention
    from transformers.integrations.sdpa_attention import repeat_kv

    groups = getattr(module, "num_key_value_groups", 1)
    if groups > 1:
        key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    n = query.shape[2]
    rows = []
    for row, (start, end) in enumerate(spans):
        if end <= start:
            rows.append(query.new_zeros(query.shape[1:]))
            continue
        part = slice(row, row + 1), slice(None), slice(start, end)
        own = scaled_dot_product_attention(
            query[part], key[part], value[part], is_causal=True, scale=scaling
        )
        rows.append(pad(own[0], (0, 0, start, n - end)))
    return torch.stack(rows).transpose(1, 2).contiguous()


def register() -> str:
    """Register ``ATTENTION`` with transformers (once) and return its name."""
    global _registered
    if not _registered:
        from transformers import AttentionInterface, AttentionMaskInterface
        from transformers.masking_utils import sdpa_mask

        AttentionInterface.register(ATTENTION, segment_attention)
        AttentionMaskInterface.register(ATTENTION, sdpa_mask)
        _registered = True
    return ATTENTION
