"""``arena play``: one episode built and played alone, agent text verbatim, one-line errors."""

from __future__ import annotations

from pathlib import Path

from agents.testing.http_server import ScriptedChatServer
from tournaments.evaluate import EvalConfig, evaluate

from .cli import arena, one_error

TALK = "[/oops] that is [bold]steep[/bold]"
BUYER_REPLY = f"Thought: hm\nTalk: {TALK}\nAction: [buy] $3.84"
"""A closing tag that rich cannot match, tags that would vanish, and a lower-case action."""


def llm_buyer(server: ScriptedChatServer) -> str:
    return f"openai:m?base_url={server.url}&max_retries=0&backoff=0.001"


def test_bad_inputs_print_one_error_line(tmp_path: Path) -> None:
    cases = {
        ("--seed", "-1"): "Invalid value for '--seed'",
        ("--index", "-1"): "Invalid value for '--index'",
        ("--index", "two"): "Invalid value for '--index'",
        ("--preset", "galaxy"): "unknown preset 'galaxy'",
        ("--seller", "scripted:nobody"): "unknown scripted seller 'nobody'",
        ("--seller", "hf:/nonexistent"): "'hf:/nonexistent': no hf model folder at /nonexistent",
        ("--buyer", "telepathy:x"): "unknown agent kind 'telepathy'",
        ("--buyer", ""): "--buyer needs at least one agent spec",
        ("--set", "num_buyerz=4"): "--set: unknown key 'num_buyerz'",
        ("--set", "total_turns"): "'total_turns' must look like field=value",
        ("--catalog", str(tmp_path / "none")): str(tmp_path / "none"),
        ("--split", "validation"): "validation",
        ("--colour", "red"): "No such option: --colour",
    }
    for args, needle in cases.items():
        assert needle in one_error("play", *args), args


def test_agent_text_is_shown_verbatim_never_as_markup() -> None:
    """A Talk with ``[/oops]`` crashed play (MarkupError); ``[buy]`` and ``[bold]`` vanished."""
    with ScriptedChatServer(reply_text=lambda _messages: BUYER_REPLY) as server:
        result = arena("play", "--buyer", llm_buyer(server))
    assert result.exit_code == 0, result.output
    assert f"Talk: {TALK}" in result.output
    assert "Action: [buy] $3.84" in result.output


def test_index_k_plays_scenario_k_alone_and_it_is_the_kth_episode_of_eval() -> None:
    """Issue 12: `--index 2` with LLM agents made 51 model calls (three episodes)."""
    with ScriptedChatServer(reply_text=lambda _messages: BUYER_REPLY) as server:
        result = arena("play", "--buyer", llm_buyer(server), "--index", "2", "--seed", "5")
        calls = len(server.requests)
    assert result.exit_code == 0, result.output
    with ScriptedChatServer(reply_text=lambda _messages: BUYER_REPLY) as server:
        alone = EvalConfig(buyers=(llm_buyer(server),), seed=5, start=2, episodes=1)
        (record,) = evaluate(alone).records
    assert record.scenario.index == 2
    assert calls == sum(turn.agent.startswith("buyer") for turn in record.result.turns) > 0

    scripted = evaluate(EvalConfig(seed=5, episodes=3)).records[2]
    assert evaluate(EvalConfig(seed=5, start=2, episodes=1)).records == [scripted]
