"""A person in a seat: moves read from a stream up to an empty line, the seat's own prompt and
observations shown (never another seat's hidden values), a quit when the input ends."""

from __future__ import annotations

import io

import pytest

from agents import make_agent
from agents.driver import Episode, buyer_lineup
from agents.human import HumanAgent, InputEnded, MoveReader, human_spec, is_human
from agents.prompts import observation
from arena.catalog import load_catalog
from arena.config import get_preset
from arena.money import format_price
from arena.scenarios import make_scenario

CONFIG = get_preset("in-distribution")
SELL = "Thought: open high\nTarget: 2\nTalk: It is yours for 99.\nAction: [SELL] $99\n"


def test_a_move_is_the_lines_up_to_an_empty_line_and_the_end_of_input_ends_the_moves() -> None:
    reader = MoveReader(io.StringIO(f"\n\n{SELL}\n\nThought: a\nAction: [QUIT]"))
    assert reader() == SELL.rstrip("\n")
    assert reader() == "Thought: a\nAction: [QUIT]"
    with pytest.raises(InputEnded, match="after 2 move"):
        reader()


def test_human_specs_are_named_people() -> None:
    assert is_human("human") and is_human(" human:ann ") and not is_human("humanoid:x")
    assert human_spec("human", "root") == "human:root"
    assert human_spec("human:ann", "root") == "human:ann"
    with pytest.raises(ValueError, match="one word"):
        human_spec("human:ann lee", "root")


def play(seat: int, moves: str, index: int = 3) -> tuple[HumanAgent, list[str], object]:
    scenario = make_scenario(CONFIG, load_catalog(), 0, index)
    shown: list[str] = []
    person = HumanAgent("human:ann", MoveReader(io.StringIO(moves)), shown.append)
    specs = ["scripted:prober", *buyer_lineup(scenario, ["scripted:time"])]
    players = [person if slot == seat else make_agent(s, "seller" if slot == 0 else "buyer")
               for slot, s in enumerate(specs)]  # fmt: skip
    episode = Episode(CONFIG, scenario, players)
    assert episode.advance() is None
    return person, shown, episode.record()


def test_a_person_seller_sees_its_own_cost_and_the_board_but_no_budget() -> None:
    person, shown, record = play(0, SELL + "\n")
    sc = record.scenario
    assert record.seller == "human:ann" and record.result.turns[3].text == SELL.rstrip("\n")
    assert shown[0].startswith("You are the seller") and format_price(sc.costs[0]) in shown[0]
    assert "--- Turn 1 ---" in shown[1] and "Standing offers" in shown[1]
    for values in sc.valuations:
        assert all(format_price(v) not in "".join(shown) for v in values)
    # One move typed, then the input ended: the person quit at turn 2.
    assert person.input_ended and record.result.termination == "seller_quit"
    assert record.result.seller_turns == 2


def test_a_person_buyer_sees_its_budget_is_asked_again_with_the_reason_and_never_the_cost():
    wrong = "Thought: low\nTalk: Hi.\nAction: [BUY] $0.01\n\n"
    person, shown, record = play(1, wrong + wrong, index=5)
    sc = record.scenario
    assert format_price(sc.valuations[0][0]) in shown[0]
    assert format_price(sc.costs[0]) not in "".join(shown)
    for values in sc.valuations[1:]:
        assert all(format_price(v) not in "".join(shown) for v in values)
    # The regulated opening is refused; the person is asked again, told why.
    assert "Your previous reply was rejected" in shown[2]
    rejected = [t for t in record.result.turns if t.agent == "buyer_1" and not t.valid]
    assert rejected and rejected[0].reason and rejected[0].reason in shown[2]
    assert record.buyers[0] == "human:ann" and person.input_ended


def test_the_view_shown_is_the_llm_observation_of_the_seat() -> None:
    scenario = make_scenario(CONFIG, load_catalog(), 0, 3)
    shown: list[str] = []
    person = HumanAgent("human:ann", lambda: SELL, shown.append)
    episode = Episode(CONFIG, scenario, [person, *(make_agent("scripted:time", "buyer")
                                                   for _ in range(3))])  # fmt: skip
    view = None
    while episode.current != "seller":
        episode.market.step(episode.responder(episode.current).act(episode.market.view()))
    view = episode.market.view()
    person.act(view)
    assert shown[-1] == observation(view)
