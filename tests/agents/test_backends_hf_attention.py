"""The hf back-end's CPU attention: a segment after cached tokens, and padded decode steps."""

from __future__ import annotations

import torch

from agents.backends.hf_attention import padded_spans, segment_attention


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


def padded_mask(spans: list[tuple[int, int]], n: int) -> torch.Tensor:
    """transformers' boolean mask for a batch: causal, and keys only inside each row's span."""
    real = torch.zeros(len(spans), n, dtype=torch.bool)
    for row, (start, end) in enumerate(spans):
        real[row, start:end] = True
    return (torch.ones(n, n, dtype=torch.bool).tril() & real[:, None, :])[:, None]


def test_a_left_and_right_padded_batch_attends_like_the_masked_kernel_gradients_included() -> None:
    generator = torch.Generator().manual_seed(2)
    spans = [(0, 11), (3, 11), (2, 7), (0, 0)]  # unpadded, left, both sides, all padding
    query = torch.randn(4, 4, 11, 32, generator=generator, requires_grad=True)
    key, value = (torch.randn(4, 2, 11, 32, generator=generator, requires_grad=True) for _ in "kv")
    mask = padded_mask(spans, 11)
    output, _ = segment_attention(Layer(), query, key, value, mask, scaling=32**-0.5)
    expected = reference(query, key, value, mask)
    real = mask[:, 0, -1]  # (rows, n): the real tokens
    assert torch.allclose(output[real], expected[real], atol=1e-6)
    assert torch.equal(output[~real], torch.zeros_like(output[~real]))
    grads = torch.autograd.grad(output[real].sum(), (query, key, value))
    expected_grads = torch.autograd.grad(expected[real].sum(), (query, key, value))
    for got, want in zip(grads, expected_grads, strict=True):
        assert torch.allclose(got, want, atol=1e-5)


def test_the_spans_are_read_only_off_masks_that_are_causal_within_one_span_per_row() -> None:
    mask = padded_mask([(2, 9), (0, 6)], 9)
    assert padded_spans(mask) == [(2, 9), (0, 6)]
    additive = torch.zeros(mask.shape).masked_fill_(~mask, float("-inf"))
    assert padded_spans(additive) == [(2, 9), (0, 6)]
    holed = mask.clone()
    holed[0, 0, 5:, 4] = False  # a key inside the span hidden: not one span
    assert padded_spans(holed) is None
    both_ways = mask.clone()
    both_ways[1, 0, 0, :6] = True  # a real query sees a later key: not causal
    assert padded_spans(both_ways) is None
    after_cache = torch.ones(1, 1, 3, 9, dtype=torch.bool)  # q != kv: a segment, not a batch
    assert padded_spans(after_cache) is None


def test_a_mask_broadcast_over_the_batch_keeps_sdpa_and_its_result() -> None:
    generator = torch.Generator().manual_seed(4)
    query = torch.randn(3, 4, 6, 32, generator=generator)
    key, value = (torch.randn(3, 2, 6, 32, generator=generator) for _ in "kv")
    mask = padded_mask([(0, 6)], 6)  # one row of mask for three rows of queries
    output, _ = segment_attention(Layer(), query, key, value, mask, scaling=32**-0.5)
    assert output.shape == (3, 6, 4, 32)
    assert torch.allclose(output, reference(query, key, value, mask), atol=1e-6)


def test_a_tiny_models_padded_batch_gives_each_row_the_logits_it_gets_alone(tmp_path) -> None:
    from transformers import AutoModelForCausalLM

    from agents.backends.hf_attention import register
    from agents.testing.tiny_model import build_tiny_model

    folder = build_tiny_model(tmp_path / "tiny", seed=0)
    model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation=register())
    generator = torch.Generator().manual_seed(3)
    ids = torch.randint(5, 1000, (3, 40), generator=generator)
    spans = [(0, 40), (7, 40), (4, 30)]
    attention = torch.zeros(3, 40, dtype=torch.long)
    for row, (start, end) in enumerate(spans):
        attention[row, start:end] = 1
    with torch.no_grad():
        batch = model(input_ids=ids, attention_mask=attention).logits
        for row, (start, end) in enumerate(spans):
            positions = torch.arange(start, end)[None]  # the batch's positions for this row
            alone = model(input_ids=ids[row : row + 1, start:end], position_ids=positions).logits
            assert torch.allclose(batch[row, start:end], alone[0], atol=1e-5)


def test_one_forward_reads_the_spans_once_and_use_spans_false_gives_sdpa_the_same_logits(
    tmp_path, monkeypatch
) -> None:
    from transformers import AutoModelForCausalLM

    from agents.backends import hf_attention
    from agents.testing.tiny_model import build_tiny_model

    folder = build_tiny_model(tmp_path / "tiny", seed=0)
    attention_name = hf_attention.register()
    model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation=attention_name)
    assert model.config.num_hidden_layers > 1
    calls = []

    def counted(mask):
        calls.append(mask)
        return padded_spans(mask)

    monkeypatch.setattr(hf_attention, "padded_spans", counted)
    ids = torch.randint(5, 1000, (2, 24), generator=torch.Generator().manual_seed(5))
    attention = torch.ones(2, 24, dtype=torch.long)
    attention[1, :6] = 0  # left padding: a padded batch without a cache
    with torch.no_grad():
        spans = model(input_ids=ids, attention_mask=attention).logits
        assert len(calls) == 1  # every layer got the same mask: read once
        previous = hf_attention.use_spans(False)
        try:
            sdpa = model(input_ids=ids, attention_mask=attention).logits
        finally:
            hf_attention.use_spans(previous)
    assert len(calls) == 1  # switched off: the spans are not read at all
    assert previous is True
    assert torch.allclose(spans[0], sdpa[0], atol=1e-5)
    assert torch.allclose(spans[1, 6:], sdpa[1, 6:], atol=1e-5)
