"""What each seat may know at its turn: immutable structured snapshots of the market.

Scripted agents read these; :mod:`arena.observations` renders them as the text an LLM reads. A
buyer's view holds only its own channel and private values (sealed channels, Section 3.1).

The views are named tuples rather than frozen dataclasses: one is built at every step, and a
named tuple is built several times faster while being just as immutable. (The ``bids`` and
``offers`` dicts are copies: changing them changes nothing in the market.)
"""

from __future__ import annotations

from typing import NamedTuple

from arena.catalog import Product
from arena.records import Event
from arena.rules import Status


class ChannelView(NamedTuple):
    """The public state of one buyer channel, as the seller's board shows it."""

    status: Status
    used: int
    remaining: int
    events: tuple[Event, ...]
    bids: dict[int, float]
    """The buyer's standing [BUY] price per product."""
    offers: dict[int, float]
    """The seller's latest [SELL] price to this buyer per product."""

    @property
    def bid(self) -> float | None:
        """Standing bid on product 0 (single-product markets)."""
        return self.bids.get(0)


class SellerView(NamedTuple):
    """Everything the seller may know at its turn (Section 3.1 state s_t), structured."""

    turn: int
    remaining_turns: int
    per_buyer_cap: int
    products: tuple[Product, ...]
    stock: tuple[int, ...]
    channels: tuple[ChannelView, ...]
    new_events: tuple[tuple[int, Event], ...]
    """(buyer, event) pairs that arrived since the seller's previous turn."""

    @property
    def costs(self) -> tuple[float, ...]:
        return tuple(p.cost for p in self.products)

    @property
    def active(self) -> list[int]:
        return [i for i, c in enumerate(self.channels) if c.status is Status.ACTIVE]


class BuyerView(NamedTuple):
    """Everything buyer ``buyer`` may know: its own channel and private values only."""

    buyer: int
    turn: int
    opening: bool
    products: tuple[Product, ...]
    """Public product data; ``cost`` is masked to 0.0 (the seller's cost is private)."""
    valuations: tuple[float, ...]
    regulated_opening: float | None
    opening_product: int
    max_rounds: int
    """K: the most seller messages this channel can receive."""
    events: tuple[Event, ...]
    offers: dict[int, float]
    bids: dict[int, float]
    rejected: str | None
    """Why this buyer's previous attempt was intercepted, when it is being re-sampled."""

    @property
    def budget(self) -> float:
        return self.valuations[0]

    @property
    def seller_messages(self) -> int:
        """Messages the seller has sent this channel so far (of at most ``max_rounds``)."""
        return sum(e.speaker == "seller" for e in self.events)

    @property
    def list_price(self) -> float:
        return self.products[0].list_price

    @property
    def offer(self) -> float | None:
        return self.offers.get(0)

    @property
    def bid(self) -> float | None:
        return self.bids.get(0)
