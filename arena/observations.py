"""Text observations: what an LLM reads each turn, rendered from the structured views.

The seller's text carries the new buyer messages and the standing-offers board (paper Section
11.2): per buyer its status, remaining capacity, its [BUY]/[DEAL]/[QUIT] history and the
seller's prior actions toward it, then the global remaining messages and a cost-floor reminder.
A buyer's text carries only its own channel: the seller's Talk and Action addressed to it, never
a Thought, a Target, the cost or anything about another buyer (sealed channels, Section 3.1).

Sealed channels are also unforgeable: another party's Talk goes through :func:`quote`, so no line
of an observation comes from another party's text. Every line is written by the environment, and
Actions are rendered from parsed values, never copied. An observation is at most
:data:`MAX_OBSERVATION_CHARS` long.
"""

from __future__ import annotations

from typing import Protocol

from arena.catalog import Product
from arena.money import format_price
from arena.records import Event
from arena.views import BuyerView, ChannelView, SellerView

QUOTE_CHARS = 1_000
"""The most characters of another party's Talk shown in one observation; the rest is cut."""

MAX_OBSERVATION_CHARS = 65_536
"""The declared size of the observation space. Quoting keeps every preset far below it; a market
with so many buyers that its board exceeds it has the middle of the text cut, with a note."""

_NEUTRAL = str.maketrans({'"': "'", "[": "(", "]": ")"})
_CUT_NOTE = "\n(... part of this observation was cut to fit 65,536 characters ...)\n"
_KEPT_TAIL = 400


def quote(talk: str, limit: int = QUOTE_CHARS) -> str:
    """Another party's Talk, safe to show after ``Buyer 2 says:`` or ``Seller says:``.

    Honest talk (one line of printable text, no square brackets or double quotes, at most
    ``limit`` characters) is shown as written. Anything else is shown on one line between double
    quotes: line breaks become `` / ``, runs of whitespace and control or format characters one
    space, ``[ ]`` become ``( )`` and ``"`` becomes ``'``, and past ``limit`` characters it is cut,
    with the talk's full length. No part of it can then start a line (a fake ``Buyer 2 says:``, a
    fake board or ``Seller action:``), read as an ``[ACTION]`` tag, or close the quotation early.
    """
    if (
        len(talk) <= limit
        and talk.isprintable()
        and '"' not in talk
        and "[" not in talk
        and "]" not in talk
    ):
        return talk
    lines = (" ".join(line.split()) for line in talk[:limit].splitlines())
    text = " / ".join(line for line in lines if line)
    if not text.isprintable():
        text = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    if len(talk) > limit or len(text) > limit:
        text = f"{text[:limit]}... (cut; {len(talk):,} characters in all)"
    return f'"{text.translate(_NEUTRAL)}"'


def _fit(text: str) -> str:
    """``text`` cut in the middle to :data:`MAX_OBSERVATION_CHARS`, keeping its closing lines."""
    if len(text) <= MAX_OBSERVATION_CHARS:
        return text
    head = MAX_OBSERVATION_CHARS - len(_CUT_NOTE) - _KEPT_TAIL
    return text[:head] + _CUT_NOTE + text[-_KEPT_TAIL:]


class Move(Protocol):
    """A parsed move: an :class:`~arena.records.Event`, or a stored turn that was valid."""

    @property
    def kind(self) -> str | None: ...
    @property
    def price(self) -> float | None: ...
    @property
    def product(self) -> int | None: ...


def action_text(move: Move) -> str:
    """``[SELL] $30.00`` (``... on product 2`` when the move names a product), from its parsed
    values: the one way a move is written for people (observations, the report's episode
    browser, ``arena replay``); "" for a turn that parsed to no move."""
    if move.kind is None:
        return ""
    price = move.price
    text = f"[{move.kind}]" if price is None else f"[{move.kind}] {format_price(price)}"
    return text if move.product is None else f"{text} on product {move.product + 1}"


def board_line(
    buyer: int, channel: ChannelView, cap: int, moves: tuple[list[str], list[str]] | None = None
) -> str:
    """One buyer's line of the standing-offers board.

    ``moves`` are the channel's buyer and seller :func:`action_text` lists when already known."""
    if moves is None:
        moves = (
            [action_text(e) for e in channel.events if e.speaker == "buyer"],
            [action_text(e) for e in channel.events if e.speaker == "seller"],
        )
    buyer_moves, seller_moves = ", ".join(moves[0]), ", ".join(moves[1])
    return (
        f"Buyer {buyer + 1}: status={channel.status.value}, remaining capacity="
        f"{channel.remaining}/{cap}; buyer actions: {buyer_moves or 'none'}; "
        f"your actions: {seller_moves or 'none'}"
    )


def cost_reminder(view: SellerView) -> str:
    """The board's closing reminder of the seller's cost floor(s)."""
    if len(view.products) == 1:
        return f"Reminder: never [SELL] or [DEAL] below your cost {format_price(view.costs[0])}."
    floors = ", ".join(
        f"product {p + 1}: {format_price(c)} (stock {view.stock[p]})"
        for p, c in enumerate(view.costs)
    )
    return f"Reminder: never [SELL] or [DEAL] below cost. Costs: {floors}."


def standing_offers_board(
    view: SellerView, lines: list[str] | None = None, reminder: str | None = None
) -> str:
    """The === Standing offers === block appended to every seller turn (Section 11.2).

    ``lines`` (the channels' :func:`board_line` texts) and ``reminder`` (:func:`cost_reminder`)
    may be passed when the caller already has them."""
    if lines is None:
        lines = [board_line(i, c, view.per_buyer_cap) for i, c in enumerate(view.channels)]
    if reminder is None:
        reminder = cost_reminder(view)
    remaining = f"Remaining seller messages: {view.remaining_turns}"
    return "\n".join(["=== Standing offers ===", *lines, remaining, reminder])


def seller_text(
    view: SellerView, lines: list[str] | None = None, reminder: str | None = None
) -> str:
    """The seller's per-turn message: new buyer messages, then the board, then the ask."""
    parts = [f"--- Turn {view.turn} ---"]
    for i, event in view.new_events:
        parts.append(
            f"Buyer {i + 1} says: {quote(event.talk)}\nBuyer {i + 1} action: {action_text(event)}"
        )
    parts.append(standing_offers_board(view, lines, reminder))
    active = ", ".join([str(i + 1) for i in view.active]) or "none"
    parts.append(f"Active buyers you may target: {active}. Reply in the required format.")
    return _fit("\n\n".join(parts))


def seller_move(view: BuyerView) -> tuple[str | None, int]:
    """The seller's latest move on the buyer's channel (its quoted Talk and its action, two
    lines; None before the first) and how many messages the seller has sent it."""
    moves = [e for e in view.events if e.speaker == "seller"]
    if not moves:
        return None, 0
    last = moves[-1]
    return f"Seller says: {quote(last.talk)}\nSeller action: {action_text(last)}", len(moves)


def buyer_text(view: BuyerView) -> str:
    """Buyer ``view.buyer``'s per-turn message: only what the seller addressed to it."""
    if view.opening:
        head = "The negotiation starts. Make your opening offer with [BUY]."
        if view.regulated_opening is not None:
            head += f" Your opening offer must be exactly {format_price(view.regulated_opening)}."
    else:
        move, used = seller_move(view)
        head = move or "Waiting for the seller."
        head += f"\n(The seller has used {used} of at most {view.max_rounds} messages with you.)"
    if view.rejected:
        head += (
            f"\n\nYour previous reply was rejected ({view.rejected}). Stay within your budget, "
            "follow the format, and reply again."
        )
    return _fit(head)


def compact_seller_text(view: SellerView) -> str:
    """The seller's turn in the compact style (``prompt=compact``): the new messages, then one
    line per buyer with its bids and the seller's asks, nothing else. The same information as
    :func:`seller_text` in a third of the tokens, for small models."""
    lines = [f"Turn {view.turn}. Messages left: {view.remaining_turns}."]
    lines += [f"Buyer {i + 1} says: {quote(event.talk)}" for i, event in view.new_events]
    for i, channel in enumerate(view.channels):
        bids = _prices(channel.events, "buyer") or "-"
        asks = _prices(channel.events, "seller")
        line = f"Buyer {i + 1}: {channel.status.value}, {channel.remaining} left, bids {bids}"
        lines.append(line + (f", you asked {asks}" if asks else ""))
    return _fit("\n".join(lines))


def compact_buyer_text(view: BuyerView) -> str:
    """A buyer's turn in the compact style: the seller's latest move on its own channel."""
    if view.opening:
        head = "Make your opening offer."
    else:
        move, used = seller_move(view)
        head = move or "Waiting."
        head += f"\nSeller messages to you: {used} of {view.max_rounds}."
    if view.rejected:
        head += f"\nRejected ({view.rejected}). Reply again."
    return _fit(head)


def _prices(events: tuple[Event, ...], speaker: str) -> str:
    """The prices ``speaker`` named on a channel, in order (actions without a price left out)."""
    return " ".join(format_price(e.price) for e in events if e.speaker == speaker and e.price)


class _ChannelText:
    """What the renderer knows of one channel: its last view and line, its moves so far."""

    __slots__ = ("last", "line", "moves", "seen", "view")

    def __init__(self) -> None:
        self.view: ChannelView | None = None
        self.line = ""
        self.moves: tuple[list[str], list[str]] = ([], [])
        self.seen = 0
        self.last: Event | None = None
        """The last event rendered: a channel whose events do not extend it is another one."""


class ObservationRenderer:
    """Renders the same texts as :func:`seller_text` / :func:`buyer_text` for one episode, doing
    only the new work: the game core hands out the same :class:`ChannelView` until its channel
    changes, and a channel only ever gains events, so each event is rendered once."""

    def __init__(self) -> None:
        self._channels: dict[int, _ChannelText] = {}
        self._reminder: tuple[tuple[Product, ...], tuple[int, ...], str] | None = None

    def text(self, view: SellerView | BuyerView) -> str:
        if isinstance(view, BuyerView):
            return buyer_text(view)
        cap = view.per_buyer_cap
        lines = [self._line(i, c, cap) for i, c in enumerate(view.channels)]
        known = self._reminder
        if known is None or known[0] is not view.products or known[1] != view.stock:
            known = self._reminder = (view.products, view.stock, cost_reminder(view))
        return seller_text(view, lines, known[2])

    def _line(self, buyer: int, channel: ChannelView, cap: int) -> str:
        known = self._channels.get(buyer)
        if known is None:
            known = self._channels[buyer] = _ChannelText()
        if known.view is channel:
            return known.line
        events = channel.events
        if known.seen and (len(events) < known.seen or events[known.seen - 1] is not known.last):
            known = self._channels[buyer] = _ChannelText()  # another episode's channel
        buyer_moves, seller_moves = known.moves
        for event in events[known.seen :]:
            moves = seller_moves if event.speaker == "seller" else buyer_moves
            moves.append(action_text(event))
        if events:
            known.seen, known.last = len(events), events[-1]
        known.line = board_line(buyer, channel, cap, known.moves)
        known.view = channel
        return known.line
