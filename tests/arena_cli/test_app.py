"""The ``arena`` CLI: the README's main job, the JSON contract, and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arena.settings import field_help
from arena_cli import app
from tournaments.evaluate import EvalConfig

runner = CliRunner()
REAL_CATALOG = Path(__file__).resolve().parents[2].parent / "shared/data/AmazonHistoryPrice"


def eval_json(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "metrics.json"
    result = runner.invoke(app, ["eval", *args, "--json", str(out)])
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text())


def test_eval_json_has_the_documented_shape(tmp_path: Path) -> None:
    data = eval_json(tmp_path, "--episodes", "16", "--seed", "3")
    assert data["episodes"] == 16
    assert data["config"]["seller"] == "scripted:prober"
    assert data["config"]["market"]["num_buyers"] == 3
    for key in (
        "reward",
        "surplus_extraction_ratio",
        "deal_rate",
        "distinct_buyers_engaged",
        "deal_on_top_buyer_rate",
        "sell_below_cost_error_rate",
    ):
        assert set(data["metrics"][key]) >= {"mean", "se"}


@pytest.mark.parametrize("buyers", ["scripted:time", "scripted:time,scripted:tit-for-tat"])
def test_prober_beats_satisficer_in_distribution(tmp_path: Path, buyers: str) -> None:
    metrics = {
        seller: eval_json(tmp_path, "--seller", f"scripted:{seller}", "--buyer", buyers)["metrics"]
        for seller in ("satisficer", "prober")
    }
    for key in ("reward", "deal_on_top_buyer_rate"):
        assert metrics["prober"][key]["mean"] > metrics["satisficer"][key]["mean"]


def test_in_distribution_scripted_ordering_matches_the_issue(tmp_path: Path) -> None:
    """256 episodes: prober beats satisficer; oracle at least as good; nobody sells below cost."""
    metrics = {
        seller: eval_json(tmp_path, "--seller", f"scripted:{seller}")["metrics"]
        for seller in ("satisficer", "prober", "oracle", "time")
    }
    for key in ("reward", "deal_on_top_buyer_rate"):
        assert metrics["prober"][key]["mean"] > metrics["satisficer"][key]["mean"]
    assert metrics["oracle"]["reward"]["mean"] >= metrics["prober"]["reward"]["mean"]
    assert metrics["oracle"]["reward"]["mean"] >= metrics["satisficer"]["reward"]["mean"]
    for seller in metrics.values():
        assert seller["sell_below_cost_error_rate"]["mean"] == 0.0


def test_first_offer_top1_match_is_chance_in_distribution_and_higher_in_ood(tmp_path: Path) -> None:
    indist = eval_json(tmp_path, "--episodes", "512")["metrics"]["first_offer_top1_match"]
    ood = eval_json(
        tmp_path,
        "--preset",
        "ood",
        "--episodes",
        "512",
        "--buyer",
        "scripted:time,scripted:tit-for-tat,scripted:hardliner",
    )["metrics"]["first_offer_top1_match"]
    assert abs(indist["mean"] - 1 / 3) < 0.07
    assert ood["mean"] > indist["mean"] + 0.15


def test_multi_product_eval_reports_matching_quality(tmp_path: Path) -> None:
    data = eval_json(
        tmp_path, "--preset", "multi-product", "--seller", "scripted:oracle", "-n", "32"
    )
    assert data["metrics"]["matching_quality"]["mean"] == pytest.approx(1.0)
    assert data["metrics"]["deals_per_episode"]["mean"] > 1


def test_set_overrides_a_market_field(tmp_path: Path) -> None:
    data = eval_json(tmp_path, "-n", "4", "--set", "total_turns=6")
    assert data["config"]["market"]["total_turns"] == 6


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["eval", "--seller", "scripted:nobody"], "unknown scripted seller 'nobody'"),
        (["eval", "--seller", "telepathy:x"], "unknown agent kind 'telepathy'"),
        (["eval", "--set", "num_buyerz=4"], "--set: unknown key 'num_buyerz'"),
        (["eval", "--set", "allow_full_coverage=tru"], "expected true or false, got 'tru'"),
        (["eval", "--set", "total_turns=9"], "total_turns=9 must be < num_buyers*per_buyer_cap"),
        (["eval", "--preset", "galaxy"], "unknown preset 'galaxy'"),
        (["eval", "--catalog", "/no/such/catalogue"], "/no/such/catalogue"),
        (["eval", "--split", "validation"], "validation"),
        (["play", "--buyer", "scripted:time?e=fast"], "e: expected a number, got 'fast'"),
    ],
)
def test_user_errors_print_one_line_and_exit_nonzero(args: list[str], needle: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert needle in result.output
    assert "Traceback" not in result.output


def test_errors_from_the_installed_command_have_no_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "arena_cli", "eval", "--seller", "scripted:nobody"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert len([line for line in proc.stderr.splitlines() if line.strip()]) <= 2


def test_play_shows_the_transcript_and_then_the_hidden_values() -> None:
    result = runner.invoke(app, ["play", "--seed", "1"], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    assert "seller → buyer_" in result.output
    assert "Hidden values" in result.output
    assert result.output.index("Hidden values") > result.output.index("seller → buyer_")
    assert "cost $" in result.output and "budget $" in result.output


@pytest.mark.skipif(not REAL_CATALOG.exists(), reason="needs ../shared/data/AmazonHistoryPrice")
def test_eval_on_the_real_catalogue_test_split(tmp_path: Path) -> None:
    data = eval_json(tmp_path, "--catalog", str(REAL_CATALOG), "--split", "test", "-n", "32")
    assert data["config"]["split"] == "test"
    assert data["metrics"]["reward"]["n"] == 32


def test_eval_with_a_tiny_local_model_seller_counts_its_garbage_as_violations(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    """Issue 3: `arena eval --seller hf:<tiny model> --buyer scripted:time --episodes 64`."""
    spec = f"hf:{tiny_model_dir}?max_tokens=24"
    data = eval_json(tmp_path, "--seller", spec, "--episodes", "64")
    metrics = data["metrics"]
    assert metrics["reward"]["n"] == 64
    assert data["run_stats"]["requests"] >= 64
    # A random model cannot follow the protocol: every episode ends in a seller violation.
    assert metrics["violation_rate"]["mean"] == pytest.approx(1.0)
    assert metrics["violation_rate_by_kind"]["format"]["mean"] > 0.5


def test_eval_with_an_openai_compatible_seller_runs_to_the_end(tmp_path: Path) -> None:
    """Issue 3: the same command with `--seller openai:...` against a server on 127.0.0.1."""
    from agents.testing.http_server import ScriptedChatServer

    def seller(messages: list[dict[str, str]]) -> str:
        return "Thought: no\nTarget: 1\nTalk: I would rather not.\nAction: [SELL] $0.01"

    with ScriptedChatServer(reply_text=seller) as server:
        spec = f"openai:test-model?base_url={server.url}&max_retries=1&backoff=0.001"
        data = eval_json(tmp_path, "--seller", spec, "--episodes", "64")
    metrics = data["metrics"]
    assert metrics["reward"]["n"] == 64
    assert metrics["sell_below_cost_error_rate"]["mean"] == 1.0
    assert data["run_stats"]["tokens_in"] > 0


def test_config_errors_keep_their_table_names(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[tournament]\nname = "x"\nsellers = []\nbuyers = []\ncolour = "red"\n')
    result = runner.invoke(app, ["tournament", "run", str(bad), "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 2
    assert "colour" in result.output
    assert "Traceback" not in result.output


def test_report_on_a_database_without_a_league_has_no_league_sections(tmp_path: Path) -> None:
    toml = tmp_path / "t.toml"
    toml.write_text(
        '[tournament]\nname = "t"\nepisodes = 8\nsellers = ["scripted:prober", '
        '"scripted:satisficer"]\nbuyers = ["scripted:time"]\n'
    )
    db = tmp_path / "t.db"
    assert runner.invoke(app, ["tournament", "run", str(toml), "--db", str(db)]).exit_code == 0
    result = runner.invoke(app, ["report", "--db", str(db), "--out", str(tmp_path / "rep")])
    assert result.exit_code == 0, result.output
    page = (tmp_path / "rep" / "index.html").read_text()
    assert "Leaderboard" in page and "League" not in page


def test_option_help_comes_from_the_config_dataclasses() -> None:
    result = runner.invoke(app, ["eval", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for name in ("seed", "episodes", "max_concurrent"):
        assert " ".join(field_help(EvalConfig, name).split()) in text


def test_empty_estimates_are_null_in_the_json_and_a_dash_in_the_table(tmp_path: Path) -> None:
    """Bilateral: one buyer, so first-offer rankings are never eligible (n = 0)."""
    out = tmp_path / "m.json"
    result = runner.invoke(
        app, ["eval", "--preset", "bilateral", "-n", "4", "--json", str(out)],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "NaN" not in text
    assert json.loads(text)["metrics"]["first_offer_top1_match"] == {
        "mean": None,
        "se": None,
        "n": 0,
    }


def test_ratings_pin_the_first_scripted_seller_or_the_anchor_given(tmp_path: Path) -> None:
    toml = tmp_path / "t.toml"
    toml.write_text(
        '[tournament]\nname = "t"\nepisodes = 8\nsellers = ["scripted:satisficer", '
        '"scripted:prober"]\nbuyers = ["scripted:time"]\n'
    )
    db = tmp_path / "t.db"
    assert runner.invoke(app, ["tournament", "run", str(toml), "--db", str(db)]).exit_code == 0

    def ratings(*extra: str) -> dict[str, float]:
        out = tmp_path / "r.json"
        args = ["ratings", "--db", str(db), "--json", str(out), *extra]
        assert runner.invoke(app, args).exit_code == 0
        return {row["agent"]: row["rating"] for row in json.loads(out.read_text())}

    default, named = ratings(), ratings("--anchor", "scripted:prober")
    assert default["scripted:satisficer"] == 1000.0 and named["scripted:prober"] == 1000.0
    gap = default["scripted:prober"] - default["scripted:satisficer"]
    assert named["scripted:prober"] - named["scripted:satisficer"] == pytest.approx(gap)
    centred = ratings("--anchor", "none")
    assert sum(centred.values()) / 2 == pytest.approx(1000.0)
    result = runner.invoke(app, ["ratings", "--db", str(db), "--anchor", "scripted:time"])
    assert result.exit_code == 2 and "is not among the rated players" in result.output
