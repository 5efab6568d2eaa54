"""The episode driver: whose turn it is, who answers, swaps mid-episode, replays, and the one
record an episode leaves."""

from __future__ import annotations

import pytest

from agents import make_agent
from agents.backends.base import ChatRequest, Completion
from agents.base import EpisodeContext, Reply
from agents.driver import Episode, Match, Replay, Transcript, buyer_lineup
from agents.engine import play_matches
from arena.catalog import load_catalog
from arena.config import get_preset
from arena.records import EpisodeKey
from arena.scenarios import Scenario, make_scenarios

CONFIG = get_preset("in-distribution")
POOL = ["scripted:time", "scripted:tit-for-tat"]


def scenarios(count: int, seed: int = 0) -> list[Scenario]:
    return make_scenarios(CONFIG, load_catalog(None), seed, count)


def scripted(scenario: Scenario, seller: str = "scripted:prober") -> list:
    return [make_agent(seller, "seller")] + [
        make_agent(spec, "buyer") for spec in buyer_lineup(scenario, POOL)
    ]


class Recorder:
    """An immediate responder that remembers its context and the seats it was asked for."""

    def __init__(self, inner) -> None:
        self.inner, self.spec = inner, inner.spec
        self.context: EpisodeContext | None = None
        self.asked: list[str] = []

    def reset(self, context: EpisodeContext) -> None:
        self.context = context
        self.inner.reset(context)

    def act(self, view) -> str:
        assert self.context is not None
        self.asked.append(self.context.role)
        return self.inner.act(view)


class Echo:
    """A batched buyer: asks its batcher for a reply; the batcher answers every request of a
    round in one call, with the scripted time buyer's message."""

    class Batcher:
        key = "echo"

        def __init__(self) -> None:
            self.calls: list[int] = []

        def generate(self, requests: list) -> list[Completion]:
            self.calls.append(len(requests))
            return [
                Completion(agent.act(view), tokens_in=7, tokens_out=3) for agent, view in requests
            ]

    def __init__(self, batcher: Echo.Batcher) -> None:
        self.spec, self.batcher = "test:echo", batcher
        self.agent = make_agent("scripted:time", "buyer")

    def reset(self, context: EpisodeContext) -> None:
        self.agent.reset(context)

    def request(self, view) -> tuple:
        return (self.agent, view)

    def reply(self, completion: Completion) -> Reply:
        return Reply(completion.text, completion.tokens_in, completion.tokens_out)


def test_each_seat_is_told_its_own_context_and_asked_only_on_its_turns() -> None:
    (sc,) = scenarios(1)
    players = [Recorder(agent) for agent in scripted(sc)]
    episode = Episode(CONFIG, sc, players)
    assert [p.context.role for p in players] == ["seller", "buyer_1", "buyer_2", "buyer_3"]
    assert [p.context.slot for p in players] == [0, 1, 2, 3]
    assert episode.current == "buyer_1" and episode.responder("buyer_1") is players[1]
    assert episode.advance() is None and episode.done and episode.current == ""
    record = episode.record()
    for player in players:
        turns = [t for t in record.result.turns if t.agent == player.context.role]
        assert len(player.asked) == len(turns) > 0
    assert record.key == EpisodeKey.of(CONFIG, "scripted:prober", record.buyers, sc)
    assert (
        record == play_matches(CONFIG, [Match(sc, scripted(sc)[0], tuple(scripted(sc)[1:]))])[0][0]
    )


def test_batched_responders_wait_and_their_batcher_answers_a_round_at_once() -> None:
    batcher = Echo.Batcher()
    scens = scenarios(3)
    matches = [Match(sc, "scripted:prober", tuple(Echo(batcher) for _ in range(3))) for sc in scens]
    records, stats = play_matches(CONFIG, matches, max_concurrent=3)
    # The openings: one batch of the three episodes' first buyers, and so on.
    assert batcher.calls[:3] == [3, 3, 3]
    assert stats.per_backend["echo"].requests == sum(batcher.calls)
    buyer_turns = [t for r in records for t in r.result.turns if t.agent != "seller"]
    assert all((t.tokens_in, t.tokens_out) == (7, 3) for t in buyer_turns)
    by_hand, _ = play_matches(CONFIG, [Match(sc, "scripted:prober", ("scripted:time",) * 3)
                                       for sc in scens])  # fmt: skip
    assert [r.result.deals for r in records] == [r.result.deals for r in by_hand]
    assert {r.buyers for r in records} == {("test:echo",) * 3}


def test_a_failed_reply_ends_only_its_episode_as_an_error() -> None:
    class Broken(Echo.Batcher):
        key = "broken"

        def generate(self, requests: list) -> list[Completion]:
            return [Completion("", error="server down") for _ in requests]

    class Failing(Echo):
        def reply(self, completion: Completion) -> Reply:
            return Reply("", error=completion.error)

    (sc,) = scenarios(1)
    record = play_matches(CONFIG, [Match(sc, "scripted:prober", (Failing(Broken()),) * 3)])[0][0]
    assert record.result.outcome == "error"
    assert record.result.error == "test:echo (buyer_1): server down"


def test_a_replay_then_a_swapped_responder_continue_the_episode_from_turn_k() -> None:
    """Counterfactual play: the recorded turns up to k, then another agent in the seat."""
    (sc,) = scenarios(1, seed=4)
    original = play_matches(CONFIG, [Match(sc, scripted(sc)[0], tuple(scripted(sc)[1:]))])[0][0]
    k = 5
    transcript = Transcript(original.result.turns[:k], "original")
    episode = Episode(CONFIG, sc, [Replay(transcript) for _ in range(4)])
    assert episode.advance(stop_at=k) is None and not episode.done
    assert transcript.position == k
    for seat, agent in zip(CONFIG.agents, scripted(sc, "scripted:satisficer"), strict=True):
        episode.swap(seat, agent)
    assert episode.advance() is None
    branched = episode.record()
    assert branched.result.turns[:k] == original.result.turns[:k]
    assert branched.seller == "scripted:satisficer"


def test_a_transcript_refuses_turns_of_another_seat_or_beyond_its_end() -> None:
    (sc,) = scenarios(1)
    original = play_matches(CONFIG, [Match(sc, scripted(sc)[0], tuple(scripted(sc)[1:]))])[0][0]
    transcript = Transcript(original.result.turns, "episode 0")
    with pytest.raises(ValueError, match="turn 0 is by buyer_1 but the replay expects seller"):
        transcript.next("seller")
    short = Transcript(original.result.turns[:1], "episode 0")
    short.next("buyer_1")
    with pytest.raises(ValueError, match="has only 1 turns; wrong market config"):
        short.next("buyer_2")
    with pytest.raises(ValueError, match="expects nobody"):
        transcript.check_finished()


def test_a_responder_count_that_does_not_fit_the_market_is_refused() -> None:
    (sc,) = scenarios(1)
    with pytest.raises(ValueError, match="3 responders for a market of 3 buyers"):
        Episode(CONFIG, sc, scripted(sc)[:3])


def test_an_llm_agent_waits_for_its_back_end_and_a_failed_completion_ends_the_episode() -> None:
    agent = make_agent("openai:m?base_url=http://127.0.0.1:9/v1", "seller")
    assert agent.batcher is agent.backend
    (sc,) = scenarios(1)
    episode = Episode(CONFIG, sc, [agent, *scripted(sc)[1:]])
    request = episode.advance()  # the scripted openings are played; the seller must wait
    assert isinstance(request, ChatRequest) and episode.waiting is agent
    assert episode.current == "seller" and request.messages[0][0] == "system"
    reply = episode.deliver(Completion("", error="boom", retries=2))
    assert (reply.error, reply.retries) == ("boom", 2) and episode.done
    assert episode.record().result.error == "openai:m?base_url=http://127.0.0.1:9/v1 (seller): boom"
