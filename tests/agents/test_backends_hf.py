"""Transformers back-end and the tiny test model it runs on (CPU, real files)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.backends import ChatRequest, SamplingConfig, backend_from_spec
from agents.backends.hf_backend import HFBackend, group_requests, load_tokenizer
from agents.testing.tiny_model import (
    IM_END,
    IM_START,
    build_tiny_model,
    negotiation_corpus,
)

PROTOCOL_TEXT = (
    "Thought: Buyer 2 seems eager; hold the price.\nTarget: 2\n"
    "Talk: I can't go lower than $34.99.\nAction: [SELL] $34.99 12345"
)


@pytest.fixture(scope="module")
def hf_backend(tiny_model_dir: Path) -> Iterator[HFBackend]:
    backend = backend_from_spec("hf", str(tiny_model_dir), {"device": "cpu", "batch_size": "4"})
    assert isinstance(backend, HFBackend)
    yield backend
    backend.close()


def chat(user: str, **sampling: float | int | None) -> ChatRequest:
    return ChatRequest(
        messages=(("system", "You are the seller of a guitar."), ("user", user)),
        sampling=SamplingConfig(**sampling),  # type: ignore[arg-type]
    )


def test_corpus_is_protocol_text_and_deterministic_per_seed() -> None:
    corpus = negotiation_corpus(seed=3, n_dialogues=20)
    assert corpus == negotiation_corpus(seed=3, n_dialogues=20)
    assert corpus != negotiation_corpus(seed=4, n_dialogues=20)
    text = "".join(corpus)
    for marker in ("Thought: ", "Talk: ", "Action: [", "Target: ", " $", IM_START, IM_END):
        assert marker in text


def test_tokenizer_round_trips_exactly_through_backend_loader(tiny_model_dir: Path) -> None:
    from tokenizers import Tokenizer

    raw = Tokenizer.from_file(str(tiny_model_dir / "tokenizer.json"))
    loaded = load_tokenizer(tiny_model_dir)
    for text in (PROTOCOL_TEXT, "Action: [BUY] $10.45", "  spaced\n\nlines  "):
        ids = loaded(text, add_special_tokens=False)["input_ids"]
        assert ids == raw.encode(text, add_special_tokens=False).ids
        assert loaded.decode(ids) == text
    assert loaded.padding_side == "left"
    assert (loaded.eos_token, loaded.pad_token) == (IM_END, "<|pad|>")
    assert len(loaded) == 512


def test_chat_template_is_chatml_with_special_tokens_as_single_ids(tiny_model_dir: Path) -> None:
    tokenizer = load_tokenizer(tiny_model_dir)
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert text == f"{IM_START}system\nS{IM_END}\n{IM_START}user\nU{IM_END}\n{IM_START}assistant\n"
    ids = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, return_dict=False
    )
    assert ids.count(tokenizer.convert_tokens_to_ids(IM_START)) == 3
    assert ids.count(tokenizer.eos_token_id) == 2


def test_tiny_model_build_is_reproducible_for_a_seed(tmp_path: Path, tiny_model_dir: Path) -> None:
    rebuilt = build_tiny_model(tmp_path / "again", seed=0)
    for name in ("tokenizer.json", "model.safetensors", "config.json"):
        assert (rebuilt / name).read_bytes() == (tiny_model_dir / name).read_bytes()
    config = json.loads((rebuilt / "config.json").read_text())
    assert (config["hidden_size"], config["num_hidden_layers"], config["vocab_size"]) == (
        64,
        2,
        512,
    )


def test_tiny_model_rejects_impossible_shapes(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="divisible"):
        build_tiny_model(tmp_path, hidden=30, heads=4)
    with pytest.raises(ValueError, match="vocab_size=100"):
        build_tiny_model(tmp_path, vocab_size=100)


def test_batch_of_chat_requests_generates_text_with_token_counts(hf_backend: HFBackend) -> None:
    requests = [chat(f"Last offer: ${10 + i}.50", max_tokens=12, seed=i) for i in range(3)]
    completions = hf_backend.generate(requests)
    assert len(completions) == 3
    for request, completion in zip(requests, completions, strict=True):
        prompt_ids = hf_backend.tokenizer.apply_chat_template(
            request.as_openai_messages(),
            add_generation_prompt=True,
            tokenize=True,
            return_dict=False,
        )
        assert completion.error is None
        assert completion.text
        assert IM_START not in completion.text and "<|pad|>" not in completion.text
        assert completion.tokens_in == len(prompt_ids)
        assert 1 <= completion.tokens_out <= 12


def test_greedy_batch_with_left_padding_matches_one_at_a_time(hf_backend: HFBackend) -> None:
    # Prompts of different lengths force real left padding inside one batch.
    requests = [chat("Last offer: $12.50 " * n, temperature=0, max_tokens=16) for n in range(1, 6)]
    batched = hf_backend.generate(requests)
    singles = [hf_backend.generate([r])[0] for r in requests]
    assert [c.text for c in batched] == [c.text for c in singles]
    assert [c.tokens_out for c in batched] == [c.tokens_out for c in singles]
    assert len({c.text for c in batched}) > 1  # the prompts really lead to different outputs


def test_same_seed_gives_same_text_whatever_the_batch(hf_backend: HFBackend) -> None:
    target = chat("Would you take $20?", temperature=1.0, max_tokens=16, seed=11)
    alone = hf_backend.generate([target])[0].text
    with_neighbours = hf_backend.generate(
        [chat("other", temperature=1.0, max_tokens=16, seed=1), target, chat("x", temperature=0)]
    )[1].text
    assert alone == with_neighbours
    other_seed = hf_backend.generate(
        [chat("Would you take $20?", temperature=1.0, max_tokens=16, seed=12)]
    )[0].text
    assert other_seed != alone


def test_seeded_generation_leaves_global_torch_rng_untouched(hf_backend: HFBackend) -> None:
    import torch

    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    hf_backend.generate([chat("hi", temperature=1.0, max_tokens=4, seed=5)])
    assert torch.equal(torch.rand(3), expected)


def test_prompt_longer_than_context_fails_alone(hf_backend: HFBackend) -> None:
    too_long = chat("x", temperature=0, max_tokens=2048)
    fine = chat("y", temperature=0, max_tokens=4)
    errors_before = hf_backend.stats.errors
    failed, ok = hf_backend.generate([too_long, fine])
    assert failed.error is not None and "exceeds the model context of 2048" in failed.error
    assert ok.error is None and ok.tokens_out >= 1
    assert hf_backend.stats.errors == errors_before + 1


def test_stats_accumulate_requests_and_tokens(hf_backend: HFBackend) -> None:
    before = hf_backend.stats.as_dict()
    completions = hf_backend.generate([chat("a", temperature=0, max_tokens=5), chat("bb")])
    after = hf_backend.stats.as_dict()
    assert after["requests"] - before["requests"] == 2
    assert after["tokens_in"] - before["tokens_in"] == sum(c.tokens_in for c in completions)
    assert after["tokens_out"] - before["tokens_out"] == sum(c.tokens_out for c in completions)
    assert after["seconds"] > before["seconds"]


def test_group_requests_batches_greedy_and_unseeded_but_isolates_seeded_sampling() -> None:
    greedy = [chat("g", temperature=0, seed=s, max_tokens=8) for s in (1, 2, None)]
    seeded = [chat("s", temperature=0.7, seed=s) for s in (1, 1)]
    unseeded = [chat("u", temperature=0.7) for _ in range(3)]
    requests = [
        greedy[0],
        seeded[0],
        unseeded[0],
        greedy[1],
        unseeded[1],
        seeded[1],
        greedy[2],
        unseeded[2],
    ]
    assert group_requests(requests, batch_size=2) == [[0, 3], [6], [2, 4], [7], [1], [5]]
    assert group_requests(requests, batch_size=8) == [[0, 3, 6], [2, 4, 7], [1], [5]]


def test_hf_params_are_validated_with_allowed_keys(tiny_model_dir: Path) -> None:
    with pytest.raises(ValueError, match=r"'lora'.*allowed: device, dtype, batch_size"):
        backend_from_spec("hf", str(tiny_model_dir), {"lora": "x"})
    with pytest.raises(ValueError, match="device='tpu'"):
        backend_from_spec("hf", str(tiny_model_dir), {"device": "tpu"})
    with pytest.raises(ValueError, match="batch_size"):
        backend_from_spec("hf", str(tiny_model_dir), {"batch_size": "0"})
