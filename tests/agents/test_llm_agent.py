"""LLM agents: spec parameters, chat state, seeds, reasoning blocks and narration.

Model replies come from the scripted OpenAI-compatible server on 127.0.0.1 (a real HTTP round
trip through the openai back-end); back-end sharing is checked with the tiny local model.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agents import make_agent
from agents.backends import Completion
from agents.base import EpisodeContext, agent_seed
from agents.engine import play_vs_pool
from agents.llm import (
    DEFAULT_MAX_TOKENS,
    BackendError,
    LLMAgent,
    LLMAgentConfig,
    make_llm_agent,
    reply_words,
)
from agents.specs import SpecError
from agents.testing.http_server import Reply, ScriptedChatServer
from arena.catalog import load_catalog
from arena.config import MarketConfig, get_preset
from arena.game import Market
from arena.money import budget_ladder, format_price
from arena.protocol import SellerMessage, parse_seller
from arena.scenarios import Scenario, make_scenario

FAST = "max_retries=0&backoff=0.001&timeout=5"
SELLER_REPLY = (
    "Thought: MY-PRIVATE-PLAN\nTarget: 1\nTalk: List price, friend.\nAction: [SELL] $500.00"
)


def scenario(config: MarketConfig, seed: int = 0) -> Scenario:
    return make_scenario(config, load_catalog(None), seed, 0)


def opened_market(config: MarketConfig, sc: Scenario) -> Market:
    market = Market(config, sc)
    for i in range(config.num_buyers):
        market.step(f"Thought: o\nTalk: hi\nAction: [BUY] ${sc.first_offers[i]:.2f}")
    return market


def reset(agent: LLMAgent, config: MarketConfig, sc: Scenario, slot: int = 0) -> None:
    role = "seller" if slot == 0 else f"buyer_{slot}"
    agent.reset(EpisodeContext(role, slot, config, sc, agent_seed(sc, slot)))


def spec(server: ScriptedChatServer, extra: str = "") -> str:
    return f"openai:tiny-chat?base_url={server.url}&{FAST}" + (f"&{extra}" if extra else "")


def test_spec_parameters_split_into_agent_sampling_and_backend_settings() -> None:
    with ScriptedChatServer() as server:
        text = spec(server, "persona=hostile&history=2&temperature=0.2&top_p=0.9&max_tokens=64")
        agent = make_llm_agent(text, "seller")
        config = get_preset("in-distribution")
        reset(agent, config, scenario(config))
    assert agent.spec == text
    assert agent.config == LLMAgentConfig(persona="hostile", narrate="", history=2)
    assert agent.backend.config.max_retries == 0
    assert (agent.sampling.temperature, agent.sampling.top_p) == (0.2, 0.9)
    assert agent.sampling.max_tokens == 64


def test_temperature_defaults_come_from_the_market_config_per_role() -> None:
    config = MarketConfig(seller_temperature=1.0, buyer_temperature=0.3)
    sc = scenario(config)
    with ScriptedChatServer() as server:
        seller = make_llm_agent(spec(server), "seller")
        buyer = make_llm_agent(spec(server), "buyer")
        reset(seller, config, sc, 0)
        reset(buyer, config, sc, 2)
    assert seller.sampling.temperature == 1.0
    assert buyer.sampling.temperature == 0.3
    assert seller.sampling.max_tokens == DEFAULT_MAX_TOKENS


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("persona=grumpy", "persona='grumpy' is unknown"),
        ("narrate=hf:/m", "must name a scripted agent"),
        ("history=-3", "history=-3 is invalid"),
        ("temperature=hot", "temperature"),
        ("seed=abc", "abc"),
        ("colour=red", "colour"),
        ("share_cue=true", "share_cue=true cues the share digit; it needs steer=share"),
    ],
)
def test_bad_agent_parameters_are_spec_errors_naming_the_parameter(
    extra: str, message: str
) -> None:
    with pytest.raises(SpecError, match=message):
        make_llm_agent(f"openai:m?base_url=http://127.0.0.1:9/v1&{extra}", "seller")


CHECK_WITHOUT_TORCH = """
import sys
from agents import check_spec
for spec in sys.argv[1:]:
    try:
        check_spec(spec, "seller")
        print("ok", spec)
    except ValueError as exc:
        print("error", exc)
assert not {"torch", "transformers", "vllm"} & set(sys.modules), "a heavy library was imported"
"""


def test_check_spec_finds_a_missing_model_folder_without_importing_a_model_library(
    tmp_path: Path,
) -> None:
    """`arena eval --seller hf:/nonexistent` used to import torch and print 387 lines."""
    empty, weights = tmp_path / "empty", tmp_path / "weights.safetensors"
    empty.mkdir()
    weights.write_bytes(b"")
    specs = [
        "hf:/nonexistent",
        f"hf:{empty}",
        f"vllm:{weights}",
        f"vllm:Qwen/Qwen3-0.6B?lora={tmp_path / 'no-adapter'}",
        "hf:Qwen/Qwen3-0.6B?device=cpu",
    ]
    proc = subprocess.run(
        [sys.executable, "-c", CHECK_WITHOUT_TORCH, *specs],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "error 'hf:/nonexistent': no hf model folder at /nonexistent",
        f"error 'hf:{empty}': hf model folder {empty} has no config.json",
        f"error 'vllm:{weights}': vllm model {weights} is a file; give the folder that holds it",
        f"error 'vllm:Qwen/Qwen3-0.6B?lora={tmp_path / 'no-adapter'}': no lora adapter folder "
        f"at {tmp_path / 'no-adapter'}",
        "ok hf:Qwen/Qwen3-0.6B?device=cpu",  # a hub id: the back-end resolves it
    ]


def test_a_model_that_fails_to_load_is_a_spec_error_naming_the_spec(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{}")
    spec = f"hf:{broken}?device=cpu"
    with pytest.raises(SpecError) as info:
        make_llm_agent(spec, "seller")
    assert str(info.value).startswith(f"{spec!r}: the hf back-end did not start: ")


def test_unknown_narrator_is_reported_when_the_agent_is_built() -> None:
    with pytest.raises(SpecError, match="unknown scripted seller 'nobody'"):
        make_llm_agent("openai:m?base_url=http://127.0.0.1:9/v1&narrate=scripted:nobody", "seller")


def test_chat_history_alternates_turns_and_keeps_the_agents_own_thought() -> None:
    config = get_preset("in-distribution")
    sc = scenario(config)
    with ScriptedChatServer(reply_text=lambda messages: SELLER_REPLY) as server:
        agent = make_llm_agent(spec(server), "seller")
        reset(agent, config, sc)
        market = opened_market(config, sc)
        market.step(agent.act(market.seller_view()))
        market.step("Thought: hmm\nTalk: too much\nAction: [BUY] $5.00")
        market.step(agent.act(market.seller_view()))
        bodies = [r.body for r in server.requests]
    first, second = bodies[0]["messages"], bodies[1]["messages"]
    assert [m["role"] for m in first] == ["system", "user"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[:2] == first
    assert second[2]["content"] == SELLER_REPLY
    assert "MY-PRIVATE-PLAN" in second[2]["content"]
    assert "Buyer 1 says: too much" in second[3]["content"]
    assert first[0]["content"].startswith("You are the seller")


def test_a_buyer_spec_with_a_ladder_sends_its_budget_shares_in_the_system_prompt() -> None:
    config = get_preset("bilateral")
    sc = scenario(config)
    budget = sc.valuations[0][0]
    buyer_reply = "Thought: o\nTalk: hi\nAction: [BUY] $1.00"
    with ScriptedChatServer(reply_text=lambda messages: buyer_reply) as server:
        agent = make_llm_agent(
            spec(server, "prompt=compact&ladder=2&budget_hint=true&list_hint=true&round_hint=true"),
            "buyer",
        )
        reset(agent, config, sc, slot=1)
        agent.act(Market(config, sc).view("buyer_1"))
        system = server.requests[0].body["messages"][0]["content"]
    shares = budget_ladder(budget, 2)
    aids = agent.config
    assert (aids.ladder, aids.budget_hint, aids.list_hint, aids.round_hint) == (2, True, True, True)
    assert system.endswith(
        f"Offers under your budget: 90% {format_price(shares[0])}, 80% {format_price(shares[1])}."
    )
    with pytest.raises(SpecError, match="ladder=12 is out of range"):
        make_llm_agent("openai:m?base_url=http://127.0.0.1:9/v1&ladder=12", "buyer")


def test_history_window_keeps_only_the_last_exchanges() -> None:
    config = get_preset("in-distribution")
    sc = scenario(config)
    with ScriptedChatServer(reply_text=lambda messages: SELLER_REPLY) as server:
        agent = make_llm_agent(spec(server, "history=1"), "seller")
        reset(agent, config, sc)
        market = opened_market(config, sc)
        for _ in range(3):
            market.step(agent.act(market.seller_view()))
            market.step("Thought: hmm\nTalk: no\nAction: [BUY] $5.00")
        roles = [[m["role"] for m in r.body["messages"]] for r in server.requests]
    assert roles == [
        ["system", "user"],
        ["system", "user", "assistant", "user"],
        ["system", "user", "assistant", "user"],
    ]


def test_think_block_stays_in_the_transcript_but_leaves_the_history() -> None:
    config = get_preset("in-distribution")
    sc = scenario(config)
    reply = "<think>\nBuyer 1 is weak. SECRET-REASONING\n</think>\n" + SELLER_REPLY
    with ScriptedChatServer(reply_text=lambda messages: reply) as server:
        agent = make_llm_agent(spec(server), "seller")
        reset(agent, config, sc)
        market = opened_market(config, sc)
        text = agent.act(market.seller_view())
        market.step(text)
        market.step("Thought: hmm\nTalk: no\nAction: [BUY] $5.00")
        market.step(agent.act(market.seller_view()))
        history = server.requests[1].body["messages"][2]["content"]
    assert text == reply
    assert market.turns[3].text == reply and market.turns[3].valid
    assert history == SELLER_REPLY
    assert "SECRET-REASONING" not in history


def test_request_seeds_depend_on_episode_slot_and_turn_and_reach_the_server() -> None:
    config = get_preset("in-distribution")
    sc, other = scenario(config, 0), scenario(config, 1)
    with ScriptedChatServer(reply_text=lambda messages: SELLER_REPLY) as server:
        agent = make_llm_agent(spec(server), "seller")
        market = opened_market(config, sc)

        def seeds(s: Scenario, slot: int = 0) -> list[int | None]:
            reset(agent, config, s, slot)
            out = []
            for _ in range(2):
                out.append(agent.request(market.seller_view()).sampling.seed)
                agent.receive(Completion(text=SELLER_REPLY))
            return out

        first, again, moved = seeds(sc), seeds(sc), seeds(other)
        reset(agent, config, sc)
        agent.act(market.seller_view())
        sent = server.requests[0].body["seed"]
        unseeded = make_llm_agent(spec(server, "seed=none"), "seller")
        reset(unseeded, config, sc)
        none_seed = unseeded.request(market.seller_view()).sampling.seed
        based = make_llm_agent(spec(server, "seed=42"), "seller")
        reset(based, config, sc)
        based_seed = based.request(market.seller_view()).sampling.seed
    assert first == again
    assert first[0] != first[1]
    assert moved != first
    assert sent == first[0]
    assert none_seed is None
    assert based_seed is not None and based_seed != first[0]


def test_narrated_seller_sends_the_scripted_move_with_the_llms_words() -> None:
    config = get_preset("in-distribution")
    sc = scenario(config)
    llm = "Thought: LLM-THOUGHT\nTarget: 3\nTalk: LLM-TALK, a fine price.\nAction: [SELL] $0.01"
    with ScriptedChatServer(reply_text=lambda messages: llm) as server:
        agent = make_llm_agent(spec(server, "narrate=scripted:time"), "seller")
        reset(agent, config, sc)
        market = opened_market(config, sc)
        text = agent.act(market.seller_view())
        prompt = server.requests[0].body["messages"][-1]["content"]
    scripted = make_agent("scripted:time", "seller")
    scripted.reset(EpisodeContext("seller", 0, config, sc, agent_seed(sc, 0)))
    expected = parse_seller(scripted.act(market.seller_view()))
    sent = parse_seller(text)
    assert isinstance(sent, SellerMessage) and isinstance(expected, SellerMessage)
    assert (sent.buyer, sent.kind, sent.price) == (expected.buyer, expected.kind, expected.price)
    assert (sent.thought, sent.talk) == ("LLM-THOUGHT", "LLM-TALK, a fine price.")
    assert f"Action: [SELL] ${expected.price:,.2f}" in prompt
    assert "already decided" in prompt


def test_narration_falls_back_to_the_scripted_words_when_the_reply_has_none() -> None:
    config = get_preset("in-distribution")
    sc = scenario(config)
    with ScriptedChatServer(reply_text=lambda messages: "@@ gibberish @@") as server:
        agent = make_llm_agent(spec(server, "narrate=scripted:time"), "buyer")
        reset(agent, config, sc, slot=1)
        market = Market(config, sc)
        text = agent.act(market.buyer_view(0))
    scripted = make_agent("scripted:time", "buyer")
    scripted.reset(EpisodeContext("buyer_1", 1, config, sc, agent_seed(sc, 1)))
    assert text == scripted.act(market.buyer_view(0))
    assert f"[BUY] ${sc.first_offers[0]:.2f}" in text


def test_reply_words_reads_thought_and_talk_leniently() -> None:
    reply = "<think>x</think>\n**Thought:** plan\n  more plan\nTalk: hello\nthere\nAction: [QUIT]"
    assert reply_words(reply) == ("plan more plan", "hello there")
    assert reply_words("no labels here") == ("", "")


def test_act_raises_backend_error_when_the_server_refuses() -> None:
    config = get_preset("in-distribution")
    sc = scenario(config)
    with ScriptedChatServer(script=[Reply(status=400)]) as server:
        agent = make_llm_agent(spec(server), "seller")
        reset(agent, config, sc)
        with pytest.raises(BackendError, match="Error code: 400"):
            agent.act(opened_market(config, sc).seller_view())


def test_request_before_reset_and_receive_without_request_are_errors() -> None:
    agent = make_llm_agent("openai:m?base_url=http://127.0.0.1:9/v1", "seller")
    config = get_preset("in-distribution")
    sc = scenario(config)
    with pytest.raises(RuntimeError, match="reset"):
        agent.request(opened_market(config, sc).seller_view())
    reset(agent, config, sc)
    with pytest.raises(RuntimeError, match="without a pending"):
        agent.receive(Completion(text="x"))
    with pytest.raises(ValueError, match="built as seller"):
        reset(agent, config, sc, slot=1)


def test_agents_naming_the_same_model_share_one_backend(tiny_model_dir: Path) -> None:
    a = make_llm_agent(f"hf:{tiny_model_dir}?temperature=0.1&device=cpu", "seller")
    b = make_llm_agent(f"hf:{tiny_model_dir}?temperature=0.9&persona=hostile&device=cpu", "buyer")
    c = make_llm_agent(f"hf:{tiny_model_dir}?batch_size=2&device=cpu", "buyer")
    assert a.backend is b.backend
    assert c.backend is not a.backend
    assert a.backend.key == f"hf:{tiny_model_dir}?device=cpu"


def test_an_agent_whose_replies_never_parse_plays_a_full_episode_through_the_engine() -> None:
    """Every buyer attempt is garbage: each is re-sampled by the game until its channel closes."""
    config = get_preset("in-distribution")
    with ScriptedChatServer(reply_text=lambda messages: "[QUIT]") as server:
        records = play_vs_pool(config, [scenario(config)], "scripted:prober", [spec(server)])[0]
    result = records[0].result
    assert result.outcome == "no_deal" and result.termination == "market_exhausted"
    assert all(turn.kind is None for turn in result.turns)
    assert result.buyer_failures == (True, True, True)
    assert len(result.turns) == 3 * (config.max_buyer_retries + 1)


def test_narrator_parameters_travel_percent_encoded_inside_the_spec() -> None:
    agent = make_llm_agent(
        "openai:m?base_url=http://127.0.0.1:9/v1&narrate=scripted:time%3Fe%3D0.5", "seller"
    )
    assert agent.config.narrate == "scripted:time?e=0.5"
    assert agent.narrator.spec == "scripted:time?e=0.5"
    assert agent.narrator.config.e == 0.5
