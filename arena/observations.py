"""Text observations: what an LLM reads each turn, rendered from the structured views.

The seller's text carries the new buyer messages and the standing-offers board (paper Section
11.2): per buyer its status, remaining capacity, its [BUY]/[DEAL]/[QUIT] history and the
seller's prior actions toward it, then the global remaining messages and a cost-floor reminder.
A buyer's text carries only its own channel: the seller's Talk and Action addressed to it, never
a Thought, a Target, the cost or anything about another buyer (sealed channels, Section 3.1).
"""

from __future__ import annotations

from arena.game import BuyerView, SellerView
from arena.money import format_price
from arena.records import Event


def _action(event: Event) -> str:
    text = (
        f"[{event.kind}]" if event.price is None else f"[{event.kind}] {format_price(event.price)}"
    )
    return text if event.product is None else f"{text} on product {event.product + 1}"


def standing_offers_board(view: SellerView) -> str:
    """The === Standing offers === block appended to every seller turn (Section 11.2)."""
    lines = ["=== Standing offers ==="]
    for i, channel in enumerate(view.channels):
        buyer_moves = ", ".join(_action(e) for e in channel.events if e.speaker == "buyer")
        seller_moves = ", ".join(_action(e) for e in channel.events if e.speaker == "seller")
        lines.append(
            f"Buyer {i + 1}: status={channel.status.value}, remaining capacity="
            f"{channel.remaining}/{view.per_buyer_cap}; buyer actions: {buyer_moves or 'none'}; "
            f"your actions: {seller_moves or 'none'}"
        )
    lines.append(f"Remaining seller messages: {view.remaining_turns}")
    if len(view.products) == 1:
        lines.append(
            f"Reminder: never [SELL] or [DEAL] below your cost {format_price(view.costs[0])}."
        )
    else:
        floors = ", ".join(
            f"product {p + 1}: {format_price(c)} (stock {view.stock[p]})"
            for p, c in enumerate(view.costs)
        )
        lines.append(f"Reminder: never [SELL] or [DEAL] below cost. Costs: {floors}.")
    return "\n".join(lines)


def seller_text(view: SellerView) -> str:
    """The seller's per-turn message: new buyer messages, then the board, then the ask."""
    parts = [f"--- Turn {view.turn} ---"]
    for i, event in view.new_events:
        parts.append(f"Buyer {i + 1} says: {event.talk}\nBuyer {i + 1} action: {_action(event)}")
    parts.append(standing_offers_board(view))
    active = ", ".join(str(i + 1) for i in view.active) or "none"
    parts.append(f"Active buyers you may target: {active}. Reply in the required format.")
    return "\n\n".join(parts)


def buyer_text(view: BuyerView) -> str:
    """Buyer ``view.buyer``'s per-turn message: only what the seller addressed to it."""
    if view.opening:
        head = "The negotiation starts. Make your opening offer with [BUY]."
        if view.regulated_opening is not None:
            head += f" Your opening offer must be exactly {format_price(view.regulated_opening)}."
    else:
        seller_events = [e for e in view.events if e.speaker == "seller"]
        last = seller_events[-1] if seller_events else None
        head = (
            f"Seller says: {last.talk}\nSeller action: {_action(last)}"
            if last is not None
            else "Waiting for the seller."
        )
        used = len(seller_events)
        head += f"\n(The seller has used {used} of at most {view.max_rounds} messages with you.)"
    if view.rejected:
        head += (
            f"\n\nYour previous reply was rejected ({view.rejected}). Stay within your budget, "
            "follow the format, and reply again."
        )
    return head
