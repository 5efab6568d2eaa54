"""The learner's hf sampler: replies up to a stop token with sampling logprobs, the stop tokens of
evaluation, and KV reuse between a stream's turns that changes no token and no logprob."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from agents.steering import BUYER_FIELDS, Steer, ladder_prices
from arena.catalog import load_catalog
from arena.config import get_preset
from arena.scenarios import make_scenario
from leagues.generators import Context, HFGenerator
from leagues.rollout import LEARNER, GroupRow, Policy, play_rollouts
from leagues.streams import ChatFormat, Stream
from leagues.trainer import load_chat_tokenizer
from tests.agents.test_steering import ShortThought

MIB = 2**20


def tiny(model_dir: Path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(model_dir).eval()


def test_the_hf_generator_samples_up_to_a_stop_token_with_log_probabilities(tiny_model_dir):
    tok = load_chat_tokenizer(tiny_model_dir)
    generate = HFGenerator(tiny(tiny_model_dir), tok, 1.0, 1.0, max_new_tokens=12, chunk=2)
    prompts = [tok("Thought: hi")["input_ids"], tok("Talk: a longer prompt here")["input_ids"]] * 2
    contexts = [Context(ids, (), key) for key, ids in enumerate(prompts)]
    first = generate(contexts, seed=9)
    assert first == generate(contexts, seed=9)
    assert first[0] != first[2]  # the same prompt in another row draws its own sample
    for ids, logprobs, forced in first:
        assert forced == ()  # nothing steered
        assert 1 <= len(ids) == len(logprobs) <= 12
        assert all(lp <= 0.0 and math.isfinite(lp) for lp in logprobs)
        stops = [i for i, t in enumerate(ids) if t in generate.stop_ids]
        assert stops in ([], [len(ids) - 1])


def test_a_context_with_a_share_samples_with_it_whatever_its_row_and_the_calls_seed(
    tiny_model_dir,
):
    tok = load_chat_tokenizer(tiny_model_dir)
    generate = HFGenerator(tiny(tiny_model_dir), tok, 1.0, 1.0, max_new_tokens=16, chunk=4)
    ids, other = tok("Thought: hi")["input_ids"], tok("Talk: a longer prompt here")["input_ids"]
    alone = generate([Context(ids, (), 0, share=11)], seed=9)[0]
    moved = generate([Context(other, (), 1), Context(ids, (), 0, share=11)], seed=10)[1]
    assert moved.ids == alone.ids  # the logprobs agree up to the padded batch's rounding
    assert moved.logprobs == pytest.approx(alone.logprobs, abs=1e-4)
    assert generate([Context(ids, (), 0, share=12)], seed=9)[0].ids != alone.ids
    assert generate([Context(ids, (), 0)], seed=9)[0].ids != alone.ids  # its row's seed


@dataclass(frozen=True)
class AfterFirstToken(Steer):
    """Forces a price after the first sampled token (the decoding plumbing, not the rule)."""

    def forced_text(self, reply: str) -> str | None:
        return " $12.34" if reply else None


def test_steered_tokens_are_marked_forced_with_logprob_zero_and_train_nothing(tiny_model_dir):
    tok = load_chat_tokenizer(tiny_model_dir)
    generate = HFGenerator(tiny(tiny_model_dir), tok, 1.0, 1.0, max_new_tokens=24, chunk=4)
    ids = tok("Thought: hi")["input_ids"]
    plain = generate([Context(ids, (), k) for k in range(2)], seed=3)
    steered = generate([Context(ids, (), 0), Context(ids, (), 1, AfterFirstToken(()))], seed=3)
    # An unsteered row draws as if alone (its logprobs to float rounding: the batch shrinks).
    assert steered[0].ids == plain[0].ids
    assert np.allclose(steered[0].logprobs, plain[0].logprobs, atol=1e-5)
    sample = steered[1]
    price = tok(" $12.34", add_special_tokens=False)["input_ids"]
    assert sample.ids == [plain[1].ids[0], *price, generate.end_token]
    assert sample.forced == (False, *[True] * (len(price) + 1))
    assert math.isclose(sample.logprobs[0], plain[1].logprobs[0], abs_tol=1e-5)
    assert sample.logprobs[1:] == [0.0] * (len(price) + 1)
    stream = Stream()
    stream.add(sample.ids, sample.logprobs, trained=[not f for f in sample.forced])
    assert stream.env_mask == [1] + [0] * (len(price) + 1)  # no loss on the forced tokens


def test_training_and_evaluation_stop_a_checkpoints_replies_on_the_same_tokens(tiny_model_dir):
    from agents.backends.hf_backend import HFBackend, HFConfig

    tok = load_chat_tokenizer(tiny_model_dir)
    learner = HFGenerator(tiny(tiny_model_dir), tok, 1.0, 1.0, max_new_tokens=4, chunk=1)
    backend = HFBackend(str(tiny_model_dir), HFConfig(device="cpu"))
    assert learner.stop_ids == backend.stop_ids
    assert tok.convert_tokens_to_ids("<|im_end|>") in learner.stop_ids
    backend.close()


def test_greedy_replies_and_logprobs_match_transformers_generate(tiny_model_dir):
    """The old sampler was ``model.generate``: greedy, the new loop picks the same tokens with
    the same log-probabilities (to float tolerance: padding changes the last bits)."""
    import torch

    tok = load_chat_tokenizer(tiny_model_dir)
    model = tiny(tiny_model_dir)
    generate = HFGenerator(model, tok, 0.0, 1.0, max_new_tokens=10, chunk=3)
    prompts = [tok(text)["input_ids"] for text in ("Thought: hi", "Talk: a longer prompt", "$5")]
    replies = generate([Context(ids, (), key) for key, ids in enumerate(prompts)], seed=0)
    for ids, (tokens, logprobs, _) in zip(prompts, replies, strict=True):
        with torch.no_grad():
            out = model.generate(
                torch.tensor([ids]),
                do_sample=False,
                max_new_tokens=10,
                eos_token_id=sorted(generate.stop_ids),
                pad_token_id=tok.pad_token_id,
                return_dict_in_generate=True,
                output_scores=True,
            )
        expected = out.sequences[0, len(ids) :].tolist()
        assert tokens == expected[: len(tokens)] and len(tokens) == len(expected)
        scores = torch.stack(out.scores, dim=1)[0].log_softmax(-1)
        reference = scores.gather(-1, torch.tensor(expected)[:, None]).squeeze(-1)
        assert logprobs == pytest.approx(reference.tolist(), abs=1e-5)


def grown_streams(tok, rng: np.random.Generator, turns: int) -> list[list[Context]]:
    """Two streams over ``turns`` turns, built as a rollout builds them: each turn's context is
    the last one plus a reply and some glue, and remembers where the earlier contexts ended."""
    streams = [
        tok(f"<|im_start|>user\nBuyer {k} offers $12.<|im_end|>\n")["input_ids"] for k in (1, 2)
    ]
    rounds = []
    for _ in range(turns):
        rounds.append([Context(list(s), (), k) for k, s in enumerate(streams)])
        streams = [s + rng.integers(5, 400, size=40).tolist() for s in streams]
    return rounds


@pytest.mark.parametrize("temperature", [0.0, 1.0], ids=["greedy", "seeded"])
def test_kv_reuse_between_turns_changes_no_token_and_no_logprob(tiny_model_dir, temperature):
    tok = load_chat_tokenizer(tiny_model_dir)
    model = tiny(tiny_model_dir)
    rounds = grown_streams(tok, np.random.default_rng(0), turns=4)
    results = {}
    for budget in (0, 64 * MIB):
        generate = HFGenerator(model, tok, temperature, 0.9, 12, chunk=2, kv_cache_bytes=budget)
        replies, ends = [], {}
        for turn, contexts in enumerate(rounds):
            contexts = [Context(c.ids, tuple(ends.get(c.key, ())), c.key) for c in contexts]
            replies.append(generate(contexts, seed=turn))
            for c in contexts:
                ends[c.key] = (*c.ends, len(c.ids))
        results[budget] = (replies, generate.reused, generate.prefilled)
    (plain, reused_off, prefilled_off), (cached, reused_on, prefilled_on) = results.values()
    assert cached == plain  # bit-identical tokens and float logprobs
    assert reused_off == 0 and reused_on > 0
    assert prefilled_on + reused_on == prefilled_off  # every context token computed once


def test_a_rollout_is_identical_with_and_without_kv_reuse(tiny_model_dir):
    """A buyer learner (the random model's invalid openings are re-sampled: four turns a
    stream) plays the same episodes, token for token, with the stream KV kept or recomputed."""
    tok = load_chat_tokenizer(tiny_model_dir)
    model = tiny(tiny_model_dir)
    market = get_preset("in-distribution")
    buyers = (LEARNER, "scripted:time", "scripted:time")
    rows = [
        GroupRow(f"b{i}", make_scenario(market, load_catalog(), 4, i), "scripted:prober",
                 buyers, "buyer_1")
        for i in range(3)
    ]  # fmt: skip
    played = {}
    for budget in (0, 64 * MIB):
        generate = HFGenerator(model, tok, 1.0, 1.0, 16, chunk=2, kv_cache_bytes=budget)
        policy = Policy("hf:learner", ChatFormat(tok), generate, 16, 2048)
        rollouts = play_rollouts(rows, market, policy, seed=3)
        streams = [r.streams["buyer_1"] for r in rollouts]
        played[budget] = [(s.completion_ids, s.logprobs, s.env_mask) for s in streams]
        assert max(len(s.replies) for s in streams) >= 3
        reused = generate.reused
    assert played[0] == played[64 * MIB]
    assert reused > 0


def own_draws(model, prompt: list[int], sample) -> list[int]:
    """The places of ``sample``'s unforced tokens (the policy's draws), each checked to carry its
    log-probability under the model's whole distribution (not the held one), and every forced
    token none."""
    import torch

    own = [i for i, forced in enumerate(sample.forced) if not forced]
    assert all(sample.logprobs[i] == 0.0 for i in range(len(sample.ids)) if i not in own)
    with torch.inference_mode():
        logits = model(torch.tensor([prompt + sample.ids])).logits[0].float()
    logp = logits.log_softmax(-1)
    expected = [logp[len(prompt) + i - 1, sample.ids[i]].item() for i in own]
    assert [sample.logprobs[i] for i in own] == pytest.approx(expected, abs=1e-4)
    assert all(lp < 0 for lp in expected)
    return own


def test_an_exploring_starts_held_draws_are_the_policys_with_their_unheld_logprobs(tiny_model_dir):
    tok = load_chat_tokenizer(tiny_model_dir)
    model = tiny(tiny_model_dir)
    generate = HFGenerator(model, tok, 1.0, 1.0, max_new_tokens=32, chunk=4)
    prompt = tok("Offer")["input_ids"]
    rungs = ladder_prices(43.47, 9)
    held = ShortThought((), fields=BUYER_FIELDS, prices=rungs, explore=rungs[4])
    [explored] = generate([Context(prompt, (), 0, held)], 3)
    assert tok.decode(explored.ids, skip_special_tokens=True).endswith(f"[BUY] ${rungs[4]}")
    # The tag and the price's digits are the policy's draws (all else is written: no loss).
    own = own_draws(model, prompt, explored)
    assert tok.decode([explored.ids[i] for i in own]) == "BUY" + rungs[4]


class ShareTalk(Steer):
    """The share steer with the Talk line written for the model: the Thought's share digit and
    the Action are what is decoded."""

    def forced(self, reply: str) -> tuple[str, bool] | None:
        return (" hi\n", False) if reply.endswith("Talk:") else super().forced(reply)


def test_a_share_buyers_held_digit_and_deal_tag_are_the_policys_with_their_unheld_logprobs(
    tiny_model_dir,
):
    tok = load_chat_tokenizer(tiny_model_dir)
    model = tiny(tiny_model_dir)
    generate = HFGenerator(model, tok, 1.0, 1.0, max_new_tokens=48, chunk=4)
    prompt = tok("Offer")["input_ids"]
    shares = (("9", "39.12"), ("8", "34.77"), ("7", "30.43"))
    offer = ShareTalk(((1, "$41.00"),), fields=BUYER_FIELDS, shares=shares, budget="43.47")
    for move, own_text, action in (("8", "8", "[BUY] $34.77"), ("DEAL", "0DEAL", "[DEAL] $41.00")):
        held = dataclasses.replace(offer, explore=move)
        [explored] = generate([Context(prompt, (), 0, held)], 3)
        text = tok.decode(explored.ids, skip_special_tokens=True)
        assert text.startswith("Thought: Offer ") and text.endswith(f"Action: {action}")
        own = own_draws(model, prompt, explored)
        assert tok.decode([explored.ids[i] for i in own]) == own_text  # the held draws only
