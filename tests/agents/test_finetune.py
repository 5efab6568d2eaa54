"""Supervised fitting on transcripts: prompt replay and teaching the tiny model the format."""

from __future__ import annotations

import collections
import dataclasses
import re
from pathlib import Path

import pytest

from agents.engine import play_vs_pool
from agents.finetune import (
    FitConfig,
    chat_examples,
    conversations,
    encode_chat,
    fit_on_transcripts,
)
from agents.llm import LLMAgentConfig
from agents.testing.http_server import ScriptedChatServer
from arena.catalog import load_catalog
from arena.config import get_preset
from arena.money import budget_ladder
from arena.records import EpisodeRecord
from arena.scenarios import make_scenarios

CONFIG = get_preset("in-distribution")
FIT_LINEUP = ("scripted:time", ["scripted:time"])


def anchor_or_counter(messages: list[dict[str, str]]) -> str:
    """The HTTP server's player: the seller asks list price of the first active buyer; a buyer
    opens at its regulated price, then counters once with a bid that is sometimes too high."""
    system, last = messages[0]["content"], messages[-1]["content"]
    if system.startswith("You are the seller"):
        target = re.search(r"Active buyers you may target: (\d+)", last)
        price = re.search(r"List price: (\$[\d,.]+\d)", system)
        assert target is not None and price is not None
        return f"Thought: t\nTarget: {target.group(1)}\nTalk: list\nAction: [SELL] {price.group(1)}"
    opening = re.search(r"must be exactly (\$[\d,.]+\d)", last)
    if opening is not None:
        return f"Thought: o\nTalk: hi\nAction: [BUY] {opening.group(1)}"
    if "rejected" in last:
        return "Thought: q\nTalk: bye\nAction: [QUIT]"
    return "Thought: b\nTalk: this much\nAction: [BUY] $1,000,000.00"


def scripted_records(count: int, seed: int) -> list[EpisodeRecord]:
    scenarios = make_scenarios(CONFIG, load_catalog(None), seed, count)
    return play_vs_pool(CONFIG, scenarios, FIT_LINEUP[0], FIT_LINEUP[1])[0]


def test_replayed_prompts_equal_the_prompts_the_agents_were_sent() -> None:
    """chat_examples rebuilds, from the stored episode alone, every chat an LLM agent sent."""
    scenarios = make_scenarios(CONFIG, load_catalog(None), 4, 3)
    with ScriptedChatServer(reply_text=anchor_or_counter) as server:
        spec = f"openai:m?base_url={server.url}&max_retries=0"
        records, _ = play_vs_pool(CONFIG, scenarios, spec, [spec], max_concurrent=1)
        sent = [
            tuple((m["role"], m["content"]) for m in r.body["messages"]) for r in server.requests
        ]
    examples = chat_examples(records, CONFIG)
    assert [e.messages for e in examples] == sent
    assert [e.reply for e in examples] == [t.text for r in records for t in r.result.turns]
    sellers = chat_examples(records, CONFIG, roles=("seller",))
    assert {e.role for e in sellers} == {"seller"}
    assert len(sellers) == sum(r.result.seller_turns for r in records)


def test_history_zero_examples_carry_only_system_and_observation() -> None:
    examples = chat_examples(
        scripted_records(2, 0), CONFIG, roles=("seller",), agent=LLMAgentConfig(history=0)
    )
    assert examples and all([r for r, _ in e.messages] == ["system", "user"] for e in examples)


def test_records_without_turns_or_from_another_market_are_rejected() -> None:
    record = scripted_records(1, 0)[0]
    bare = dataclasses.replace(record, result=dataclasses.replace(record.result, turns=()))
    with pytest.raises(ValueError, match="keep_turns=True"):
        chat_examples([bare])
    with pytest.raises(ValueError, match="wrong market config"):
        chat_examples([record], dataclasses.replace(CONFIG, total_turns=1))
    with pytest.raises(ValueError, match="roles"):
        chat_examples([record], roles=("auctioneer",))


def test_a_seat_that_keeps_its_history_is_fitted_as_one_chat_per_episode() -> None:
    records = scripted_records(3, 0)
    examples = chat_examples(records, CONFIG, roles=("seller",))
    chats = conversations(examples)
    assert len(chats) == len(records)  # one seller chat per episode
    for (role, chat), record in zip(chats, records, strict=True):
        replies = [c for r, c in chat if r == "assistant"]
        assert role == "seller"
        assert replies == [t.text for t in record.result.turns if t.agent == "seller"]
    last = [e for e in examples if e.episode == 0][-1]
    assert chats[0][1] == (*last.messages, ("assistant", last.reply))
    forgetful = chat_examples(records, CONFIG, roles=("seller",), agent=LLMAgentConfig(history=0))
    assert len(conversations(forgetful)) == len(forgetful)  # no prefix to share: a chat a turn


def test_encoded_chats_label_exactly_the_replies_and_refuse_to_be_cut(
    tiny_model_dir: Path,
) -> None:
    from agents.backends.hf_backend import load_tokenizer

    tokenizer = load_tokenizer(tiny_model_dir)
    (_, chat), *_ = conversations(chat_examples(scripted_records(1, 0), CONFIG, ("seller",)))
    ids, labels = encode_chat(tokenizer, chat, 100_000)
    assert len(ids) == len(labels)
    trained = [i for i, label in zip(ids, labels, strict=True) if label != -100]
    assert all(label in (-100, i) for i, label in zip(ids, labels, strict=True))
    replies = "".join(c + "<|im_end|>\n" for r, c in chat if r == "assistant")
    assert tokenizer.decode(trained) == replies
    rendered = tokenizer.apply_chat_template(
        [{"role": r, "content": c} for r, c in chat], tokenize=False
    )
    assert tokenizer.decode(ids) == rendered
    with pytest.raises(ValueError, match="does not fit max_length=64"):
        encode_chat(tokenizer, chat, 64)


def test_short_talk_names_the_move_and_keeps_the_episode() -> None:
    records = scripted_records(4, 2)
    short = chat_examples(records, CONFIG, talk="short")
    scripted = chat_examples(records, CONFIG)
    assert len(short) == len(scripted)
    for plain, brief in zip(scripted, short, strict=True):
        plain_lines, brief_lines = plain.reply.splitlines(), brief.reply.splitlines()
        assert [x for x in plain_lines if not x.startswith("Talk:")] == [
            x for x in brief_lines if not x.startswith("Talk:")
        ]
        talk = next(x for x in brief_lines if x.startswith("Talk:"))
        assert talk in ("Talk: Deal.", "Talk: Goodbye.") or re.fullmatch(
            r"Talk: (My price is|I can pay) \$[\d,]+\.\d\d\.", talk
        )


def test_share_thoughts_name_the_rung_a_buyer_bids_and_what_the_steer_then_writes() -> None:
    scenarios = make_scenarios(CONFIG, load_catalog(None), 6, 4)
    ladder = ["scripted:time?ladder=9", "scripted:time?e=0.01&opening=0.1&jitter=0&ladder=9"]
    records = play_vs_pool(CONFIG, scenarios, "scripted:prober", ladder)[0]
    agent = LLMAgentConfig(prompt="compact", ladder=9)
    short = chat_examples(records, CONFIG, roles=("buyer",), agent=agent, talk="short")
    share = chat_examples(records, CONFIG, roles=("buyer",), agent=agent, talk="share")
    assert len(share) == len(short)
    digits, on_rung = set(), 0
    for brief, example in zip(short, share, strict=True):
        first, *rest = example.reply.splitlines()
        assert rest == brief.reply.splitlines()[1:]  # the short Talk, the same move
        budget = float(re.findall(r"budget[^$]*\$([\d,.]+\d)", example.messages[0][1])[0])
        action = rest[-1]
        if first == brief.reply.splitlines()[0]:  # the regulated opening keeps its Thought
            assert "Offer" not in first
            continue
        digit = re.fullmatch(r"Thought: Offer (\d)0?% of my budget\.", first).group(1)
        digits.add(digit)
        if action.startswith("Action: [BUY] $"):
            price = float(action.removeprefix("Action: [BUY] $").replace(",", ""))
            assert digit != "0" and abs(price / budget - int(digit) / 10) <= 0.1
            rungs = budget_ladder(budget, 9)  # on a rung: exactly the price the steer writes
            on_rung += price in rungs and rungs[9 - int(digit)] == price
        else:
            assert digit == "0" and first == "Thought: Offer 0% of my budget."
    assert "0" in digits and len(digits) > 2 and on_rung > 5


def test_cued_share_thoughts_open_with_what_the_seller_last_offered() -> None:
    # Against prober (anchors at list, then comes down on its last messages) and the
    # satisficer (meets partway): the warm start's cue is the one the steer would write.
    scenarios = make_scenarios(CONFIG, load_catalog(None), 6, 4)
    buyers = ["scripted:time?ladder=9"]
    records = []
    for seller in ("scripted:prober", "scripted:satisficer"):
        records += play_vs_pool(CONFIG, scenarios, seller, buyers)[0]
    agent = LLMAgentConfig(
        prompt="compact", ladder=9, steer="share", share_cue=True, list_hint=True
    )
    plain = chat_examples(records, CONFIG, roles=("buyer",), agent=dataclasses.replace(
        agent, share_cue=False), talk="share")  # fmt: skip
    cued = chat_examples(records, CONFIG, roles=("buyer",), agent=agent, talk="share")
    cues = collections.Counter()
    for example, bare in zip(cued, plain, strict=True):
        first, *rest = example.reply.splitlines()
        assert rest == bare.reply.splitlines()[1:]  # the same move, only the Thought cued
        if "Offer" not in first:  # the regulated opening
            continue
        cue = re.fullmatch(r"Thought: (They hold list\. |They came down\. )Offer \d.*", first)
        at_list = "This offer is the list price." in example.messages[-1][1]
        assert cue is not None and (cue.group(1) == "They hold list. ") == at_list
        assert first.replace(cue.group(1), "") == bare.reply.splitlines()[0]
        cues[cue.group(1)] += 1
    assert cues["They hold list. "] > 0 and cues["They came down. "] > 0


def test_fitting_is_reproducible_for_a_seed(tiny_model_dir: Path, tmp_path: Path) -> None:
    records = scripted_records(2, 0)
    fit = FitConfig(steps=3, learning_rate=1e-3, seed=7, batch_size=2)
    runs = [
        fit_on_transcripts(tiny_model_dir, records, tmp_path / f"fit{i}", fit,
                           agent=LLMAgentConfig(prompt="compact"))
        for i in range(2)
    ]  # fmt: skip
    assert runs[0].losses == runs[1].losses and len(runs[0].losses) == 3
    assert (tmp_path / "fit0" / "fit_report.json").is_file()
    assert (tmp_path / "fit0" / "tokenizer.json").is_file()


def seller_parse_rate(model: Path) -> tuple[float, float]:
    """(share of seller messages that parse, share that are valid) over 16 fresh episodes."""
    scenarios = make_scenarios(CONFIG, load_catalog(None), 99, 16)
    spec = f"hf:{model}?device=cpu&temperature=0&max_tokens=64&prompt=compact&batch_size=16"
    records, _ = play_vs_pool(CONFIG, scenarios, spec, ["scripted:time"])
    turns = [t for r in records for t in r.result.turns if t.agent == "seller"]
    return sum(t.kind is not None for t in turns) / len(turns), sum(t.valid for t in turns) / len(
        turns
    )


@pytest.mark.slow
def test_a_briefly_fitted_tiny_model_mostly_writes_parseable_seller_messages(
    tiny_model_dir: Path, tmp_path: Path, one_thread: None
) -> None:
    """Random weights write garbage; a short fit on scripted play teaches the format: whole
    seller chats in the compact prompt style, with short talk (cheap on CPU)."""
    before, _ = seller_parse_rate(tiny_model_dir)
    records = scripted_records(32, 1)
    fit = FitConfig(steps=120, learning_rate=3e-3, warmup_steps=10, batch_size=4)
    report = fit_on_transcripts(tiny_model_dir, records, tmp_path / "fitted", fit,
                                roles=("seller",), agent=LLMAgentConfig(prompt="compact"),
                                talk="short")  # fmt: skip
    after, valid = seller_parse_rate(tmp_path / "fitted")
    assert report.losses[-1] < report.losses[0] / 4
    assert before < 0.05
    assert after > 0.5, (after, valid)
