"""The market rules as pure functions (paper Sections 3.1 and 3.2)."""

from __future__ import annotations

import pytest

from arena.protocol import BuyerMessage, FormatViolation, Kind, SellerMessage
from arena.rules import (
    BuyerError,
    Status,
    Violation,
    buyer_error,
    is_active,
    market_over,
    seller_violation,
    status_after_reply,
)

ACTIVE3 = [Status.ACTIVE] * 3
COST = (18.75,)
STOCK = (1,)


def sell(buyer: int, price: float | None, kind: Kind = Kind.SELL, product: int | None = None):
    return SellerMessage("t", buyer, "x", kind, price, product)


def bid(kind: Kind, price: float | None = None, product: int | None = None) -> BuyerMessage:
    return BuyerMessage("t", "x", kind, price, product)


def check_seller(msg, statuses=ACTIVE3, bids=None, costs=COST, stock=STOCK):
    bids = bids if bids is not None else [{0: 10.0}, {0: 20.0}, {0: 30.0}]
    return seller_violation(msg, statuses, bids, costs, stock)


def check_buyer(
    msg,
    opening=False,
    valuations=(27.83,),
    offers=None,
    regulated=None,
    opening_product=0,
    stock=STOCK,
):
    return buyer_error(
        msg,
        opening=opening,
        valuations=valuations,
        seller_offers={0: 30.0} if offers is None else offers,
        regulated_opening=regulated,
        opening_product=opening_product,
        stock=stock,
    )


# --- channel status -----------------------------------------------------------------------------


def test_only_active_channels_are_legal_targets():
    assert is_active(Status.ACTIVE)
    assert not any(is_active(s) for s in (Status.QUIT, Status.CAPPED, Status.CLOSED))


@pytest.mark.parametrize(
    ("used", "cap", "quit", "status"),
    [
        (1, 3, False, Status.ACTIVE),
        (2, 3, False, Status.ACTIVE),
        (3, 3, False, Status.CAPPED),
        (1, 3, True, Status.QUIT),
        (3, 3, True, Status.QUIT),
    ],
)
def test_status_after_reply_is_quit_on_quit_and_capped_when_u_reaches_k(used, cap, quit, status):
    assert status_after_reply(used, cap, quit) is status


# --- seller violations --------------------------------------------------------------------------


def test_valid_seller_messages_commit_no_violation():
    assert check_seller(sell(0, 34.99)) is None
    assert check_seller(sell(0, 18.75)) is None  # exactly at cost is allowed
    assert check_seller(sell(2, 30.0, Kind.DEAL)) is None


@pytest.mark.parametrize("kind", [Kind.SELL, Kind.DEAL])
def test_one_cent_below_cost_is_violation_i(kind: Kind):
    bids = [{0: 18.74}] * 3
    found = check_seller(sell(0, 18.74, kind), bids=bids)
    assert found == (Violation.BELOW_COST, f"{kind.value.lower()}_below_cost")


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (Status.QUIT, "target_quit"),
        (Status.CAPPED, "target_capped"),
        (Status.CLOSED, "target_closed"),
    ],
)
def test_targeting_an_inactive_buyer_is_violation_ii(status: Status, reason: str):
    statuses = [Status.ACTIVE, status, Status.ACTIVE]
    assert check_seller(sell(1, 30.0), statuses=statuses) == (Violation.INACTIVE_TARGET, reason)
    assert check_seller(sell(1, 20.0, Kind.DEAL), statuses=statuses)[0] is Violation.INACTIVE_TARGET


@pytest.mark.parametrize("buyer", [-1, 3, 99])
def test_out_of_range_target_is_violation_iii(buyer: int):
    assert check_seller(sell(buyer, 30.0)) == (Violation.BAD_TARGET, "target_out_of_range")


@pytest.mark.parametrize("reason", ["missing_target", "non_integer_target", "duplicate_target"])
def test_unparseable_target_is_violation_iii(reason: str):
    assert check_seller(FormatViolation(reason)) == (Violation.BAD_TARGET, reason)


@pytest.mark.parametrize("reason", ["missing_talk", "multiple_actions", "bad_price"])
def test_other_parse_failures_are_format_violation_iv(reason: str):
    assert check_seller(FormatViolation(reason)) == (Violation.FORMAT, reason)


def test_deal_must_equal_the_standing_bid_to_the_cent():
    bids = [{0: 25.00}] * 3
    assert check_seller(sell(0, 25.00, Kind.DEAL), bids=bids) is None
    for price in (25.01, 24.99, 34.99):
        found = check_seller(sell(0, price, Kind.DEAL), bids=bids)
        assert found == (Violation.DEAL_MISMATCH, "deal_not_standing_bid")


def test_deal_without_any_standing_bid_is_a_mismatch():
    found = check_seller(sell(0, 25.0, Kind.DEAL), bids=[{}, {}, {}])
    assert found == (Violation.DEAL_MISMATCH, "deal_not_standing_bid")


def test_below_cost_deal_is_reported_as_below_cost_even_if_it_matches_the_bid():
    found = check_seller(sell(0, 15.0, Kind.DEAL), bids=[{0: 15.0}] * 3)
    assert found == (Violation.BELOW_COST, "deal_below_cost")


def test_quit_is_always_legal_whatever_its_target():
    statuses = [Status.QUIT, Status.CAPPED, Status.QUIT]
    assert check_seller(sell(0, None, Kind.QUIT), statuses=statuses) is None
    assert check_seller(sell(42, None, Kind.QUIT)) is None


def test_multi_product_seller_rules():
    costs, stock = (10.0, 20.0), (1, 0)
    bids = [{0: 12.0, 1: 25.0}] * 3
    assert check_seller(sell(0, 12.0, Kind.DEAL, 0), bids=bids, costs=costs, stock=stock) is None
    assert check_seller(sell(0, 12.0), bids=bids, costs=costs, stock=stock) == (
        Violation.FORMAT,
        "missing_product",
    )
    assert check_seller(sell(0, 30.0, Kind.SELL, 2), bids=bids, costs=costs, stock=stock) == (
        Violation.BAD_PRODUCT,
        "product_out_of_range",
    )
    assert check_seller(sell(0, 30.0, Kind.SELL, 1), bids=bids, costs=costs, stock=stock) == (
        Violation.SOLD_OUT,
        "product_sold_out",
    )
    assert check_seller(sell(0, 9.99, Kind.SELL, 0), bids=bids, costs=costs, stock=stock) == (
        Violation.BELOW_COST,
        "sell_below_cost",
    )


# --- buyer errors -------------------------------------------------------------------------------


def test_bid_at_budget_stands_and_one_cent_over_is_intercepted():
    assert check_buyer(bid(Kind.BUY, 27.83)) is None
    assert check_buyer(bid(Kind.BUY, 27.84)) == (BuyerError.OVER_BUDGET, "bid_over_budget")


def test_deal_on_a_seller_price_above_budget_is_intercepted():
    assert check_buyer(bid(Kind.DEAL), offers={0: 27.84}) == (
        BuyerError.DEAL_OVER_BUDGET,
        "deal_over_budget",
    )
    assert check_buyer(bid(Kind.DEAL), offers={0: 27.83}) is None


def test_deal_with_a_price_must_name_the_seller_price():
    assert check_buyer(bid(Kind.DEAL, 25.00), offers={0: 25.00}) is None
    assert check_buyer(bid(Kind.DEAL, 24.99), offers={0: 25.00}) == (
        BuyerError.DEAL_PRICE_MISMATCH,
        "deal_not_seller_price",
    )


def test_deal_with_nothing_offered_is_intercepted():
    assert check_buyer(bid(Kind.DEAL), offers={}) == (
        BuyerError.NOTHING_TO_ACCEPT,
        "no_seller_offer",
    )


def test_quit_reply_always_stands():
    assert check_buyer(bid(Kind.QUIT), offers={}) is None


def test_format_violation_is_a_buyer_format_error():
    assert check_buyer(FormatViolation("missing_action")) == (BuyerError.FORMAT, "missing_action")


@pytest.mark.parametrize(
    ("kind", "reason"), [(Kind.DEAL, "opening_deal"), (Kind.QUIT, "opening_quit")]
)
def test_opening_must_be_a_bid(kind: Kind, reason: str):
    found = check_buyer(bid(kind), opening=True, offers={})
    assert found == (BuyerError.OPENING_MUST_BID, reason)


def test_regulated_opening_must_be_the_regulated_price():
    assert check_buyer(bid(Kind.BUY, 9.95), opening=True, offers={}, regulated=9.95) is None
    assert check_buyer(bid(Kind.BUY, 9.96), opening=True, offers={}, regulated=9.95) == (
        BuyerError.UNREGULATED_OPENING,
        "opening_not_regulated_price",
    )


def test_unregulated_opening_is_any_bid_within_budget():
    assert check_buyer(bid(Kind.BUY, 0.0), opening=True, offers={}) is None
    assert check_buyer(bid(Kind.BUY, 27.84), opening=True, offers={})[0] is BuyerError.OVER_BUDGET


def test_multi_product_buyer_rules():
    vals, stock = (20.0, 30.0), (1, 0)
    kw = {"valuations": vals, "stock": stock}
    assert check_buyer(bid(Kind.BUY, 5.0), **kw)[0] is BuyerError.FORMAT
    assert check_buyer(bid(Kind.BUY, 5.0, 0), **kw) is None
    assert check_buyer(bid(Kind.BUY, 5.0, 2), **kw)[0] is BuyerError.BAD_PRODUCT
    assert check_buyer(bid(Kind.BUY, 5.0, 1), **kw)[0] is BuyerError.SOLD_OUT
    assert check_buyer(bid(Kind.DEAL, None, 0), offers={1: 3.0}, **kw)[0] is (
        BuyerError.NOTHING_TO_ACCEPT
    )
    opening = {"opening": True, "offers": {}, "regulated": 6.0, "opening_product": 0}
    assert check_buyer(bid(Kind.BUY, 6.0), **kw, **opening)[0] is BuyerError.FORMAT
    assert check_buyer(bid(Kind.BUY, 6.0, 0), **kw, **opening) is None


# --- termination --------------------------------------------------------------------------------


def test_market_over_checks_deal_then_exhaustion_then_turn_limit():
    active = [Status.ACTIVE, Status.QUIT]
    dead = [Status.QUIT, Status.CAPPED]
    assert market_over(active, 3, (1,)) is None
    assert market_over(active, 3, (0,)) == "deal"
    assert market_over(dead, 3, (1,)) == "market_exhausted"
    assert market_over(active, 0, (1,)) == "turn_limit"
    assert market_over(dead, 0, (0,)) == "deal"
    assert market_over(dead, 0, (1,)) == "market_exhausted"


def test_market_with_stock_left_is_not_over_after_one_sale():
    assert market_over([Status.CLOSED, Status.ACTIVE], 3, (0, 1)) is None
    assert market_over([Status.CLOSED, Status.ACTIVE], 3, (0, 0)) == "deal"
