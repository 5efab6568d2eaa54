"""agents.steering: what the protocol fixes (a [DEAL] price, a legal target, the field labels) is
written for the model; every decision stays its own."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agents.backends import backend_from_spec
from agents.backends.base import ChatRequest, SamplingConfig
from agents.llm import check_llm_spec, make_llm_agent
from agents.scripted.buyers import on_ladder
from agents.specs import SpecError
from agents.steering import (
    Steer,
    explore_moves,
    ladder_prices,
    share_cue,
    share_digit,
    share_thought,
    steer_for,
)
from arena.catalog import load_catalog
from arena.config import get_preset
from arena.game import Market
from arena.money import budget_ladder, cents, format_price
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


LEGAL = Steer(((1, "$9.50"),), active=(1, 3))


def test_a_target_just_opened_may_not_name_an_inactive_channel_or_a_second_digit():
    assert LEGAL.banned_digits("Thought: x\nTarget:") == frozenset("0245678 9".replace(" ", ""))
    assert LEGAL.banned_digits("Thought: x\nTarget: buyer ") == LEGAL.banned_digits("Target: ")
    assert LEGAL.banned_digits("Thought: x\nTarget: 3") == frozenset("0123456789")
    assert LEGAL.banned_digits("Thought: x\nTarget: 3\n") == frozenset()  # the line is closed
    assert LEGAL.banned_digits("Thought: I target: 2 maybe") == frozenset()  # not the field
    assert BIDS.banned_digits("Thought: x\nTarget:") == frozenset()  # steer=deal: not guarded


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


def test_the_legal_steer_reads_the_active_channels_off_the_sellers_board():
    config = get_preset("in-distribution")
    market, bids = opened(config)
    list_price = format_price(market.view("seller").products[0].list_price)
    for _ in range(market.view("seller").per_buyer_cap):  # buyer 2's channel reaches its cap
        market.step(f"Thought: x\nTarget: 2\nTalk: no\nAction: [SELL] {list_price}")
        market.step(f"Thought: x\nTalk: hi\nAction: [BUY] {bids[2]}")
    steer = steer_for(market.view("seller"), "legal")
    assert steer is not None and steer.active == (1, 3)
    assert steer_for(market.view("seller"), "deal").active is None
    assert steer_for(market.view("seller"), "none") is None


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


@dataclass(frozen=True)
class NoDigits(Steer):
    """A steer that bans every digit token at every step: the redraw plumbing."""

    def banned_digits(self, reply: str) -> frozenset[str]:
        return frozenset("0123456789")

    def forced_text(self, reply: str) -> str | None:
        return None


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


def test_a_banned_draw_is_drawn_again_without_the_banned_tokens_and_marked_forced(hf) -> None:
    import numpy as np
    import torch

    from agents.backends.hf_decode import RowSampling, cache_arg, decode, prefill
    from agents.steering import token_steer

    tokenizer, model = hf.tokenizer, hf.model
    digits = {tokenizer(d, add_special_tokens=False)["input_ids"][0] for d in "0123456789"}
    # A prompt of digits, so that the untrained model draws digits often.
    ids = tokenizer("7 8 9 1 2 3 4 5 6 0 7 8", add_special_tokens=False)["input_ids"]
    arg = cache_arg(model)

    def run(steer):
        with torch.inference_mode():
            caches, logits = zip(*(prefill(model, ids, [len(ids)], arg) for _ in range(8)),
                                 strict=True)  # fmt: skip
            return decode(model, caches, logits, [RowSampling(1.5, 1.0, 40)] * 8,
                          [np.random.default_rng(s) for s in range(8)], frozenset(), arg,
                          logprobs=True, steer=steer)  # fmt: skip

    plain = run(None)
    guarded = run(token_steer(tokenizer, [None, NoDigits(())] * 4, -1))
    for row in (0, 2, 4, 6):  # unguarded rows: exactly as without a guarded neighbour
        assert guarded.tokens[row] == plain.tokens[row]
        assert not any(guarded.forced[row])
    for row in (1, 3, 5, 7):
        assert not digits & set(guarded.tokens[row][1:])  # the guard acts from the second draw
        redrawn = [p for p, t in enumerate(plain.tokens[row]) if t in digits and p > 0]
        if redrawn:  # the first digit drawn without the guard is where the guard first acts
            first = redrawn[0]
            assert guarded.tokens[row][:first] == plain.tokens[row][:first]
            assert guarded.forced[row][first] and guarded.logprobs[row][first] == 0.0
        assert all(lp == 0.0 for lp, f in zip(guarded.logprobs[row], guarded.forced[row],
                                              strict=True) if f)  # fmt: skip
    assert any(f for row in (1, 3, 5, 7) for f in guarded.forced[row])  # the guard acted


SKELETON = Steer((), fields=("Thought", "Talk", "Action"))


def test_the_protocol_steer_writes_each_lines_label_in_order_then_ends_the_turn():
    assert SKELETON.forced("") == ("Thought:", False)
    assert SKELETON.forced("Thought: cheap\n") == ("Talk:", False)
    assert SKELETON.forced("Thought: cheap\nTalk: hi\n") == ("Action:", False)
    assert SKELETON.forced("Thought: cheap\nTalk: hi\nAction: [BUY] $5.00\n") == ("", True)
    assert SKELETON.forced("Thought: cheap\nTalk: h") is None  # mid-line: the model's
    assert SKELETON.unfinished("Thought: cheap\nTalk: h")  # no Action line yet: may not end
    assert not SKELETON.unfinished("Thought: cheap\nTalk: hi\nAction: [B")
    seller = Steer(((1, "$9.50"),), active=(1,), fields=("Thought", "Target", "Talk", "Action"))
    assert seller.forced("Thought: x\n") == ("Target:", False)
    assert seller.forced("Thought: x\nTarget: 1\nTalk: ok\nAction: [DEAL]") == (" $9.50", True)


def test_the_protocol_steer_writes_a_sellers_target_line_around_a_digit_it_draws_among_active():
    seller = Steer((), active=(1, 3), fields=("Thought", "Target", "Talk", "Action"))
    assert seller.forced("Thought: x\nTarget:") == (" ", False)
    assert seller.choices("Thought: x\nTarget: ") == frozenset("13")
    assert seller.forced("Thought: x\nTarget: ") is None  # the digit is drawn, not written
    assert seller.forced("Thought: x\nTarget: 3") == ("\n", False)
    assert seller.forced("Thought: x\nTarget: 3\n") == ("Talk:", False)
    assert seller.choices("Thought: x\nTarget: 3") == frozenset()
    assert LEGAL.choices("Thought: x\nTarget: ") == frozenset()  # legal: only guarded
    assert LEGAL.forced("Thought: x\nTarget:") is None


@dataclass(frozen=True)
class ShortThought(Steer):
    """The protocol steer with the Thought and Talk lines written for the model (an untrained
    model seldom ends a line): its Target and Action lines are what is decoded."""

    def forced(self, reply: str) -> tuple[str, bool] | None:
        if not reply:
            return "Thought: x\n", False
        return (" hi\n", False) if reply.endswith("Talk:") else super().forced(reply)


def test_the_protocol_steer_opens_the_action_tag_and_leaves_the_move_and_price_to_the_model():
    seller = Steer(((2, "$9.50"),), active=(2,), fields=("Thought", "Target", "Talk", "Action"))
    head = "Thought: x\nTarget: 2\nTalk: hi\n"
    assert seller.forced(head) == ("Action:", False)
    assert seller.forced(head + "Action:") == (" [", False)
    assert seller.choices(head + "Action: [") == frozenset({"SELL", "DEAL", "QUIT"})
    assert seller.forced(head + "Action: [SELL") == ("]", False)
    assert seller.forced(head + "Action: [SELL]") == (" $", False)
    assert seller.forced(head + "Action: [SELL] $") is None  # the price is the model's
    assert seller.forced(head + "Action: [DEAL]") == (" $9.50", True)  # at the standing bid
    assert seller.forced(head + "Action: [QUIT") == ("]", True)
    buyer = Steer((), fields=("Thought", "Talk", "Action"))
    assert buyer.choices("Thought: x\nTalk: hi\nAction: [") == frozenset({"BUY", "DEAL", "QUIT"})
    assert buyer.forced("Thought: x\nTalk: hi\nAction: [BUY]") == (" $", False)
    assert buyer.forced("Thought: x\nTalk: hi\nAction: [DEAL]") is None  # no offer stands
    offered = Steer(((1, "$12.00"),), fields=("Thought", "Talk", "Action"))
    assert offered.forced("Thought: x\nTalk: hi\nAction: [DEAL]") == (" $12.00", True)
    assert offered.forced("Thought: x\nTalk: hi\nAction: [BUY]") == (" $", False)  # its own


def test_a_sellers_protocol_replies_always_target_an_active_channel(hf) -> None:
    # An untrained model under the protocol steer: every reply's Target is one active digit.
    bids = ((2, "$9.50"), (3, "$8.00"))
    seller = ShortThought(bids, active=(2, 3), fields=("Thought", "Target", "Talk", "Action"))
    sampling = SamplingConfig(temperature=1.5, max_tokens=32, seed=0)
    requests = [ChatRequest((("user", f"Offer {seed}"),),
                            dataclasses.replace(sampling, seed=seed), steer=seller)
                for seed in range(8)]  # fmt: skip
    replies = hf.generate(requests)
    targets = [r.text.split("\n")[1] for r in replies]
    assert all(t in ("Target: 2", "Target: 3") for t in targets), targets
    assert all(r.text.split("\n")[2].startswith("Talk:") for r in replies)
    actions = [reply.text.split("\n")[3] for reply in replies]
    # A tag among the seller's, then its price's " $" (a DEAL's at its target's bid), or [QUIT].
    moves = r"Action: \[(SELL\] \$|DEAL\] \$(9\.50|8\.00)$|QUIT\]$)"
    assert all(re.match(moves, a) for a in actions), actions
    assert len({a[:12] for a in actions}) > 1  # the move is drawn, not written


def test_a_buyer_is_steered_by_the_protocol_steer_only():
    config = get_preset("in-distribution")
    market = Market(config, make_scenario(config, load_catalog(), 5, 0))
    view = market.view(market.current)  # a buyer's opening, regulated in this market
    opening = format_price(view.regulated_opening)
    steer = Steer((), fields=("Thought", "Talk", "Action"), opening=opening)
    assert steer_for(view, "protocol") == steer
    assert steer_for(view, "legal") is None and steer_for(view, "deal") is None


def test_a_regulated_opening_is_written_whole_and_the_market_takes_it():
    config = get_preset("in-distribution")
    market = Market(config, make_scenario(config, load_catalog(), 5, 0))
    buyer = market.current
    view = market.view(buyer)
    steer = steer_for(view, "protocol")
    reply = "Thought: open low\nTalk: I can pay $0.50.\nAction:"  # what it would have bid is moot
    written, ends = steer.forced(reply)
    assert (written, ends) == (f" [BUY] {format_price(view.regulated_opening)}", True)
    market.step(reply + written)
    assert market.view(buyer).bids == {0: view.regulated_opening}  # accepted, not re-sampled
    # After the opening the Action line is the model's again; in a free market, from the start.
    assert steer_for(view._replace(opening=False), "protocol").opening is None
    free = get_preset("bilateral")
    bilateral = Market(free, make_scenario(free, load_catalog(), 5, 0))
    assert steer_for(bilateral.view(bilateral.current), "protocol").opening is None


def test_a_buyers_deal_is_written_at_the_sellers_standing_offer():
    config = get_preset("bilateral")
    market = Market(config, make_scenario(config, load_catalog(), 5, 0))
    buyer = market.current
    offer = format_price(round(market.view(buyer).budget * 0.9, 2))  # within its budget
    market.step("Thought: x\nTalk: hi\nAction: [BUY] $1.00")  # the opening bid
    market.step(f"Thought: x\nTarget: 1\nTalk: no\nAction: [SELL] {offer}")
    view = market.view(buyer)
    assert market.current == buyer and format_price(view.offer) == offer
    steer = steer_for(view, "protocol")
    assert steer == Steer(((1, offer),), fields=("Thought", "Talk", "Action"))
    reply = "Thought: fine\nTalk: ok\nAction: [DEAL]"
    done = reply + steer.forced(reply)[0]
    market.step(done)  # accepted: no violation, the deal at the offer
    result = market.result()
    assert result.outcome == "deal" and format_price(result.deal.price) == offer


def test_replies_decoded_under_the_protocol_steer_open_every_line_with_its_label(hf) -> None:
    sampling = SamplingConfig(temperature=1.0, max_tokens=48, seed=0)
    requests = [ChatRequest((("user", f"Offer {seed}"),),
                            dataclasses.replace(sampling, seed=seed), steer=SKELETON)
                for seed in range(8)]  # fmt: skip
    replies = hf.generate(requests)
    labels = ("Thought:", "Talk:", "Action:")
    for reply in replies:
        lines = reply.text.split("\n")
        assert len(lines) <= len(labels)
        # A reply ends early only at its token limit, never by an end token before Action.
        assert len(lines) == len(labels) or reply.tokens_out == sampling.max_tokens
        assert all(line.startswith(label) for line, label in zip(lines, labels, strict=False))
    assert any(len(r.text.split("\n")) > 1 for r in replies)  # a newline was drawn somewhere


RUNGS = Steer((), fields=("Thought", "Talk", "Action"), prices=("43.47", "39.12", "34.77", "4.34"),
              budget="43.47")  # fmt: skip
BID = "Thought: x\nTalk: hi\nAction: [BUY] $"


def test_the_ladder_steer_holds_a_buyers_bid_to_its_rungs_character_by_character():
    assert RUNGS.forced(BID[:-2]) == (" $", False)  # as under protocol
    assert RUNGS.choices(BID) == frozenset({"4", "3"})
    assert RUNGS.choices(BID + "4") == frozenset({"3", "."})  # 43.47 or 4.34
    assert RUNGS.choices(BID + "4.") == frozenset({"3"})
    assert RUNGS.choices(BID + "39.1") == frozenset({"2"})
    assert RUNGS.forced(BID + "39.1") is None  # the model draws the last digit too
    assert RUNGS.forced(BID + "39.12") == ("", True)  # a rung written in full ends the turn
    assert RUNGS.choices(BID + "5") == frozenset()  # off the ladder (a forced redraw prevents it)
    assert RUNGS.choices("Thought: x\nTalk: hi\nAction: [") == frozenset({"BUY", "DEAL", "QUIT"})
    assert RUNGS.forced("Thought: x\nTalk: hi\nAction: [QUIT") == ("]", True)


def test_the_ladder_steer_reads_a_buyers_rungs_and_budget_off_its_view_and_needs_a_ladder():
    config = get_preset("bilateral")
    market = Market(config, make_scenario(config, load_catalog(), 5, 0))
    view = market.view(market.current)
    prices = ladder_prices(view.budget, 3)
    # Exactly the prices the scripted ladder buyers (the warm start's teachers) bid on.
    every_cent = range(1, cents(view.budget) + 1)
    scripted = {on_ladder(c / 100, view.budget, 3) for c in every_cent}
    assert len(prices) == 4 and set(prices) == {format_price(p)[1:] for p in scripted}
    assert steer_for(view, "ladder", 3) == Steer((), fields=("Thought", "Talk", "Action"),
                                                 prices=prices, budget=prices[0])  # fmt: skip
    assert steer_for(view, "protocol", 3).prices == ()  # the ladder in the prompt only
    with pytest.raises(ValueError, match="set ladder=N too"):
        steer_for(view, "ladder")
    market.step(f"Thought: x\nTalk: hi\nAction: [BUY] ${prices[-1]}")  # a seller's board:
    seller = market.view("seller")  # the ladder steer is the protocol steer there
    assert steer_for(seller, "ladder", 3) == steer_for(seller, "protocol")


def test_an_llm_spec_with_the_ladder_steer_but_no_ladder_is_refused_naming_both(
    tiny_model_dir: Path,
):
    with pytest.raises(SpecError, match=r"steer=ladder .* set ladder=N"):
        check_llm_spec(f"hf:{tiny_model_dir}?steer=ladder", "buyer")
    assert check_llm_spec(f"hf:{tiny_model_dir}?steer=ladder&ladder=9", "buyer").params["ladder"]


@dataclass(frozen=True)
class ShortBid(ShortThought):
    """ShortThought whose move is a ``[BUY]``: its price is what is decoded."""

    def forced(self, reply: str) -> tuple[str, bool] | None:
        return (" [BUY]", False) if reply.endswith("Action:") else super().forced(reply)


def test_replies_decoded_under_the_ladder_steer_bid_only_on_its_rungs(hf) -> None:
    steer = ShortBid((), fields=("Thought", "Talk", "Action"), prices=ladder_prices(43.47, 9))
    sampling = SamplingConfig(temperature=1.0, max_tokens=24, seed=0)
    requests = [ChatRequest((("user", f"Offer {seed}"),),
                            dataclasses.replace(sampling, seed=seed), steer=steer)
                for seed in range(16)]  # fmt: skip
    bids = []
    for reply in hf.generate(requests):
        action = reply.text.split("\n")[-1]
        if action.startswith("Action: [BUY] $") and reply.tokens_out < sampling.max_tokens:
            bids.append(action.removeprefix("Action: [BUY] $"))
    assert len(bids) == len(requests)  # each reply ends on its rung, within its tokens
    assert set(bids) <= set(steer.prices)  # every bid a rung or the budget, and nothing after
    assert len(set(bids)) > 1  # which rung is drawn, not written


SHARES = Steer((), fields=("Thought", "Talk", "Action"), shares=(("9", "39.12"), ("8", "34.77")),
               budget="43.47")  # fmt: skip


def test_the_share_steer_draws_one_digit_and_writes_the_rest_of_the_move_from_it():
    assert SHARES.forced("") == ("Thought:", False)
    assert SHARES.forced("Thought:") == (" Offer ", False)
    assert SHARES.choices("Thought: Offer ") == frozenset({"0", "8", "9"})  # the rungs, or none
    assert SHARES.forced("Thought: Offer 8") == ("0% of my budget.\n", False)
    assert SHARES.forced("Thought: Offer 0") == ("% of my budget.\n", False)
    head = "Thought: Offer 80% of my budget.\n"
    assert SHARES.forced(head) == ("Talk:", False)
    assert SHARES.forced(head + "Talk: hi") is None  # the words are the model's
    assert SHARES.forced(head + "Talk: hi\nAction:") == (" [BUY] $34.77", True)  # 80%
    none = "Thought: Offer 0% of my budget.\nTalk: hi\nAction:"
    assert SHARES.forced(none) == (" [", False)
    assert SHARES.choices(none + " [") == frozenset({"QUIT"})  # no offer stands: nothing to take
    offer = dataclasses.replace(SHARES, bids=((1, "$41.00"),))
    assert offer.choices(none + " [") == frozenset({"DEAL", "QUIT"})  # never a BUY off its share
    assert offer.forced(none + " [DEAL]") == (" $41.00", True)


def test_the_share_steers_forced_thought_is_the_text_the_warm_start_fits():
    # The steer writes the Thought in pieces around the drawn digit; the warm start writes it
    # whole (agents.finetune.share_thought): the two must be the same text, digit by digit.
    for digit in "0123456789":
        reply, (opened, _) = "Thought:", SHARES.forced("Thought:")
        reply += opened + digit
        tail, ends = SHARES.forced(reply)
        assert not ends and reply + tail == f"Thought: {share_thought(digit)}\n"
        assert Steer.share(reply + tail) == digit


def test_a_cued_share_steer_writes_the_cue_before_the_digit_and_the_warm_starts_text():
    cued = dataclasses.replace(SHARES, cue="They came down. ")
    assert cued.forced("Thought:") == (" They came down. Offer ", False)
    assert cued.choices("Thought: They came down. Offer ") == frozenset({"0", "8", "9"})
    assert cued.choices("Thought: Offer ") == frozenset()  # not the cued line
    for digit in "0123456789":
        reply = "Thought: They came down. Offer " + digit
        tail, ends = cued.forced(reply)
        assert not ends and reply + tail == f"Thought: {share_thought(digit, cued.cue)}\n"
        assert Steer.share(reply + tail) == digit
    head = "Thought: They came down. Offer 80% of my budget.\nTalk: hi\nAction:"
    assert cued.forced(head) == (" [BUY] $34.77", True)


def test_the_share_cue_tells_an_offer_at_list_from_one_below_it():
    config = get_preset("in-distribution")
    market = Market(config, make_scenario(config, load_catalog(), 5, 0))
    view = market.view(market.current)._replace(opening=False)
    list_price = view.products[0].list_price
    at_list = view._replace(offers={0: list_price})
    below = view._replace(offers={0: list_price - 0.01})
    assert share_cue(view._replace(offers={})) == ""  # nothing stands: nothing to read
    assert share_cue(at_list) == "They hold list. "
    assert share_cue(below) == "They came down. "  # a cent below list is a concession
    assert steer_for(below, "share", 9, cue=True).cue == "They came down. "
    assert steer_for(below, "share", 9).cue == ""  # off unless asked for
    assert steer_for(view._replace(opening=True), "share", 9, cue=True).cue == ""  # regulated


def test_a_bids_share_digit_is_its_nearest_tenth_of_the_budget_held_to_the_ladder():
    assert share_digit(70.0, 100.0, 9) == "7"
    assert share_digit(64.9, 100.0, 9) == "6" and share_digit(65.1, 100.0, 9) == "7"
    assert share_digit(100.0, 100.0, 9) == "9"  # the whole budget: the top rung
    assert share_digit(5.0, 100.0, 9) == "1"  # below the ladder: its lowest rung
    assert share_digit(5.0, 100.0, 3) == "7"  # three rungs: 90%, 80%, 70%
    assert share_digit(5.0, 0.0, 9) == "9"


def test_the_share_steer_reads_the_rungs_off_the_buyers_view_after_a_regulated_opening():
    config = get_preset("in-distribution")
    market = Market(config, make_scenario(config, load_catalog(), 5, 0))
    view = market.view(market.current)
    assert steer_for(view, "share", 9).shares == ()  # the regulated opening has no choice
    later = steer_for(view._replace(opening=False), "share", 3)
    budget = view.valuations[0]
    assert [d for d, _ in later.shares] == ["9", "8", "7"]
    assert [p for _, p in later.shares] == [format_price(p)[1:] for p in budget_ladder(budget, 3)]
    with pytest.raises(ValueError, match="steer=share holds a buyer's bids to its ladder"):
        steer_for(view, "share")


@dataclass(frozen=True)
class ShortTalk(Steer):
    """A steer with the Talk line written for the model (an untrained model seldom ends it)."""

    def forced(self, reply: str) -> tuple[str, bool] | None:
        return (" hi\n", False) if reply.endswith("Talk:") else super().forced(reply)


def test_replies_decoded_under_the_share_steer_are_moves_the_market_takes(hf) -> None:
    config = get_preset("bilateral")
    market = Market(config, make_scenario(config, load_catalog(), 5, 0))
    view = market.view(market.current)  # a free opening: the share steer applies
    steer = ShortTalk(**vars(steer_for(view, "share", 9)))
    sampling = SamplingConfig(temperature=1.0, max_tokens=64, seed=0)
    requests = [ChatRequest((("user", f"Offer {seed}"),),
                            dataclasses.replace(sampling, seed=seed), steer=steer)
                for seed in range(12)]  # fmt: skip
    digits = set()
    for reply in hf.generate(requests):
        digit = Steer.share(reply.text)
        digits.add(digit)
        action = reply.text.split("\n")[-1]
        expected = dict(steer.shares).get(digit)
        assert action == (f"Action: [BUY] ${expected}" if expected else "Action: [QUIT]")
        copy = Market(config, make_scenario(config, load_catalog(), 5, 0))
        buyer = copy.current
        copy.step(reply.text)  # a legal move, every time: the bid stands, or the buyer left
        if expected:
            assert format_price(copy.view(buyer).bids[0]) == f"${expected}"
        else:
            assert copy.done and copy.result().violation is None
    assert len(digits) > 1 and "0" not in digits  # drawn among the rungs: an opening must bid


def test_an_exploring_start_holds_the_tag_and_each_digit_to_its_move_as_the_policys_draws():
    held = dataclasses.replace(RUNGS, explore="39.12")
    assert held.choices("Thought: x\nTalk: hi\nAction: [") == frozenset({"BUY"})
    assert held.choices(BID) == frozenset({"3"})  # not 4: one rung, digit by digit
    assert held.choices(BID + "39.") == frozenset({"1"})
    assert held.forced(BID + "39.12") == ("", True)
    assert held.exploring(BID + "39") and held.exploring("Thought: x\nTalk: hi\nAction: [")
    assert not held.exploring("Thought: x\nTalk: hi\nAction:")  # " [" is written, not explored
    assert not held.exploring("Thought: x")  # the Thought and Talk stay free
    assert not RUNGS.exploring(BID)  # a plain ladder steer explores nothing
    taking = Steer(((1, "$50.00"),), fields=("Thought", "Talk", "Action"), prices=RUNGS.prices,
                   explore="DEAL")  # fmt: skip
    assert taking.choices("Thought: x\nTalk: hi\nAction: [") == frozenset({"DEAL"})
    assert taking.forced("Thought: x\nTalk: hi\nAction: [DEAL]") == (" $50.00", True)


def test_an_exploring_start_may_bid_each_rung_below_the_budget_or_take_an_affordable_offer():
    rungs = RUNGS.prices[1:]  # 43.47 is the budget: a deal there pays nothing
    assert explore_moves(RUNGS) == rungs  # no offer stands: no DEAL
    standing = dataclasses.replace(RUNGS, bids=((1, "$40.00"),))
    assert explore_moves(standing) == (*rungs, "DEAL")
    assert explore_moves(dataclasses.replace(standing, bids=((1, "$1,043.47"),))) == rungs
    assert explore_moves(dataclasses.replace(standing, opening="$20.00")) == ()  # regulated
    assert explore_moves(Steer((), fields=("Thought", "Talk", "Action"))) == ()  # protocol
    assert explore_moves(None) == ()


def test_a_share_buyers_exploring_start_holds_its_share_digit_or_a_0_then_the_deal():
    assert explore_moves(SHARES) == ("9", "8")  # each rung's digit; no offer stands: no DEAL
    offer = dataclasses.replace(SHARES, bids=((1, "$41.00"),))
    assert explore_moves(offer) == ("9", "8", "DEAL")
    assert explore_moves(dataclasses.replace(offer, bids=((1, "$43.47"),))) == ("9", "8")
    cued = dataclasses.replace(offer, cue="They hold list. ")
    line = "Thought: They hold list. Offer "
    held = dataclasses.replace(cued, explore="8")
    assert held.choices(line) == frozenset({"8"}) and held.exploring(line)
    assert held.forced(line + "8") == ("0% of my budget.\n", False)  # the rest is written
    assert not held.exploring(line + "8") and not held.exploring("Thought:")
    assert held.forced("Thought: They hold list. Offer 80% of my budget.\nTalk: hi\nAction:") == (
        " [BUY] $34.77", True)  # fmt: skip
    taking = dataclasses.replace(cued, explore="DEAL")
    assert taking.choices(line) == frozenset({"0"}) and taking.exploring(line)
    none = "Thought: They hold list. Offer 0% of my budget.\nTalk: hi\nAction:"
    assert taking.forced(none) == (" [", False)
    assert taking.choices(none + " [") == frozenset({"DEAL"}) and taking.exploring(none + " [")
    assert offer.choices(none + " [") == frozenset({"DEAL", "QUIT"})  # unheld: either
    assert not cued.exploring(line)  # a plain share steer explores nothing


def test_a_laddered_buyers_steer_knows_its_budget_but_not_at_a_regulated_opening():
    config = get_preset("in-distribution")
    market = Market(config, make_scenario(config, load_catalog(), 5, 0))
    view = market.view(market.current)
    budget = format_price(view.valuations[0])[1:]
    free = view._replace(opening=False)
    for steer in ("ladder", "share"):
        assert steer_for(free, steer, 9).budget == budget
        assert steer_for(view, steer, 9).budget == ""  # the regulator writes the bid
        assert explore_moves(steer_for(view, steer, 9)) == ()
    assert len(explore_moves(steer_for(free, "share", 9))) == 9  # 90% down to 10%
    assert steer_for(free, "protocol").budget == ""
