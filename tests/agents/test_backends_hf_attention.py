"""The hf back-end's CPU attention: a segment after cached tokens, and padded decode steps."""

from __future__ import annotations

import torch

from agents.backends.hf_attention import segment_attention


class Layer:
    """What transformers' attention functions read from the attention module (GQA: 2 groups)."""

    num_key_value_groups = 2
    is_causal = True


def reference(query, key, value, mask):
    key, value = key.repeat_interleave(2, dim=1), value.repeat_interleave(2, dim=1)
    out = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=mask)
    return out.transpose(1, 2)


def test_a_segment_after_cached_tokens_attends_to_all_of_them_and_causally_to_itself() -> None:
    generator = torch.Generator().manual_seed(0)
    query = torch.randn(1, 4, 5, 32, generator=generator)
    key, value = (torch.randn(1, 2, 12, 32, generator=generator) for _ in range(2))
    # 7 cached tokens, then the 5-token segment: row i sees keys 0..7+i.
    mask = torch.ones(5, 12, dtype=torch.bool).tril(diagonal=7)[None, None]
    output, weights = segment_attention(Layer(), query, key, value, mask, scaling=32**-0.5)
    assert weights is None and output.shape == (1, 5, 4, 32)
    assert torch.allclose(output, reference(query, key, value, mask), atol=1e-6)
    again, _ = segment_attention(Layer(), query, key, value, mask, scaling=32**-0.5)
    assert torch.equal(output, again)  # deterministic: what makes conversation reuse exact


def test_padded_decode_rows_see_only_their_own_tokens() -> None:
    generator = torch.Generator().manual_seed(1)
    query = torch.randn(3, 4, 1, 32, generator=generator)
    key, value = (torch.randn(3, 2, 9, 32, generator=generator) for _ in range(2))
    mask = torch.ones(3, 1, 1, 9, dtype=torch.bool)
    mask[0, ..., :4] = False  # row 0 is left-padded by four positions
    output, _ = segment_attention(Layer(), query, key, value, mask, scaling=32**-0.5)
    assert torch.allclose(output, reference(query, key, value, mask), atol=1e-6)
    alone, _ = segment_attention(
        Layer(), query[:1], key[:1, :, 4:], value[:1, :, 4:], None, scaling=32**-0.5
    )
    assert torch.allclose(output[:1], alone, atol=1e-6)
