"""Counterfactual replays: the recorded prefix exactly, kept agents in their original state, the
taken-over seat played by its new agent from turn k+1."""

from __future__ import annotations

import dataclasses

import pytest

from agents.backends.base import ChatRequest
from agents.counterfactual import mismatches, prefix_length, start_counterfactual
from agents.engine import drive_episodes, play_vs_pool
from arena.catalog import load_catalog
from arena.config import get_preset
from arena.records import EpisodeRecord
from arena.scenarios import make_scenarios

CONFIG = get_preset("in-distribution")
LLM_BUYER = "openai:m?base_url=http://127.0.0.1:9/v1"


@pytest.fixture(scope="module")
def records() -> list[EpisodeRecord]:
    scenarios = make_scenarios(CONFIG, load_catalog(None), 0, 24)
    return play_vs_pool(CONFIG, scenarios, "scripted:satisficer", ["scripted:time"])[0]


def finish(record: EpisodeRecord, from_turn: int, takeovers: dict) -> tuple[EpisodeRecord, int]:
    episode = start_counterfactual(CONFIG, record, from_turn, takeovers)
    (branched,), _ = drive_episodes(1, lambda _: episode)
    return branched, mismatches(episode)


def longest(records: list[EpisodeRecord]) -> EpisodeRecord:
    return max(records, key=lambda r: r.result.seller_turns)


def test_turn_k_ends_before_the_sellers_next_message_and_turn_0_after_the_openings(records):
    turns = longest(records).result.turns
    seller_positions = [i for i, t in enumerate(turns) if t.agent == "seller"]
    assert prefix_length(turns, 0) == seller_positions[0] == CONFIG.num_buyers
    assert prefix_length(turns, 3) == seller_positions[3]
    last = len(seller_positions)
    with pytest.raises(ValueError, match=f"has {last} seller turn.*below {last}"):
        prefix_length(turns, last)
    with pytest.raises(ValueError, match="without its messages"):
        prefix_length((), 0)
    with pytest.raises(ValueError, match="integer >= 0"):
        prefix_length(turns, -1)


def test_a_takeover_replays_turns_1_to_k_exactly_then_the_new_seller_plays(records):
    record = longest(records)
    k = 3
    branched, mismatched = finish(record, k, {"seller": "scripted:prober"})
    until = prefix_length(record.result.turns, k)
    assert branched.result.turns[:until] == tuple(
        dataclasses.replace(t, tokens_in=0, tokens_out=0) for t in record.result.turns[:until]
    )
    assert branched.result.turns[until].agent == "seller"
    assert branched.result.turns[until].text != record.result.turns[until].text
    assert (branched.seller, branched.buyers) == ("scripted:prober", record.buyers)
    assert branched.scenario == record.scenario and mismatched == 0


def test_handing_a_seat_to_the_agent_that_played_it_reproduces_the_episode(records):
    """Scripted agents are deterministic: with the seat's own spec taking over, and the other
    seats shadowing the prefix, every episode comes out message for message as recorded."""
    replayed = 0
    for record in records:
        for k in range(min(record.result.seller_turns, 3)):
            branched, mismatched = finish(record, k, {"buyer_2": record.buyers[1]})
            assert [t.text for t in branched.result.turns] == [t.text for t in record.result.turns]
            same = dataclasses.replace(record.result, turns=branched.result.turns)
            assert branched.result == same
            assert mismatched == 0
            replayed += 1
    assert replayed > 40


def test_a_record_the_market_does_not_reproduce_is_refused_naming_the_turn(records):
    record = longest(records)
    turns = list(record.result.turns)
    turns[4] = dataclasses.replace(turns[4], price=1.0)
    tampered = dataclasses.replace(
        record, result=dataclasses.replace(record.result, turns=tuple(turns))
    )
    with pytest.raises(ValueError, match=r"differs from the record at message 4 .* in price"):
        start_counterfactual(CONFIG, tampered, 3, {"seller": "scripted:prober"})
    with pytest.raises(ValueError, match="no seat buyer_9"):
        start_counterfactual(CONFIG, record, 1, {"buyer_9": "scripted:time"})
    with pytest.raises(ValueError, match="preset 'in-distribution'"):
        start_counterfactual(get_preset("bilateral"), record, 1, {"seller": "scripted:prober"})


def test_a_kept_seat_that_cannot_be_rebuilt_must_be_handed_over_too(records):
    record = dataclasses.replace(longest(records), buyers=("human:ann",) * 3)
    with pytest.raises(ValueError, match="buyer_1 keeps its original agent 'human:ann'"):
        start_counterfactual(CONFIG, record, 1, {"seller": "scripted:prober"})


def test_a_kept_llm_agent_takes_the_recorded_replies_as_its_own_history(records):
    record = dataclasses.replace(longest(records), buyers=(LLM_BUYER,) * 3)
    k = 2
    episode = start_counterfactual(CONFIG, record, k, {"seller": "scripted:prober"})
    until = prefix_length(record.result.turns, k)
    own = [t.text for t in record.result.turns[:until] if t.agent == "buyer_1"]
    llm = episode.responders[1].agent
    assert llm.requests == len(own)
    assert [reply for _, reply in llm.conversation.turns] == own
    # The new seller moves at once; the first LLM buyer it addresses now asks its back-end, with
    # the recorded replies as its past turns and the sampling seed of its next request.
    request = episode.advance()
    assert isinstance(request, ChatRequest)
    addressed = episode.waiting.agent
    history = [text for role, text in request.messages if role == "assistant"]
    assert history == [reply for _, reply in addressed.conversation.turns]
    assert addressed.requests == len(history) + 1
