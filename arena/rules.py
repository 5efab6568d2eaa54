"""The market's rules as small pure functions (paper Sections 3.1 and 3.2).

Each function answers one question about a proposed message or about the state; the game core
(:mod:`arena.game`) only sequences them. Violation kinds are stable strings stored with every
episode and counted by the metrics.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

from arena.money import cents
from arena.protocol import BuyerMessage, FormatViolation, Kind, SellerMessage


class Status(str, Enum):
    """Channel status z_i (Section 3.1); ``closed`` marks a buyer that bought (unit demand)."""

    ACTIVE = "active"
    QUIT = "quit"
    CAPPED = "capped"
    CLOSED = "closed"


class Violation(str, Enum):
    """Seller instruction violations (Section 3.2 (i)-(iv)) and the deal-price mismatch."""

    BELOW_COST = "below_cost"  # (i) [SELL] or [DEAL] at M < C
    INACTIVE_TARGET = "inactive_target"  # (ii) target not active
    BAD_TARGET = "bad_target"  # (iii) missing, unparseable or out of range
    FORMAT = "format"  # (iv) output format
    DEAL_MISMATCH = "deal_mismatch"  # [DEAL] $M not equal to the target's standing [BUY]
    BAD_PRODUCT = "bad_product"  # multi-product: product out of range
    SOLD_OUT = "sold_out"  # multi-product: product without stock
    BUYER = "buyer"  # a penalised buyer violation (bilateral preset)


class BuyerError(str, Enum):
    """Why a buyer reply is intercepted (re-sampled, or penalised in the bilateral preset)."""

    FORMAT = "format"
    OVER_BUDGET = "over_budget"  # [BUY] M' > B_i (Section 3.1)
    DEAL_OVER_BUDGET = "deal_over_budget"  # [DEAL] on a seller price above the budget
    NOTHING_TO_ACCEPT = "nothing_to_accept"  # [DEAL] with no [SELL] addressed to this buyer
    DEAL_PRICE_MISMATCH = "deal_price_mismatch"  # [DEAL] $M not equal to the seller's [SELL]
    OPENING_MUST_BID = "opening_must_bid"  # the opening message must be a [BUY]
    UNREGULATED_OPENING = "unregulated_opening"  # opening bid differs from the regulated one
    BAD_PRODUCT = "bad_product"
    SOLD_OUT = "sold_out"


def is_active(status: Status) -> bool:
    """Only active channels are legal targets (Section 3.1)."""
    return status is Status.ACTIVE


def status_after_reply(used: int, cap: int, quit: bool) -> Status:
    """z_i after the buyer's reply: quit on [QUIT], capped when u_i reaches K (Section 3.1)."""
    if quit:
        return Status.QUIT
    if used >= cap:
        return Status.CAPPED
    return Status.ACTIVE


def seller_violation(
    msg: SellerMessage | FormatViolation,
    statuses: Sequence[Status],
    standing_bids: Sequence[dict[int, float]],
    costs: Sequence[float],
    stock: Sequence[int],
) -> tuple[Violation, str] | None:
    """The violation a seller message commits, checked in the order of Section 3.2, or None."""
    if isinstance(msg, FormatViolation):
        kind = Violation.BAD_TARGET if msg.is_target_error else Violation.FORMAT
        return kind, msg.reason
    if msg.kind is Kind.QUIT:
        return None
    if not 0 <= msg.buyer < len(statuses):
        return Violation.BAD_TARGET, "target_out_of_range"
    if not is_active(statuses[msg.buyer]):
        return Violation.INACTIVE_TARGET, f"target_{statuses[msg.buyer].value}"
    multi = len(costs) > 1
    if multi and msg.product is None:
        return Violation.FORMAT, "missing_product"
    product = 0 if msg.product is None else msg.product
    if not 0 <= product < len(costs):
        return Violation.BAD_PRODUCT, "product_out_of_range"
    if stock[product] <= 0:
        return Violation.SOLD_OUT, "product_sold_out"
    assert msg.price is not None
    if cents(msg.price) < cents(costs[product]):
        return Violation.BELOW_COST, f"{msg.kind.value.lower()}_below_cost"
    if msg.kind is Kind.DEAL:
        bid = standing_bids[msg.buyer].get(product)
        if bid is None or cents(bid) != cents(msg.price):
            return Violation.DEAL_MISMATCH, "deal_not_standing_bid"
    return None


def buyer_error(
    msg: BuyerMessage | FormatViolation,
    *,
    opening: bool,
    valuations: Sequence[float],
    seller_offers: dict[int, float],
    regulated_opening: float | None,
    opening_product: int,
    stock: Sequence[int],
) -> tuple[BuyerError, str] | None:
    """Why a buyer reply must be intercepted (Section 3.1 budget rule), or None if it stands."""
    if isinstance(msg, FormatViolation):
        return BuyerError.FORMAT, msg.reason
    if msg.kind is Kind.QUIT and not opening:
        return None
    multi = len(valuations) > 1
    if multi and msg.product is None:
        return BuyerError.FORMAT, "missing_product"
    product = (opening_product if opening else 0) if msg.product is None else msg.product
    if not 0 <= product < len(valuations):
        return BuyerError.BAD_PRODUCT, "product_out_of_range"
    if stock[product] <= 0:
        return BuyerError.SOLD_OUT, "product_sold_out"
    if opening:
        if msg.kind is not Kind.BUY:
            return BuyerError.OPENING_MUST_BID, f"opening_{msg.kind.value.lower()}"
        if regulated_opening is not None and (
            product != opening_product or cents(msg.price or 0.0) != cents(regulated_opening)
        ):
            return BuyerError.UNREGULATED_OPENING, "opening_not_regulated_price"
    if msg.kind is Kind.BUY:
        assert msg.price is not None
        if cents(msg.price) > cents(valuations[product]):
            return BuyerError.OVER_BUDGET, "bid_over_budget"
        return None
    offer = seller_offers.get(product)
    if offer is None:
        return BuyerError.NOTHING_TO_ACCEPT, "no_seller_offer"
    if msg.price is not None and cents(msg.price) != cents(offer):
        return BuyerError.DEAL_PRICE_MISMATCH, "deal_not_seller_price"
    if cents(offer) > cents(valuations[product]):
        return BuyerError.DEAL_OVER_BUDGET, "deal_over_budget"
    return None


def market_over(
    statuses: Sequence[Status], remaining_turns: int, stock: Sequence[int]
) -> str | None:
    """Termination after a completed exchange (Section 3.1 conditions 1, 3 and 4), or None."""
    if max(stock) <= 0:
        return "deal"
    if Status.ACTIVE not in statuses:
        return "market_exhausted"
    if remaining_turns <= 0:
        return "turn_limit"
    return None
