"""The hf back-end's attention on CPU: a prefill segment after cached tokens without a mask.

When a prompt is prefilled after cached tokens (a conversation's next turn, ``kv_reuse``), its
queries see every cached key and their own segment causally. transformers hands SDPA that as an
explicit (segment x all keys) boolean mask, which sends PyTorch's CPU kernel down its masked path,
measured 1.5-2x slower than the unmasked flash kernel. Here such a segment is two flash calls, all
cached keys without a mask and its own keys with ``is_causal``, merged by their log-sum-exps: the
same attention, bit for bit the same whenever the same segments are computed (which is what makes
conversation reuse exact). Decoding steps of a padded batch keep SDPA with the mask, given as
additive floats (measured ~20% faster than boolean on CPU).

Registered with transformers' attention and mask interfaces as ``ATTENTION`` and used only by the
hf back-end's own model, whose single-row prefill never pads; anything else (GPU tensors, batches
of several rows, dropout, sliding-window layers) goes to transformers' own SDPA function.
"""

from __future__ import annotations

from typing import Any

ATTENTION = "arena_cpu_segments"
_registered = False


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
    if query.device.type != "cpu" or dropout or windowed or not one_row_after_cache:
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
