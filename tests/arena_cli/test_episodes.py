"""``arena episodes`` and ``arena replay``: list stored episodes, replay one or many from turn k."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arena_cli import app
from tournaments.config import TournamentConfig
from tournaments.runner import run_tournament
from tournaments.store import Store, load_records

runner = CliRunner()


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "demo.db"
    config = TournamentConfig(
        "demo",
        ("scripted:satisficer", "scripted:prober"),
        (("scripted:time",), ("scripted:time", "scripted:tit-for-tat")),
        episodes=24,
    )
    run_tournament(config, path, progress=False)
    return path


@pytest.fixture
def db(source: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "demo.db"
    copy.write_bytes(source.read_bytes())
    return copy


def invoke(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_episodes_lists_the_filtered_episodes_and_writes_them_as_json(db: Path, tmp_path) -> None:
    out = tmp_path / "rows.json"
    text = invoke("episodes", "--db", str(db), "--seller", "scripted:satisficer", "--outcome",
                  "no_deal", "--limit", "4", "--json", str(out))  # fmt: skip
    data = json.loads(out.read_text())
    lost = [r for r in load_records(db) if r.seller == "scripted:satisficer"
            and r.result.outcome == "no_deal"]  # fmt: skip
    assert data["total"] == len(lost) > 4 and len(data["episodes"]) == 4
    assert f"4 of {len(lost)} episodes" in text
    for row in data["episodes"]:
        assert (row["seller"], row["outcome"], row["tournament"]) == (
            "scripted:satisficer", "no_deal", "demo")  # fmt: skip
        assert re.search(rf"\b{row['id']}\b.*demo.*scripted:satisficer.*no_deal", text)


def test_episodes_on_a_missing_database_is_one_clear_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["episodes", "--db", str(tmp_path / "none.db")])
    assert result.exit_code == 2 and "no database at" in result.output


def test_replay_of_a_satisficer_episode_by_prober_from_turn_3_shows_both_outcomes(db: Path):
    with Store.open(db) as store:
        (episode_id,) = store.db.execute(
            "SELECT id FROM episodes WHERE seller = 'scripted:satisficer' AND "
            "outcome = 'no_deal' AND seller_turns > 3 ORDER BY id LIMIT 1"
        ).fetchone()
    text = invoke("replay", "--db", str(db), "--episode", str(episode_id), "--seller",
                  "scripted:prober", "--from-turn", "3")  # fmt: skip
    assert "recorded messages exactly (openings and seller turns 1-3)" in text
    assert "seller=scripted:prober" in text
    continuation = re.findall(r"^turn (\d+)\s+(\S+) -> ", text, re.MULTILINE)
    assert continuation[0] == ("4", "seller")  # the new seller's first message is turn 4
    assert re.search(r"outcome\s+│\s+no_deal \(turn_limit\)\s+│\s+\w+", text)
    assert re.search(r"seller\s+│\s+scripted:satisficer\s+│\s+scripted:prober", text)
    assert f"(parent {episode_id})" in text or "stored 1 new counterfactual" in text
    with Store.open(db) as store:
        ((parent, from_turn, seller),) = store.db.execute(
            "SELECT parent_id, from_turn, seller FROM episodes WHERE parent_id IS NOT NULL"
        ).fetchall()
    assert (parent, from_turn, seller) == (episode_id, 3, "scripted:prober")


def test_replay_of_every_lost_episode_reports_the_paired_interval(db: Path, tmp_path) -> None:
    out = tmp_path / "replays.json"
    text = invoke("replay", "--db", str(db), "--episodes-from",
                  "seller=scripted:satisficer outcome=no_deal", "--seller", "scripted:prober",
                  "--from-turn", "3", "--no-store", "--json", str(out))  # fmt: skip
    data = json.loads(out.read_text())
    summary = data["summary"]
    low, high = summary["ci95"]
    assert low <= summary["difference"] <= high
    assert summary["original_outcomes"] == {"no_deal": summary["episodes"]}
    assert f"{summary['difference']:+.3f} [{low:+.3f}, {high:+.3f}]" in text
    assert len(data["episodes"]) == summary["episodes"]
    with Store.open(db) as store:
        assert store.db.execute("SELECT COUNT(*) FROM episodes WHERE parent_id IS NOT NULL"
                                ).fetchone() == (0,)  # fmt: skip


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from-turn", "3", "--seller", "scripted:prober"], "either --episode ID or"),
        (["--from-turn", "3", "--episode", "1"], "name a new agent"),
        (["--from-turn", "3", "--episode", "99999", "--seller", "scripted:prober"],
         "no episode with id 99999"),
        (["--from-turn", "30", "--episode", "1", "--seller", "scripted:prober"],
         "nothing is left to play after turn 30"),
        (["--from-turn", "1", "--episode", "1", "--buyer", "two=scripted:time"], "NUMBER=SPEC"),
    ],
)  # fmt: skip
def test_replay_mistakes_are_one_clear_error(db: Path, args: list[str], message: str) -> None:
    result = runner.invoke(app, ["replay", "--db", str(db), *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
