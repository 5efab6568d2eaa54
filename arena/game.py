"""The pure game core: one market episode as a state machine over protocol text.

No framework imports: :mod:`arena.env` wraps this in PettingZoo, the rollout engines drive it
directly. The core parses each message, asks :mod:`arena.rules` whether it stands, applies it, and
does the turn accounting of Section 3.1:

1. Openings: ``buyer_1`` .. ``buyer_N`` each post a [BUY] (re-sampled until valid).
2. The seller sends one message to a target buyer; [SELL] waits for that buyer's reply, a valid
   [DEAL] closes at once, [QUIT] ends the episode, a violation ends it with reward -1.
3. The targeted buyer replies ([BUY], [DEAL] or [QUIT]); the exchange costs one of the seller's
   T messages and one of that buyer's K. Then the termination conditions are checked.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from arena.catalog import Product
from arena.config import MarketConfig
from arena.protocol import BuyerMessage, FormatViolation, Kind, parse_buyer, parse_seller
from arena.records import Deal, EpisodeResult, Event, TurnRecord
from arena.rewards import VIOLATION_REWARD, buyer_surplus_ratio, seller_reward
from arena.rules import (
    Status,
    Violation,
    buyer_error,
    market_over,
    seller_violation,
    status_after_reply,
)
from arena.scenarios import Scenario
from arena.seats import SELLER, buyer_index, buyer_seat


@dataclass(frozen=True)
class ChannelView:
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


@dataclass(frozen=True)
class SellerView:
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


@dataclass(frozen=True)
class BuyerView:
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
    def list_price(self) -> float:
        return self.products[0].list_price

    @property
    def offer(self) -> float | None:
        return self.offers.get(0)

    @property
    def bid(self) -> float | None:
        return self.bids.get(0)


class _Channel:
    __slots__ = (
        "bids",
        "engaged",
        "events",
        "failed",
        "first_bid",
        "offers",
        "rejected",
        "resamples",
        "status",
        "used",
    )

    def __init__(self) -> None:
        self.status = Status.ACTIVE
        self.used = 0
        self.events: list[Event] = []
        self.bids: dict[int, float] = {}
        self.offers: dict[int, float] = {}
        self.first_bid: float | None = None
        self.resamples = 0
        self.failed = False
        self.engaged = False
        self.rejected: str | None = None


class Market:
    """One episode. ``current`` names the agent to act; ``step(text)`` applies its message."""

    def __init__(self, config: MarketConfig, scenario: Scenario, keep_turns: bool = True) -> None:
        if scenario.num_buyers != config.num_buyers:
            raise ValueError(
                f"scenario has {scenario.num_buyers} buyers but the config says "
                f"num_buyers={config.num_buyers}"
            )
        self.config = config
        self.scenario = scenario
        self.keep_turns = keep_turns
        self.multi = scenario.num_products > 1
        # Buyers see the public product data only: the seller's cost is sealed (Section 3.1).
        self._public_products = tuple(replace(p, cost=0.0) for p in scenario.products)
        self.channels = [_Channel() for _ in range(config.num_buyers)]
        self.stock = list(scenario.stock)
        self.remaining = config.total_turns
        self.turn = 0
        self.deals: list[Deal] = []
        self.turns: list[TurnRecord] = []
        self.attempts = 0
        self.violation: tuple[Violation, str, str] | None = None
        self.termination: str | None = None
        self._error: str | None = None
        self._seller_seen = 0
        self._log: list[tuple[int, Event]] = []
        self.phase = "opening"
        self.buyer = 0
        self.current = buyer_seat(0)
        self.steps = 0
        """Messages applied so far (valid or not): a cheap version stamp for caches."""

    @property
    def done(self) -> bool:
        return self.termination is not None

    def view(self, seat: str | None = None) -> SellerView | BuyerView:
        """The structured view of ``seat``; by default of the agent to act now (``current``)."""
        seat = self.current if seat is None else seat
        if not seat:
            raise RuntimeError("the episode is over: nobody is to act")
        return self.seller_view() if seat == SELLER else self.buyer_view(buyer_index(seat))

    def seller_view(self) -> SellerView:
        K = self.config.per_buyer_cap
        channels = tuple(
            ChannelView(c.status, c.used, K - c.used, tuple(c.events), dict(c.bids), dict(c.offers))
            for c in self.channels
        )
        return SellerView(
            turn=self.turn + 1,
            remaining_turns=self.remaining,
            per_buyer_cap=K,
            products=self.scenario.products,
            stock=tuple(self.stock),
            channels=channels,
            new_events=tuple(self._log[self._seller_seen :]),
        )

    def buyer_view(self, buyer: int) -> BuyerView:
        c = self.channels[buyer]
        sc = self.scenario
        return BuyerView(
            buyer=buyer,
            turn=self.turn,
            opening=self.phase == "opening",
            products=self._public_products,
            valuations=sc.valuations[buyer],
            regulated_opening=sc.first_offers[buyer],
            opening_product=sc.opening_products[buyer],
            max_rounds=self.config.per_buyer_cap,
            events=tuple(c.events),
            offers=dict(c.offers),
            bids=dict(c.bids),
            rejected=c.rejected,
        )

    def step(self, text: str, tokens_in: int = 0, tokens_out: int = 0) -> None:
        """Apply the current agent's message."""
        if self.done:
            raise RuntimeError("the episode is over; start a new Market")
        self.steps += 1
        if self.phase == "seller":
            self._seller_step(text, tokens_in, tokens_out)
        else:
            self._buyer_step(text, tokens_in, tokens_out)

    def fail(self, reason: str) -> None:
        """End the episode as errored (a back-end failure outlasted its retries)."""
        self.termination = "error"
        self.violation = None
        self._error = reason

    def _record(
        self,
        agent: str,
        to: str,
        text: str,
        msg: object,
        reason: str | None,
        tokens_in: int,
        tokens_out: int,
    ) -> None:
        if not self.keep_turns:
            return
        ok = not isinstance(msg, FormatViolation) and reason is None
        kind = price = product = None
        if not isinstance(msg, FormatViolation):
            kind, price, product = msg.kind.value, msg.price, msg.product  # type: ignore[attr-defined]
        self.turns.append(
            TurnRecord(
                len(self.turns),
                agent,
                to,
                text,
                kind,
                price,
                product,
                ok,
                reason,
                tokens_in,
                tokens_out,
            )
        )

    def _seller_step(self, text: str, tokens_in: int, tokens_out: int) -> None:
        msg = parse_seller(text, self.multi)
        self.turn += 1
        self._seller_seen = len(self._log)
        bids = [c.bids for c in self.channels]
        statuses = [c.status for c in self.channels]
        found = seller_violation(msg, statuses, bids, self.scenario.costs, self.stock)
        to = (
            buyer_seat(msg.buyer)
            if not isinstance(msg, FormatViolation) and msg.kind is not Kind.QUIT
            else "all"
        )
        self._record("seller", to, text, msg, found[1] if found else None, tokens_in, tokens_out)
        if found is not None:
            self.violation = (found[0], found[1], "seller")
            self._finish("seller_violation")
            return
        assert not isinstance(msg, FormatViolation)
        if msg.kind is Kind.QUIT:
            self._finish("seller_quit")
            return
        buyer, product = msg.buyer, msg.product if msg.product is not None else 0
        channel = self.channels[buyer]
        channel.engaged = True
        event = Event(self.turn, "seller", msg.kind.value, msg.price, msg.product, msg.talk)
        channel.events.append(event)
        assert msg.price is not None
        if msg.kind is Kind.DEAL:
            self._close(buyer, product, msg.price, "seller")
            self._account(buyer, quit=False, closed=True)
            return
        channel.offers[product] = msg.price
        self.phase, self.buyer, self.current = "reply", buyer, buyer_seat(buyer)
        self.attempts = 0

    def _buyer_step(self, text: str, tokens_in: int, tokens_out: int) -> None:
        opening = self.phase == "opening"
        i = self.buyer
        channel = self.channels[i]
        msg = parse_buyer(text, self.multi)
        error = buyer_error(
            msg,
            opening=opening,
            valuations=self.scenario.valuations[i],
            seller_offers=channel.offers,
            regulated_opening=self.scenario.first_offers[i],
            opening_product=self.scenario.opening_products[i],
            stock=self.stock,
        )
        self._record(
            self.current, "seller", text, msg, error[1] if error else None, tokens_in, tokens_out
        )
        if error is not None:
            if self.config.penalize_buyer_violations:
                self.violation = (Violation.BUYER, f"{error[0].value}:{error[1]}", self.current)
                self._finish("buyer_violation")
                return
            channel.rejected = f"{error[0].value}: {error[1]}"
            if self.attempts < self.config.max_buyer_retries:
                self.attempts += 1
                channel.resamples += 1
                return
            channel.failed = True
            msg = BuyerMessage("", "", Kind.QUIT)
        channel.rejected = None
        self.attempts = 0
        assert isinstance(msg, BuyerMessage)
        if msg.kind is Kind.BUY:
            product = (
                msg.product
                if msg.product is not None
                else (self.scenario.opening_products[i] if opening else 0)
            )
            assert msg.price is not None
            channel.bids[product] = msg.price
            if opening and channel.first_bid is None:
                channel.first_bid = msg.price
        event = Event(self.turn, "buyer", msg.kind.value, msg.price, msg.product, msg.talk)
        channel.events.append(event)
        self._log.append((i, event))
        if opening:
            if channel.failed:
                channel.status = Status.QUIT
            self._next_opening()
            return
        if msg.kind is Kind.DEAL:
            product = msg.product if msg.product is not None else 0
            self._close(i, product, channel.offers[product], "buyer")
        self._account(i, quit=msg.kind is Kind.QUIT, closed=msg.kind is Kind.DEAL)

    def _next_opening(self) -> None:
        self.buyer += 1
        if self.buyer < self.config.num_buyers:
            self.current = buyer_seat(self.buyer)
            return
        if not any(c.status is Status.ACTIVE for c in self.channels):
            self._finish("market_exhausted")
            return
        self.phase, self.current = "seller", SELLER

    def _close(self, buyer: int, product: int, price: float, by: str) -> None:
        self.deals.append(Deal(buyer, product, price, by, self.turn))
        self.stock[product] -= 1

    def _account(self, buyer: int, quit: bool, closed: bool) -> None:
        """Charge one exchange to T and to u_i, update z_i, check termination (Section 3.1)."""
        channel = self.channels[buyer]
        channel.used += 1
        self.remaining -= 1
        if closed:
            channel.status = Status.CLOSED
        else:
            channel.status = status_after_reply(channel.used, self.config.per_buyer_cap, quit)
        over = market_over([c.status for c in self.channels], self.remaining, self.stock)
        if over is not None:
            self._finish(over)
            return
        self.phase, self.current = "seller", SELLER

    def _finish(self, termination: str) -> None:
        self.termination = termination
        self.phase, self.current = "done", ""

    def result(self) -> EpisodeResult:
        """The episode's outcome and rewards; call once ``done``."""
        if not self.done:
            raise RuntimeError("the episode is not over yet")
        sc = self.scenario
        n = sc.num_buyers
        buyer_rewards = [0.0] * n
        violation = reason = by = None
        error = self._error
        if self.termination == "error":
            outcome, seller = "error", 0.0
        elif self.violation is not None and self.violation[2] == "seller":
            violation, reason, by = self.violation[0].value, self.violation[1], "seller"
            outcome, seller = "violation", VIOLATION_REWARD
        else:
            deals = [(d.product, d.price) for d in self.deals]
            seller = seller_reward(deals, sc.list_prices, sc.costs, sc.stock, n)
            for d in self.deals:
                p = sc.products[d.product]
                buyer_rewards[d.buyer] = buyer_surplus_ratio(d.price, p.cost, p.list_price)
            outcome = "deal" if self.deals else "no_deal"
            if self.violation is not None:
                violation, reason, by = (
                    self.violation[0].value,
                    self.violation[1],
                    self.violation[2],
                )
                buyer_rewards[buyer_index(by)] = VIOLATION_REWARD
                outcome = "violation"
        return EpisodeResult(
            outcome=outcome,
            termination=self.termination or "",
            violation=violation,
            violation_reason=reason,
            violation_by=by,
            deals=tuple(self.deals),
            seller_reward=seller,
            buyer_rewards=tuple(buyer_rewards),
            seller_turns=self.turn,
            messages_per_buyer=tuple(c.used for c in self.channels),
            engaged=tuple(c.engaged for c in self.channels),
            first_bids=tuple(c.first_bid for c in self.channels),
            buyer_resamples=tuple(c.resamples for c in self.channels),
            buyer_failures=tuple(c.failed for c in self.channels),
            statuses=tuple(c.status.value for c in self.channels),
            turns=tuple(self.turns),
            error=error,
        )
