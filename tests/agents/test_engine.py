"""The batched rollout engine with real back-ends: the tiny local model and the HTTP server."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from agents import make_agent
from agents.driver import Match, buyer_lineup
from agents.engine import play_matches, play_vs_pool
from agents.testing.http_server import Reply, ScriptedChatServer
from arena.catalog import load_catalog
from arena.config import MarketConfig, get_preset
from arena.records import EpisodeRecord
from arena.scenarios import Scenario, make_scenarios

FAST = "max_retries=1&backoff=0.001&timeout=5"
MONEY = r"\$([\d,]+\.\d{2})"
PLANTED_THOUGHT = "SELLER-SECRET-THOUGHT"


@pytest.fixture
def config() -> MarketConfig:
    return get_preset("in-distribution")


def scenarios(config: MarketConfig, count: int, seed: int = 0) -> list[Scenario]:
    return make_scenarios(config, load_catalog(None), seed, count)


def money(pattern: str, text: str) -> float:
    match = re.search(pattern + MONEY, text)
    assert match is not None, (pattern, text)
    return float(match.group(1).replace(",", ""))


def play_by_text(messages: list[dict[str, str]]) -> str:
    """The HTTP server's player: reads the prompt text minimally and answers validly.

    The seller asks the list price of the first active buyer; a buyer opens at its regulated
    price, accepts an offer within budget and otherwise counters at 90% of its budget.
    """
    system, last = messages[0]["content"], messages[-1]["content"]
    if system.startswith("You are the seller"):
        active = re.search(r"Active buyers you may target: (\d+)", last)
        assert active is not None
        price = money(r"List price: ", system)
        return (
            f"Thought: {PLANTED_THOUGHT}\nTarget: {active.group(1)}\n"
            f"Talk: It is yours at list.\nAction: [SELL] ${price:.2f}"
        )
    if "must be exactly" in last:
        return f"Thought: open\nTalk: Hello.\nAction: [BUY] ${money('must be exactly ', last):.2f}"
    budget = money(r"budget for this product is ", system)
    if money(r"Seller action: \[SELL\] ", last) <= budget:
        return "Thought: within budget\nTalk: Deal.\nAction: [DEAL]"
    return f"Thought: counter\nTalk: Lower, please.\nAction: [BUY] ${int(budget * 90) / 100:.2f}"


def openai_spec(server: ScriptedChatServer, extra: str = "") -> str:
    return f"openai:arena-test?base_url={server.url}&{FAST}" + (f"&{extra}" if extra else "")


def hf_spec(model: Path, **params: str) -> str:
    """A spec for the tiny model: greedy, short replies, unless ``params`` say otherwise."""
    values = {"device": "cpu", "temperature": "0", "max_tokens": "16", **params}
    return f"hf:{model}?" + "&".join(f"{k}={v}" for k, v in values.items())


def without_tokens(record: EpisodeRecord) -> EpisodeRecord:
    turns = tuple(dataclasses.replace(t, tokens_in=0, tokens_out=0) for t in record.result.turns)
    return dataclasses.replace(record, result=dataclasses.replace(record.result, turns=turns))


def test_tiny_hf_seller_plays_full_episodes_and_its_garbage_is_a_seller_violation(
    config: MarketConfig, tiny_model_dir: Path, one_thread: None
) -> None:
    seller = hf_spec(tiny_model_dir)
    pool = ["scripted:time", "scripted:hardliner"]
    scens = scenarios(config, 4)
    records, stats = play_vs_pool(config, scens, seller, pool)
    assert [r.scenario.index for r in records] == [0, 1, 2, 3]
    for record, scenario in zip(records, scens, strict=True):
        result = record.result
        assert record.seller == seller and record.buyers == buyer_lineup(scenario, pool)
        assert result.outcome == "violation" and result.violation_by == "seller"
        assert result.violation in ("format", "bad_target")
        assert result.seller_reward == -1.0
        seller_turns = [t for t in result.turns if t.agent == "seller"]
        assert len(seller_turns) == 1 and not seller_turns[0].valid
        assert seller_turns[0].tokens_in > 500 and 0 < seller_turns[0].tokens_out <= 16
    usage = stats.per_agent[seller]
    assert usage.requests == 4 and usage.errors == 0
    assert usage.tokens_in == sum(t.tokens_in for r in records for t in r.result.turns)
    assert usage.tokens_out == sum(t.tokens_out for r in records for t in r.result.turns)
    (backend,) = stats.per_backend.values()
    assert (backend.batches, backend.requests, backend.largest_batch) == (1, 4, 4)
    assert stats.as_dict()["tokens_in"] == usage.tokens_in


def test_tiny_hf_buyers_are_resampled_by_the_game_then_closed(
    config: MarketConfig, tiny_model_dir: Path, one_thread: None
) -> None:
    buyer = hf_spec(tiny_model_dir, max_tokens="12")
    records, stats = play_vs_pool(config, scenarios(config, 2), "scripted:prober", [buyer])
    attempts = config.max_buyer_retries + 1
    for record in records:
        result = record.result
        assert (result.outcome, result.termination) == ("no_deal", "market_exhausted")
        assert result.buyer_failures == (True, True, True)
        assert result.buyer_resamples == (attempts - 1,) * 3
        assert len(result.turns) == 3 * attempts
        assert all(not t.valid and t.tokens_out > 0 for t in result.turns)
    (backend,) = stats.per_backend.values()
    # Both episodes advance in step: every round sends one buyer attempt of each in one batch.
    assert (backend.batches, backend.requests, backend.largest_batch) == (3 * attempts, 12 * 2, 2)


class Sequential:
    """An LLM agent played as an immediate responder: one back-end call per turn (``act``)."""

    def __init__(self, spec: str, role: str) -> None:
        self.agent = make_agent(spec, role)
        self.spec = spec

    def reset(self, context) -> None:
        self.agent.reset(context)

    def act(self, view) -> str:
        return self.agent.act(view)


def test_batched_run_equals_one_at_a_time_run_and_sequential_act_calls(
    config: MarketConfig, tiny_model_dir: Path, one_thread: None
) -> None:
    seller = f"hf:{tiny_model_dir}?device=cpu&temperature=0.8&max_tokens=10"
    pool = ["scripted:time", hf_spec(tiny_model_dir, max_tokens="10", temperature="0.7")]
    scens = scenarios(config, 3, seed=5)
    batched, _ = play_vs_pool(config, scens, seller, pool, max_concurrent=3)
    single, _ = play_vs_pool(config, scens, seller, pool, max_concurrent=1)
    sequential = [
        play_matches(
            config,
            [
                Match(
                    sc,
                    Sequential(seller, "seller"),
                    tuple([Sequential(spec, "buyer") for spec in buyer_lineup(sc, pool)]),
                )
            ],
        )[0][0]
        for sc in scens
    ]
    assert [r.to_dict() for r in batched] == [r.to_dict() for r in single]
    assert [without_tokens(r) for r in batched] == sequential


def test_requests_of_agents_sharing_a_model_travel_in_one_batch(
    config: MarketConfig, tiny_model_dir: Path, one_thread: None
) -> None:
    seller = hf_spec(tiny_model_dir, max_tokens="8")
    llm_buyer = hf_spec(tiny_model_dir, max_tokens="8", persona="hostile")
    pool = [llm_buyer, "scripted:time"]
    pool_of = {s.index: buyer_lineup(s, pool) for s in scenarios(config, 40)}
    scripted_only = next(i for i, lineup in pool_of.items() if llm_buyer not in lineup)
    llm_first = next(i for i, lineup in pool_of.items() if lineup[0] == llm_buyer)
    chosen = [s for s in scenarios(config, 40) if s.index in (scripted_only, llm_first)]
    _, stats = play_vs_pool(config, chosen, seller, pool)
    assert set(stats.per_agent) == {seller, llm_buyer}
    (key,) = stats.per_backend
    usage = stats.per_backend[key]
    assert key == f"hf:{tiny_model_dir}?device=cpu"
    assert usage.mixed_batches >= 1
    assert usage.batches < usage.requests == stats.requests


def test_openai_agents_complete_full_episodes_against_the_http_server(
    config: MarketConfig,
) -> None:
    finished: list[int] = []
    with ScriptedChatServer(reply_text=play_by_text) as server:
        spec = openai_spec(server)
        records, stats = play_vs_pool(
            config,
            scenarios(config, 6),
            spec,
            [spec],
            on_episode=lambda r: finished.append(r.scenario.index),
        )
        requests = len(server.requests)
    assert sorted(finished) == [r.scenario.index for r in records] == list(range(6))
    outcomes = [r.result.outcome for r in records]
    assert set(outcomes) <= {"deal", "no_deal"} and "deal" in outcomes
    turns = [t for r in records for t in r.result.turns]
    assert all(t.valid for t in turns)
    assert stats.requests == requests == len(turns)
    assert stats.errors == 0 and stats.errored_episodes == 0
    assert stats.tokens_in == sum(t.tokens_in for t in turns) > 0
    for record in records:
        for deal in record.result.deals:
            assert deal.price >= record.scenario.costs[0]


def test_planted_secrets_never_reach_a_buyer_over_http(config: MarketConfig) -> None:
    scenario = scenarios(config, 1, seed=9)[0]
    with ScriptedChatServer(reply_text=play_by_text) as server:
        spec = openai_spec(server)
        play_vs_pool(config, [scenario], spec, [spec])
        bodies = [r.body["messages"] for r in server.requests]
    budgets = [f"${b:,.2f}" for b in scenario.budgets]
    cost = f"${scenario.costs[0]:,.2f}"
    buyer_chats = [m for m in bodies if m[0]["content"].startswith("You are a buyer")]
    seller_chats = [m for m in bodies if m[0]["content"].startswith("You are the seller")]
    assert buyer_chats and seller_chats
    for messages in buyer_chats:
        text = "\n".join(m["content"] for m in messages)
        mine = [i for i, b in enumerate(budgets) if f"budget for this product is {b}" in text]
        assert len(mine) == 1
        others = [b for i, b in enumerate(budgets) if i != mine[0]]
        assert PLANTED_THOUGHT not in text and cost not in text
        assert not any(b in text for b in others)
    for messages in seller_chats:
        text = "\n".join(m["content"] for m in messages)
        assert cost in text and not any(b in text for b in budgets)
        # The seller's own Thought stays in its own history.
        assert (PLANTED_THOUGHT in text) == any(m["role"] == "assistant" for m in messages)


def test_a_failing_server_errors_only_the_episodes_that_use_it(config: MarketConfig) -> None:
    finished: list[EpisodeRecord] = []
    with (
        ScriptedChatServer(reply_text=play_by_text) as good,
        ScriptedChatServer(route=lambda body: Reply(status=500)) as broken,
    ):
        pool = [openai_spec(good), openai_spec(broken)]
        scens = scenarios(config, 8)
        records, stats = play_vs_pool(
            config, scens, "scripted:prober", pool, on_episode=finished.append
        )
    assert len(finished) == len(records) == 8
    uses_broken = [pool[1] in buyer_lineup(s, pool) for s in scens]
    assert any(uses_broken) and not all(uses_broken)
    for record, broken_slot in zip(records, uses_broken, strict=True):
        if broken_slot:
            assert record.result.outcome == "error" and record.result.termination == "error"
            assert "500" in (record.result.error or "")
        else:
            assert record.result.outcome in ("deal", "no_deal")
            assert record.result.error is None
    assert stats.errored_episodes == sum(uses_broken)
    broken_usage = stats.per_agent[pool[1]]
    assert broken_usage.errors == sum(uses_broken) == broken_usage.requests
    assert broken_usage.retries == broken_usage.requests  # one retry each before giving up


def test_max_concurrent_bounds_the_episodes_in_flight(config: MarketConfig) -> None:
    with ScriptedChatServer(reply_text=play_by_text, default_delay=0.02) as server:
        spec = openai_spec(server)
        play_vs_pool(config, scenarios(config, 6), "scripted:prober", [spec], max_concurrent=2)
        assert server.max_in_flight <= 2
    with ScriptedChatServer(reply_text=play_by_text, default_delay=0.02) as server:
        spec = openai_spec(server)
        play_vs_pool(config, scenarios(config, 6), "scripted:prober", [spec], max_concurrent=6)
        assert server.max_in_flight > 2


def test_scripted_lineups_finish_at_once_in_scenario_order_with_no_batch(
    config: MarketConfig,
) -> None:
    scens = scenarios(config, 5)
    pool = ["scripted:time", "scripted:tit-for-tat"]
    seen: list[EpisodeRecord] = []
    records, stats = play_vs_pool(config, scens, "scripted:prober", pool, on_episode=seen.append)
    by_hand = [
        play_matches(
            config,
            [
                Match(
                    sc,
                    make_agent("scripted:prober", "seller"),
                    tuple([make_agent(spec, "buyer") for spec in buyer_lineup(sc, pool)]),
                )
            ],
        )[0][0]
        for sc in scens
    ]
    assert records == seen == by_hand
    assert stats.episodes == 5 and stats.requests == 0 and stats.per_backend == {}


def test_bad_arguments_are_rejected_before_any_work(config: MarketConfig) -> None:
    with pytest.raises(ValueError, match="max_concurrent=0"):
        play_vs_pool(config, scenarios(config, 1), "scripted:prober", ["scripted:time"], 0)
    with pytest.raises(ValueError, match="buyer_pool is empty"):
        play_vs_pool(config, scenarios(config, 1), "scripted:prober", [])
