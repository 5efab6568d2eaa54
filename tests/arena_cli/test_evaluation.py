"""``arena eval``: every bad input is one error line, found before any episode is played."""

from __future__ import annotations

import json
from pathlib import Path

from agents.testing.http_server import ScriptedChatServer

from .cli import arena, one_error

SELLER_REPLY = "Thought: t\nTarget: 1\nTalk: [/oops] [sell] it\nAction: [SELL] $60.00"


def test_bad_inputs_print_one_error_line(tmp_path: Path) -> None:
    (tmp_path / "folder.json").mkdir()
    cases = {
        ("--seed", "-1"): "Invalid value for '--seed'",
        ("-n", "0"): "Invalid value for '--episodes' / '-n'",
        ("-n", "many"): "Invalid value for '--episodes' / '-n'",
        ("--max-concurrent", "0"): "Invalid value for '--max-concurrent'",
        ("--preset", "galaxy"): "unknown preset 'galaxy'",
        ("--seller", "scripted:nobody"): "unknown scripted seller 'nobody'",
        ("--seller", "hf:/nonexistent"): "'hf:/nonexistent': no hf model folder at /nonexistent",
        ("--seller", "openai:m?temperature=hot"): "temperature",
        ("--buyer", "scripted:time?e=fast"): "e: expected a number, got 'fast'",
        ("--set", "num_buyerz=4"): "--set: unknown key 'num_buyerz'",
        ("--set", "total_turns=9"): "total_turns=9 must be < num_buyers*per_buyer_cap",
        ("--catalog", "/no/such/catalogue"): "/no/such/catalogue",
        ("--json", str(tmp_path / "no" / "m.json")): f"folder {tmp_path / 'no'} does not exist",
        ("--json", str(tmp_path / "folder.json")): "is a folder; give a file name",
    }
    for args, needle in cases.items():
        assert needle in one_error("eval", "-n", "2", *args), args


def test_an_unwritable_json_path_fails_before_any_model_call(tmp_path: Path) -> None:
    """The --json path was tried only after the whole run: the work was lost."""
    with ScriptedChatServer(reply_text=lambda _messages: SELLER_REPLY) as server:
        seller = f"openai:m?base_url={server.url}&max_retries=0"
        out = tmp_path / "missing" / "metrics.json"
        assert "--json" in one_error("eval", "--seller", seller, "-n", "8", "--json", str(out))
        assert server.requests == []


def test_the_table_shows_specs_verbatim_and_the_checked_json_path_is_written(
    tmp_path: Path,
) -> None:
    out = tmp_path / "m.json"
    with ScriptedChatServer(reply_text=lambda _messages: SELLER_REPLY) as server:
        seller = f"openai:[b]tuned[/b]?base_url={server.url}&max_retries=0"
        result = arena("eval", "-n", "2", "--seller", seller, "--json", str(out))
    assert result.exit_code == 0, result.output
    assert seller in result.output
    assert out.is_file() and f"wrote {out}" in result.output


def test_eval_names_the_rewards_and_set_chooses_the_buyer_reward(tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    args = ("eval", "--preset", "bilateral", "-n", "4", "--json", str(out))
    result = arena(*args, "--set", "buyer_reward=budget_surplus")
    assert result.exit_code == 0, result.output
    assert "rewards: seller surplus_extraction, buyer budget_surplus" in result.output
    market = json.loads(out.read_text())["config"]["market"]
    assert (market["seller_reward"], market["buyer_reward"]) == ("surplus_extraction",
                                                                 "budget_surplus")  # fmt: skip
    assert "buyer_reward" in one_error(*args, "--set", "buyer_reward=budget")
