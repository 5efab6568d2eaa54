"""Transformers back-end and the tiny test model it runs on (CPU, real files)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agents.backends import ChatRequest, SamplingConfig, backend_from_spec
from agents.backends.hf_backend import BASE_ADAPTER, HFBackend, load_tokenizer, stop_token_ids
from agents.backends.hf_decode import batch_cache, next_tokens
from agents.testing.tiny_model import (
    IM_END,
    IM_START,
    build_tiny_model,
    prompt_corpus,
)

PROTOCOL_TEXT = (
    "Thought: Buyer 2 seems eager; hold the price.\nTarget: 2\n"
    "Talk: I can't go lower than $34.99.\nAction: [SELL] $34.99 12345"
)


@pytest.fixture(scope="module")
def hf_backend(tiny_model_dir: Path) -> Iterator[HFBackend]:
    backend = backend_from_spec("hf", str(tiny_model_dir), {"device": "cpu", "batch_size": "8"})
    assert isinstance(backend, HFBackend)
    yield backend
    backend.close()


@pytest.fixture
def eos_biased(tiny_model_dir: Path) -> Iterator[Callable[[float], HFBackend]]:
    """Backends whose model adds `bias` to the <|im_end|> logit: a model that does stop."""
    import torch

    built: list[HFBackend] = []

    def make(bias: float) -> HFBackend:
        backend = backend_from_spec("hf", str(tiny_model_dir), {"device": "cpu"})
        assert isinstance(backend, HFBackend)
        head = backend.model.lm_head
        biased = torch.nn.Linear(head.in_features, head.out_features, bias=True)
        with torch.no_grad():
            biased.weight.copy_(head.weight)
            biased.bias.zero_()
            biased.bias[backend.tokenizer.convert_tokens_to_ids(IM_END)] = bias
        backend.model.lm_head = biased
        built.append(backend)
        return backend

    yield make
    for backend in built:
        backend.close()


def chat(user: str, **sampling: float | int | None) -> ChatRequest:
    """A seller chat request; default sampling is SamplingConfig's (temperature 0.7, unseeded)."""
    return ChatRequest(
        messages=(("system", "You are the seller of a guitar."), ("user", user)),
        sampling=SamplingConfig(**sampling),  # type: ignore[arg-type]
    )


def test_corpus_is_the_projects_own_prompts_and_deterministic_per_seed() -> None:
    corpus = prompt_corpus(seed=3, episodes=3)
    assert corpus == prompt_corpus(seed=3, episodes=3)
    assert corpus != prompt_corpus(seed=4, episodes=3)
    text = "".join(corpus)
    for marker in ("Thought: ", "Talk: ", "Action: [", "Target: ", " $", IM_START, IM_END):
        assert marker in text
    assert "=== Standing offers ===" in text  # the full style
    assert "Messages left:" in text  # the compact style
    assert "Product: 1" in text  # the multi-product protocol


def test_every_digit_is_a_token_of_its_own(tiny_model_dir: Path) -> None:
    tokenizer = load_tokenizer(tiny_model_dir)
    pieces = tokenizer.tokenize("Action: [SELL] $1,234.50")
    assert pieces[-8:] == ["1", ",", "2", "3", "4", ".", "5", "0"]


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
    assert len(loaded) == 1024


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
        1024,
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
        [
            chat("other", temperature=1.0, max_tokens=16, seed=1),
            target,
            chat("x", temperature=0, max_tokens=24),
        ]
    )[1].text
    assert alone == with_neighbours
    other_seed = hf_backend.generate(
        [chat("Would you take $20?", temperature=1.0, max_tokens=16, seed=12)]
    )[0].text
    assert other_seed != alone


def mixed_requests() -> list[ChatRequest]:
    """Eight requests of different lengths: greedy, seeded sampling (several temperatures and
    top_p) and different max_tokens, so one batch holds rows that differ in every respect."""
    return [
        chat("Last offer: $12.50 " * (1 + i % 4), temperature=t, top_p=p, max_tokens=m, seed=i)
        for i, (t, p, m) in enumerate(
            [
                (0.0, 1.0, 16),
                (1.0, 1.0, 16),
                (0.7, 0.9, 12),
                (0.0, 1.0, 9),
                (1.3, 0.5, 16),
                (1.0, 1.0, 5),
                (0.0, 1.0, 14),
                (0.9, 0.95, 16),
            ]
        )
    ]


def test_request_text_is_the_same_alone_and_in_any_batch(
    hf_backend: HFBackend, tiny_model_dir: Path
) -> None:
    requests = mixed_requests()
    batched = hf_backend.generate(requests)
    alone = [hf_backend.generate([request])[0] for request in requests]
    reversed_batch = hf_backend.generate(requests[::-1])[::-1]
    small = backend_from_spec("hf", str(tiny_model_dir), {"device": "cpu", "batch_size": "3"})
    try:
        chunked = small.generate(requests)
    finally:
        small.close()
    expected = [(c.text, c.tokens_out) for c in alone]
    for run in (batched, reversed_batch, chunked):
        assert [(c.text, c.tokens_out) for c in run] == expected
    assert [c.tokens_out for c in alone] == [r.sampling.max_tokens for r in requests]
    # Sampling really happened: a seeded sampled row differs from greedy on the same prompt.
    greedy_twin = hf_backend.generate([chat("Last offer: $12.50 " * 2, temperature=0)])[0]
    assert greedy_twin.text[:20] != batched[1].text[:20]


def test_greedy_decoding_matches_transformers_generate(hf_backend: HFBackend) -> None:
    import torch

    request = chat("Would you take $20?", temperature=0, max_tokens=20)
    ids = hf_backend.encode(request.messages)
    with torch.inference_mode():
        output = hf_backend.model.generate(
            torch.tensor([ids]), do_sample=False, max_new_tokens=20, min_new_tokens=20
        )
    expected = output[0, len(ids) :].tolist()
    completion = hf_backend.generate([request])[0]
    assert completion.text == hf_backend.tokenizer.decode(expected, skip_special_tokens=True)
    assert completion.tokens_out == 20


def test_unseeded_sampling_rows_draw_from_fresh_streams(hf_backend: HFBackend) -> None:
    request = chat("Would you take $20?", temperature=1.0, max_tokens=16)
    first, second = hf_backend.generate([request, request])
    assert first.text != second.text


def test_rows_stop_at_end_of_turn_or_at_their_own_max_tokens(
    eos_biased: Callable[[float], HFBackend],
) -> None:
    requests = [chat(f"Offer ${i}", temperature=0, max_tokens=m) for i, m in enumerate((3, 9, 6))]
    never = eos_biased(-1e4).generate(requests)
    assert [c.tokens_out for c in never] == [3, 9, 6]
    always = eos_biased(1e4).generate(requests)
    assert [(c.text, c.tokens_out) for c in always] == [("", 1)] * 3
    # Likely enough to stop somewhere inside 40 tokens: rows end at different steps.
    sometimes = eos_biased(5.0)
    sampled = [chat(f"Offer ${i}", temperature=1.0, max_tokens=40, seed=i) for i in range(8)]
    batched = sometimes.generate(sampled)
    alone = [sometimes.generate([request])[0] for request in sampled]
    assert [(c.text, c.tokens_out) for c in batched] == [(c.text, c.tokens_out) for c in alone]
    lengths = {c.tokens_out for c in batched}
    assert len(lengths) > 2 and max(lengths) <= 40 and min(lengths) < 40


def test_next_tokens_takes_argmax_or_the_uniform_through_the_adjusted_cdf() -> None:
    import torch

    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2]])).repeat(7, 1)
    temperature = torch.tensor([0.0, 1.0, 1.0, 1.0, 0.5, 1.0, 1.0])
    top_p = torch.tensor([1.0, 1.0, 1.0, 1.0, 1.0, 0.6, 0.6])
    uniform = torch.tensor([0.99, 0.1, 0.6, 0.95, 0.6, 0.6, 0.9])
    # temperature 0.5 squares the probabilities: 0.658, 0.237, 0.105; top_p 0.6 keeps the
    # first two (0.5 < 0.6 before the second, 0.8 >= 0.6 before the third): 0.625, 0.375.
    picked = next_tokens(logits, temperature, top_p, uniform)
    assert picked.tolist() == [0, 0, 1, 2, 0, 0, 1]
    all_greedy = next_tokens(logits[:2], torch.zeros(2), torch.ones(2), torch.zeros(2))
    assert all_greedy.tolist() == [0, 0]


def test_stop_ids_cover_model_eos_tokenizer_eos_and_end_of_turn(tiny_model_dir: Path) -> None:
    tokenizer = load_tokenizer(tiny_model_dir)
    im_end = tokenizer.convert_tokens_to_ids(IM_END)
    assert stop_token_ids(None, tokenizer) == {im_end}
    assert stop_token_ids([7, None], tokenizer) == {7, im_end}
    assert stop_token_ids(9, tokenizer) == {9, im_end}


def test_sliding_window_models_are_rejected_naming_vllm() -> None:
    from transformers import Qwen2Config

    config = Qwen2Config(
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        use_sliding_window=True,
        sliding_window=8,
        max_window_layers=0,
    )
    with pytest.raises(ValueError, match=r"sliding-window.*vllm"):
        batch_cache([], [4], 8, config)


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


def test_hf_params_are_validated_with_allowed_keys(tiny_model_dir: Path) -> None:
    with pytest.raises(
        ValueError, match=r"'adapter'.*known keys: device, dtype, batch_size, threads, kv_cache_mib"
    ):
        backend_from_spec("hf", str(tiny_model_dir), {"adapter": "x"})
    with pytest.raises(ValueError, match="lora= is per request"):
        backend_from_spec("hf", str(tiny_model_dir), {"lora": "x"})
    with pytest.raises(ValueError, match="kv_cache_mib=-1"):
        backend_from_spec("hf", str(tiny_model_dir), {"kv_cache_mib": "-1"})
    with pytest.raises(ValueError, match="device='tpu'"):
        backend_from_spec("hf", str(tiny_model_dir), {"device": "tpu"})
    with pytest.raises(ValueError, match="batch_size"):
        backend_from_spec("hf", str(tiny_model_dir), {"batch_size": "0"})
    with pytest.raises(ValueError, match="threads=0"):
        backend_from_spec("hf", str(tiny_model_dir), {"threads": "0"})


def test_threads_param_sets_torch_threads_only_when_given(tiny_model_dir: Path) -> None:
    import torch

    before = torch.get_num_threads()
    try:
        backend_from_spec("hf", str(tiny_model_dir), {"device": "cpu"}).close()
        assert torch.get_num_threads() == before
        backend_from_spec("hf", str(tiny_model_dir), {"device": "cpu", "threads": "2"}).close()
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


# --- conversation KV reuse -----------------------------------------------------------------------


def turns(count: int, reply: str = "Thought: hold.\nTarget: 1\nTalk: $40.\nAction: [SELL] $40.00"):
    """The messages of a seller conversation after ``count`` answered turns, plus a new one."""
    messages: tuple = (("system", "You are the seller of a guitar. " * 8),)
    for turn in range(count + 1):
        if turn:
            messages += (("assistant", reply),)
        messages += (("user", f"Buyer 1 offers ${20 + turn}.00. Messages left: {9 - turn}."),)
    return messages


@pytest.mark.parametrize("sampling", [{"temperature": 0.0}, {"temperature": 1.0, "seed": 5}])
def test_a_conversation_turn_prefills_only_its_new_tokens_and_changes_no_result(
    hf_backend: HFBackend, tiny_model_dir: Path, sampling: dict
) -> None:
    no_reuse = backend_from_spec("hf", str(tiny_model_dir), {"device": "cpu", "kv_cache_mib": "0"})
    assert isinstance(no_reuse, HFBackend)
    try:
        for count in range(3):
            request = ChatRequest(
                turns(count), SamplingConfig(max_tokens=10, **sampling), conversation="seller-1"
            )
            (reused,) = hf_backend.generate([request])
            (fresh,) = no_reuse.generate([request])
            assert reused.text == fresh.text and reused.tokens_out == fresh.tokens_out
            earlier = len(hf_backend.encode(turns(count - 1))) if count else 0
            assert (reused.tokens_cached, fresh.tokens_cached) == (earlier, 0)
    finally:
        no_reuse.close()


def test_a_prompt_that_does_not_extend_its_conversation_is_prefilled_from_scratch(
    hf_backend: HFBackend,
) -> None:
    greedy = SamplingConfig(temperature=0, max_tokens=4)
    hf_backend.generate([ChatRequest(turns(1), greedy, conversation="c")])
    edited = (("system", "You are the seller of a lamp."), *turns(2)[1:])  # history rewritten
    (completion,) = hf_backend.generate([ChatRequest(edited, greedy, conversation="c")])
    assert completion.tokens_cached == 0
    (again,) = hf_backend.generate([ChatRequest(turns(2), greedy, conversation="other")])
    assert again.tokens_cached == 0  # another conversation's cache is never borrowed
    assert hf_backend.kv_cache.get("c").messages == edited  # the entry follows the conversation


def test_cached_conversations_stay_within_the_budget_and_finished_ones_are_dropped(
    tiny_model_dir: Path,
) -> None:
    from agents.backends import end_conversations

    backend = backend_from_spec("hf", str(tiny_model_dir), {"device": "cpu", "kv_cache_mib": "1"})
    assert isinstance(backend, HFBackend)
    try:
        greedy = SamplingConfig(temperature=0, max_tokens=2)
        requests = [ChatRequest(turns(2), greedy, conversation=f"c{i}") for i in range(12)]
        backend.generate(requests)
        cache = backend.kv_cache
        assert 0 < cache.nbytes <= 2**20 and cache.evictions > 0
        kept = [f"c{i}" for i in range(12) if cache.get(f"c{i}") is not None]
        assert kept == [f"c{i}" for i in range(12 - len(kept), 12)]  # the most recent stay
        end_conversations(backend, kept[:1])
        assert cache.get(kept[0]) is None and len(cache) == len(kept) - 1
        backend.close()
        assert len(cache) == 0 and cache.nbytes == 0
    finally:
        backend.close()


@pytest.mark.parametrize("temperature", ["0", "0.7"])
def test_engine_records_are_identical_with_and_without_kv_reuse(
    lora_model_dir: Path, temperature: str, one_thread: None
) -> None:
    """Narrated sellers play valid moves for five turns: every later turn reuses its prompt."""
    from agents.engine import play_vs_pool
    from agents.llm import make_llm_agent
    from arena.catalog import load_catalog
    from arena.config import get_preset
    from arena.scenarios import make_scenarios

    config = get_preset("in-distribution")
    scenarios = make_scenarios(config, load_catalog(None), 3, 3)
    results = {}
    for mib in ("1024", "0"):
        seller = (
            f"hf:{lora_model_dir}?device=cpu&kv_cache_mib={mib}&narrate=scripted:prober"
            f"&temperature={temperature}&max_tokens=12"
        )
        records, stats = play_vs_pool(config, scenarios, seller, ["scripted:time"])
        results[mib] = [record.result for record in records]
        cached = make_llm_agent(seller, "seller").backend.stats.tokens_cached
        assert stats.requests > 2 * len(scenarios)
        assert (cached > stats.tokens_in / 2) if mib != "0" else cached == 0
    assert results["1024"] == results["0"]


# --- LoRA adapters over one base model --------------------------------------------------------


def test_adapters_change_transcripts_over_one_model_load(
    lora_model_dir: Path, lora_adapters: list[Path], one_thread: None
) -> None:
    from agents.driver import Match
    from agents.engine import play_matches
    from arena.catalog import load_catalog
    from arena.config import get_preset
    from arena.scenarios import make_scenarios

    config = get_preset("in-distribution")
    base = f"hf:{lora_model_dir}?device=cpu&temperature=0&max_tokens=16"
    sellers = [base] + [f"{base}&lora={adapter}" for adapter in lora_adapters[:2]]
    (scenario,) = make_scenarios(config, load_catalog(None), 0, 1)
    jobs = [(seller, ("scripted:time",) * 3, scenario) for seller in sellers]
    records, stats = play_matches(config, [Match(sc, s, b) for s, b, sc in jobs])
    assert len(stats.per_backend) == 1 and stats.errors == 0
    assert next(iter(stats.per_backend.values())).mixed_batches >= 1
    seller_texts = [[t.text for t in r.result.turns if t.agent == "seller"] for r in records]
    assert len({repr(texts) for texts in seller_texts}) == 3  # base, gen1, gen2 all differ
    from agents.llm import make_llm_agent

    backend = make_llm_agent(sellers[1], "seller").backend.backend  # the view's shared back-end
    assert backend.stats.model_loads == 1 and len(backend.adapters) == 2


def _offers(adapters: list[str | None], max_tokens: int) -> list[ChatRequest]:
    """One greedy request per adapter (None: the base model), each with its own offer."""
    return [
        ChatRequest(
            (("user", f"Offer ${12 + i}.00"),),
            SamplingConfig(temperature=0, max_tokens=max_tokens),
            adapter=adapter,
        )
        for i, adapter in enumerate(adapters)
    ]


def test_a_mixed_adapter_batch_gives_each_request_its_text_alone(
    lora_model_dir: Path, lora_adapters: list[Path], one_thread: None
) -> None:
    backend = backend_from_spec("hf", str(lora_model_dir), {"device": "cpu"})
    assert isinstance(backend, HFBackend)
    try:
        adapters = [None, str(lora_adapters[0]), str(lora_adapters[1]), str(lora_adapters[0])]
        requests = _offers(adapters, max_tokens=12)
        batched = [c.text for c in backend.generate(requests)]
        alone = [backend.generate([request])[0].text for request in requests]
        assert batched == alone
        assert len(set(alone[:3])) == 3
        folder = lora_adapters[0]
        spelled = str(folder.parent / ".." / folder.parent.name / folder.name)  # same folder
        (same,) = backend.generate([dataclasses.replace(requests[1], adapter=spelled)])
        assert same.text == alone[1] and len(backend.adapters) == 2
        with pytest.raises(ValueError, match="no adapter_config"):
            backend.add_adapter(str(lora_model_dir))  # a model folder, not an adapter
        (failed,) = backend.generate([dataclasses.replace(requests[0], adapter="/nowhere")])
        assert failed.error is not None and "lora=/nowhere" in failed.error
    finally:
        backend.close()


def test_a_mixed_adapter_call_decodes_one_batch_per_adapter_without_peft_mixed_batches(
    lora_model_dir: Path, lora_adapters: list[Path], one_thread: None, monkeypatch
) -> None:
    # PEFT's adapter_names path walks the module tree every forward and splits each layer's
    # batch (docs/performance.md, "Decoding a tiny model's evaluation"): the back-end instead
    # decodes each adapter's requests as one batch with that adapter alone switched on.
    from peft.tuners.lora.layer import LoraLayer

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("PEFT's mixed-adapter batch path was taken")

    monkeypatch.setattr(LoraLayer, "_mixed_batch_forward", refuse)
    backend = backend_from_spec("hf", str(lora_model_dir), {"device": "cpu", "batch_size": 2})
    assert isinstance(backend, HFBackend)
    decoded: list[tuple[str, int]] = []
    decode = backend._decode_batch

    def recorded(prompts: list, requests: list) -> list:
        decoded.append((backend._active, len(prompts)))
        return decode(prompts, requests)

    monkeypatch.setattr(backend, "_decode_batch", recorded)
    try:
        a, b = (str(adapter) for adapter in lora_adapters[:2])
        adapters = [a, None, b, a, a, None]
        requests = _offers(adapters, max_tokens=4)
        backend.generate(requests)
        names = {None: BASE_ADAPTER, a: backend.adapters[a], b: backend.adapters[b]}
        # batch_size 2: adapter a's three requests in two batches; each batch one adapter.
        assert decoded == [
            (names[a], 2), (names[a], 1), (names[None], 2), (names[b], 1)
        ]  # fmt: skip
    finally:
        backend.close()
