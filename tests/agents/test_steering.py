"""agents.steering: a [DEAL] is written at the standing bid it takes; nothing else is touched."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agents.backends import backend_from_spec
from agents.backends.base import ChatRequest, SamplingConfig
from agents.llm import check_llm_spec, make_llm_agent
from agents.specs import SpecError
from agents.steering import Steer, steer_for
from arena.catalog import load_catalog
from arena.config import get_preset
from arena.game import Market
from arena.money import format_price
from arena.protocol import parse_seller
from arena.scenarios import make_scenario

BIDS = Steer(((1, "$9.50"), (2, "$1,234.56")))
HEAD = "Thought: take it\nTarget: 2\nTalk: Deal.\nAction: [DEAL]"


def test_a_deal_just_written_is_completed_at_the_targets_standing_bid():
    assert BIDS.forced_text(HEAD) == " $1,234.56"
    assert BIDS.forced_text(HEAD + " $1,2") == "34.56"  # a prefix of the bid: the rest of it
    assert parse_seller(HEAD + BIDS.forced_text(HEAD)).price == 1234.56


def test_anything_but_a_deal_at_a_bid_is_left_to_the_model():
    assert BIDS.forced_text(HEAD + " $7") is None  # another price already begun
    assert BIDS.forced_text(HEAD.replace("Target: 2", "Target: 3")) is None  # no bid there
    assert BIDS.forced_text(HEAD.replace("Target: 2\n", "")) is None  # no target yet
    assert BIDS.forced_text("Thought: hm\nTarget: 1\nTalk: x\nAction: [SELL]") is None
    assert BIDS.forced_text("Thought: I could [DEAL] later\nTarget: 1") is None


def opened(config):
    """A market whose buyers have sent their (regulated) opening bids: the seller's turn."""
    market = Market(config, make_scenario(config, load_catalog(), 5, 0))
    bids = {}
    while market.current != "seller":
        view = market.view(market.current)
        bids[view.buyer + 1] = format_price(view.regulated_opening)
        market.step(f"Thought: x\nTalk: hi\nAction: [BUY] {bids[view.buyer + 1]}")
    return market, bids


def test_the_steer_reads_the_standing_bids_off_the_sellers_board():
    config = get_preset("in-distribution")
    market, bids = opened(config)
    steer = steer_for(market.view("seller"))
    assert steer is not None and dict(steer.bids) == bids and len(bids) == config.num_buyers
    assert steer_for(market.view("buyer_1")) is None  # buyers are not steered


def test_steering_is_refused_for_back_ends_that_cannot_apply_it(tiny_model_dir: Path):
    assert check_llm_spec(f"hf:{tiny_model_dir}?steer=deal", "seller").params["steer"] == "deal"
    with pytest.raises(SpecError, match="hf back-end only"):
        check_llm_spec("openai:gpt-4o?steer=deal", "seller")
    with pytest.raises(ValueError, match="steer='bid' is unknown"):
        check_llm_spec(f"hf:{tiny_model_dir}?steer=bid", "seller")


def test_an_agent_with_steer_deal_sends_the_boards_bids_with_its_request(tiny_model_dir: Path):
    from agents.base import EpisodeContext

    config = get_preset("in-distribution")
    market, _ = opened(config)
    scenario = market.scenario
    for spec, expected in ((f"hf:{tiny_model_dir}?steer=deal", steer_for(market.view("seller"))),
                           (f"hf:{tiny_model_dir}", None)):  # fmt: skip
        agent = make_llm_agent(spec, "seller")
        agent.reset(EpisodeContext("seller", 0, config, scenario, 1))
        assert agent.request(market.view("seller")).steer == expected


@dataclass(frozen=True)
class AfterFirstToken(Steer):
    """A steer that forces a price after the first sampled token: the decoding plumbing."""

    def forced_text(self, reply: str) -> str | None:
        return " $12.34" if reply else None


@pytest.fixture
def hf(tiny_model_dir: Path) -> Iterator[object]:
    backend = backend_from_spec("hf", str(tiny_model_dir), {"device": "cpu", "batch_size": "4"})
    yield backend
    backend.close()


def test_forced_tokens_end_the_reply_and_leave_unsteered_rows_unchanged(hf) -> None:
    def request(seed: int, steer: Steer | None) -> ChatRequest:
        sampling = SamplingConfig(temperature=1.0, max_tokens=24, seed=seed)
        return ChatRequest((("user", f"Offer {seed}"),), sampling, steer=steer)

    plain = hf.generate([request(s, None) for s in range(4)])
    mixed = hf.generate([request(s, AfterFirstToken(()) if s % 2 else None) for s in range(4)])
    for seed in (0, 2):  # unsteered rows: exactly as without any steered neighbour
        assert (mixed[seed].text, mixed[seed].tokens_out) == (
            plain[seed].text,
            plain[seed].tokens_out,
        )
    for seed in (1, 3):  # one sampled token, the forced price, the end of the turn
        assert mixed[seed].text.endswith(" $12.34")
        assert mixed[seed].text[: -len(" $12.34")] == hf.tokenizer.decode(
            hf.tokenizer(plain[seed].text)["input_ids"][:1]
        )
