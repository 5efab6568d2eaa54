"""Model tokens and cost per episode and agent: stored per seat, joined to the leaderboards'
episodes, priced with --price."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arena_cli import app
from tournaments.config import TournamentConfig
from tournaments.leaderboard import leaderboard, stored_anchor, stored_lineups
from tournaments.report import write_report
from tournaments.runner import run_tournament
from tournaments.store import load_records
from tournaments.usage import Price, add_usage, check_prices, parse_prices, stored_usage


def quitting_seller(_messages: list) -> str:
    return "Thought: enough\nTarget: 1\nTalk: Goodbye.\nAction: [QUIT]"


@pytest.fixture(scope="module")
def llm_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    from agents.backends import close_backends
    from agents.testing.http_server import ScriptedChatServer

    db = tmp_path_factory.mktemp("usage") / "llm.db"
    with ScriptedChatServer(reply_text=quitting_seller) as server:
        spec = f"openai:m?base_url={server.url}&max_retries=1&backoff=0.001&timeout=5"
        config = TournamentConfig.from_dict(
            {"name": "llm", "episodes": 6, "sellers": [spec, "scripted:prober"],
             "buyers": ["scripted:time"]}
        )  # fmt: skip
        run_tournament(config, db, workers=1, progress=False)
    close_backends()
    return db, spec


def rows_with_usage(db: Path, prices: dict[str, Price]) -> list[dict]:
    records = load_records(db)
    _, entries = stored_lineups(db)
    rows = leaderboard(records, "seller", buyer_entries=entries, anchor=stored_anchor(db, "seller"))
    add_usage(rows, records, "seller", entries, stored_usage(db), prices)
    return rows


def test_tokens_per_episode_are_the_mean_of_the_sellers_turn_tokens(llm_db) -> None:
    db, spec = llm_db
    llm = [r for r in load_records(db) if r.seller == spec]
    per_episode = [sum(t.tokens_in + t.tokens_out for t in r.result.turns if t.agent == "seller")
                   for r in llm]  # fmt: skip
    assert min(per_episode) > 0
    prompt = sum(t.tokens_in for r in llm for t in r.result.turns)
    completion = sum(t.tokens_out for r in llm for t in r.result.turns)
    rows = {row["agent"]: row for row in rows_with_usage(db, {spec: Price(2.0, 8.0)})}
    assert rows[spec]["tokens_per_episode"] == round(sum(per_episode) / len(llm))
    expected = 1000 * (2.0 * prompt + 8.0 * completion) / 1e6 / len(llm)
    assert rows[spec]["cost_per_1k_episodes"] == pytest.approx(expected)
    assert rows["scripted:prober"]["tokens_per_episode"] == 0
    assert rows["scripted:prober"]["cost_per_1k_episodes"] == 0.0
    unpriced = {row["agent"]: row for row in rows_with_usage(db, {})}
    assert unpriced[spec]["cost_per_1k_episodes"] is None


def test_ratings_show_tokens_and_cost_with_a_price_table(llm_db) -> None:
    db, spec = llm_db
    result = CliRunner().invoke(
        app, ["ratings", "--db", str(db), "--price", f"{spec}=2,8"], env={"COLUMNS": "250"}
    )
    assert result.exit_code == 0, result.output
    assert "Tokens/Ep" in result.output and "$/1k Ep" in result.output
    bad = CliRunner().invoke(app, ["ratings", "--db", str(db), "--price", "openai:x=1,2"])
    assert bad.exit_code == 2 and "used no tokens here" in bad.output


def test_a_scripted_database_shows_no_usage_columns(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    config = TournamentConfig("s", ("scripted:prober", "scripted:time"), (("scripted:time",),),
                              episodes=3)  # fmt: skip
    run_tournament(config, db, progress=False)
    assert stored_usage(db) == {}
    assert all("tokens_per_episode" not in row for row in rows_with_usage(db, {}))


@pytest.mark.parametrize("text", ["openai:m", "openai:m=1", "=1,2", "openai:m=a,b", "x=-1,2"])
def test_a_bad_price_is_refused_with_the_expected_form(text: str) -> None:
    with pytest.raises(ValueError, match="SPEC=IN,OUT"):
        parse_prices([text])


def test_a_price_spec_may_contain_parameters_and_must_name_an_agent_with_tokens() -> None:
    spec = "openai:m?temperature=0.7&seed=1"
    assert parse_prices([f"{spec}=0.15,0.6"]) == {spec: Price(0.15, 0.6)}
    with pytest.raises(ValueError, match="agents with tokens: none"):
        check_prices({spec: Price(1, 1)}, {})


def test_the_report_shows_tokens_and_cost_per_agent_and_per_pairing(llm_db, tmp_path) -> None:
    db, spec = llm_db
    page = write_report(db, tmp_path / "site", prices={spec: Price(2.0, 8.0)})
    text = page.read_text()
    block = text.split('id="leaderboard">', 1)[1].split("</script>", 1)[0]
    sellers = {row["agent"]: row for row in json.loads(block)["seller"]}
    expected = {row["agent"]: row for row in rows_with_usage(db, {spec: Price(2.0, 8.0)})}
    for agent in (spec, "scripted:prober"):
        for key in ("tokens_per_episode", "cost_per_1k_episodes"):
            assert sellers[agent][key] == pytest.approx(expected[agent][key])
    assert "Tokens/Ep" in text and "$/1k Ep" in text
    index = (page.parent / "data" / "pairings.js").read_text().splitlines()[1]
    pairings = {
        p["seller"]: p for p in json.loads(index.split(" = ", 1)[1].rstrip(";"))["pairings"]
    }
    llm = [r for r in load_records(db) if r.seller == spec]
    tokens = sum(t.tokens_in + t.tokens_out for r in llm for t in r.result.turns)
    assert pairings[spec]["tokens_per_episode"] == round(tokens / len(llm))
    assert pairings[spec]["cost_per_1k_episodes"] == pytest.approx(
        expected[spec]["cost_per_1k_episodes"]
    )
