"""Games with a person: their lineups, their storage under human:<name>, and ratings that
compare the person with the agents that met the same lineup on the same scenario."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from agents.human import HumanAgent, MoveReader
from tournaments.config import TournamentConfig
from tournaments.evaluate import EvalConfig
from tournaments.human import human_lineup, play_human_game, store_human_game
from tournaments.leaderboard import leaderboard, stored_anchor, stored_lineups
from tournaments.runner import run_tournament
from tournaments.store import load_records

SELL = "Thought: high\nTarget: 1\nTalk: 99 it is.\nAction: [SELL] $99\n\n"


def person(moves: str, name: str = "human:ann") -> HumanAgent:
    return HumanAgent(name, MoveReader(io.StringIO(moves)), lambda _text: None)


def test_a_person_seller_meets_the_lineup_the_buyer_specs_draw() -> None:
    config = EvalConfig(seller="human:ann", buyers=("scripted:time", "scripted:tit-for-tat"))
    seller, buyers = human_lineup(config, 4)
    record = play_human_game(config, 4, person(SELL))
    assert (record.seller, record.buyers) == (seller, buyers) == ("human:ann", record.buyers)
    assert set(buyers) <= {"scripted:time", "scripted:tit-for-tat"}
    assert record.result.turns[3].text == SELL.strip()


def test_a_person_buyer_takes_slot_1_and_the_other_slots_draw_from_the_rest() -> None:
    config = EvalConfig(seller="scripted:prober", buyers=("human:bo", "scripted:tit-for-tat"))
    tft = "scripted:tit-for-tat"
    assert human_lineup(config, 2)[1] == ("human:bo", tft, tft)
    alone = EvalConfig(seller="scripted:prober", buyers=("human:bo",))
    assert human_lineup(alone, 2)[1] == ("human:bo", "scripted:time", "scripted:time")
    with pytest.raises(ValueError, match="give human first"):
        human_lineup(EvalConfig(buyers=("scripted:time", "human:bo")), 0)
    with pytest.raises(ValueError, match="one person"):
        human_lineup(EvalConfig(seller="human:a", buyers=("human:b",)), 0)


def test_stored_games_are_rated_with_the_tournaments_agents(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    sellers = ("scripted:satisficer", "scripted:prober")
    run_tournament(TournamentConfig("demo", sellers, (("scripted:time",),), episodes=4), db,
                   progress=False)  # fmt: skip
    config = EvalConfig(seller="human:ann", buyers=("scripted:time",))
    for index in (0, 1, 2):
        store_human_game(db, config, play_human_game(config, index, person(SELL)))
    with pytest.raises(ValueError, match=r"already stored.*another --index"):
        store_human_game(db, config, play_human_game(config, 1, person(SELL)))
    buyer_config = EvalConfig(seller="scripted:prober", buyers=("human:bo",))
    opening = "Thought: t\nTalk: Hi.\nAction: [QUIT]\n\n"
    game = play_human_game(buyer_config, 0, person(opening, "human:bo"))
    store_human_game(db, buyer_config, game)

    records = load_records(db)
    assert sum(r.seller == "human:ann" for r in records) == 3
    _, entries = stored_lineups(db)
    for role in ("seller", "buyer", "cross"):
        rows = leaderboard(records, role, buyer_entries=entries, anchor=stored_anchor(db, role))
        agents = {row["agent"]: row for row in rows}
        if role != "buyer":
            assert agents["human:ann"]["games"] > 0 and agents["human:ann"]["rating"] is not None
        if role != "seller":
            assert "human:bo|scripted:time" in agents
    sellers_board = leaderboard(records, "seller", anchor=stored_anchor(db, "seller"))
    assert {r["agent"] for r in sellers_board if r["anchor"]} == {"scripted:satisficer"}
