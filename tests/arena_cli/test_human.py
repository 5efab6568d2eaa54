"""``arena play --seller human`` / ``--buyer human``: a piped session ends with an outcome line,
and a stored game shows in ``arena ratings``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from arena_cli import app
from tournaments.config import TournamentConfig
from tournaments.runner import run_tournament

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()
SELL = "Thought: ...\nTarget: 1\nTalk: ...\nAction: [SELL] $99\n\n"


def arena(*args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    """The command with ``stdin`` piped in, as ``printf ... | arena play ...`` runs it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "USER": "ann", "COLUMNS": "160"}
    return subprocess.run([sys.executable, "-m", "arena_cli", *args], input=stdin, text=True,
                          capture_output=True, timeout=120, cwd=ROOT, env=env)  # fmt: skip


def test_a_piped_seller_session_ends_with_an_outcome_line() -> None:
    quit_move = "Thought: enough\nTarget: 1\nTalk: Bye.\nAction: [QUIT]\n\n"
    proc = arena("play", "--seller", "human", stdin=SELL + quit_move)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert "You are the seller" in proc.stdout and "--- Turn 2 ---" in proc.stdout
    outcome = next(line for line in lines if line.startswith("outcome:"))
    assert outcome == "outcome: no_deal (seller_quit); deal: none; your reward (seller): +0.000"
    assert lines[-1].startswith("hidden values: seller cost $")


def test_a_malformed_seller_move_ends_the_game_with_the_parsers_reason() -> None:
    proc = arena("play", "--seller", "human:ann", stdin="Target: 1\nAction: [SELL] $99\n\n")
    assert proc.returncode == 0, proc.stderr
    assert "outcome: violation (seller_violation)" in proc.stdout
    assert "violation by seller: format (missing_thought)" in proc.stdout


def test_stored_human_games_show_in_arena_ratings(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    sellers = ("scripted:satisficer", "scripted:prober")
    run_tournament(TournamentConfig("demo", sellers, (("scripted:time",),), episodes=3), db,
                   progress=False)  # fmt: skip
    for index in ("0", "1"):
        proc = arena("play", "--seller", "human", "--index", index, "--db", str(db), stdin=SELL)
        assert proc.returncode == 0, proc.stderr
        assert "you quit" in proc.stdout and f"in {db}" in proc.stdout
    proc = arena("play", "--seller", "human", "--index", "1", "--db", str(db), stdin=SELL)
    assert proc.returncode == 2 and "already stored" in proc.stderr
    assert "You are the seller" not in proc.stdout  # refused before a move is asked for
    missing = tmp_path / "no-such-folder" / "r.db"
    proc = arena("play", "--seller", "human", "--db", str(missing), stdin=SELL)
    assert proc.returncode == 2 and "does not exist" in proc.stderr and not proc.stdout
    out = tmp_path / "ratings.json"
    result = runner.invoke(app, ["ratings", "--db", str(db), "--json", str(out)])
    assert result.exit_code == 0, result.output
    rows = {row["agent"]: row for row in json.loads(out.read_text())}
    assert rows["human:ann"]["episodes"] == 2 and rows["human:ann"]["games"] == 4
    assert "human:ann" in result.output


def test_a_person_buyer_is_asked_again_after_a_rejected_move() -> None:
    low = "Thought: low\nTalk: Hi.\nAction: [BUY] $0.01\n\n"
    result = runner.invoke(app, ["play", "--buyer", "human:bo"], input=low * 2)
    assert result.exit_code == 0, result.output
    assert "Your previous reply was rejected" in result.output
    assert "outcome:" in result.output and "your reward (buyer_1)" in result.output
