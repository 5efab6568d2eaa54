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

import functools
from dataclasses import replace
from typing import NamedTuple

from arena.catalog import Product
from arena.config import MarketConfig
from arena.protocol import (
    BuyerMessage,
    FormatViolation,
    Kind,
    SellerMessage,
    parse_buyer,
    parse_seller,
)
from arena.records import Deal, EpisodeResult, Event, TurnRecord
from arena.rewards import BUYER_REWARDS, SELLER_REWARDS, VIOLATION_REWARD, reward_input
from arena.rules import (
    Status,
    Violation,
    buyer_error,
    market_over,
    seller_violation,
    status_after_reply,
)
from arena.scenarios import Scenario
from arena.seats import SELLER, buyer_index, buyer_seat, buyer_seats
from arena.views import BuyerView, ChannelView, SellerView

_KIND_TEXT = {kind: kind.value for kind in Kind}
"""The stored text of each kind (``Kind.value`` is a slow property lookup)."""


@functools.lru_cache(maxsize=4096)
def _public(product: Product) -> Product:
    """The product as buyers see it: the seller's cost is sealed (Section 3.1)."""
    return replace(product, cost=0.0)


class _Channel:
    __slots__ = (
        "_view",
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
        self._view: ChannelView | None = None

    def add(self, event: Event) -> None:
        """Append a public move (its bid or offer is set in the same step)."""
        self.events.append(event)
        self._view = None

    def charge(self, status: Status) -> None:
        """One more exchange on this channel, after which its status is ``status``."""
        self.used += 1
        self.status = status
        self._view = None

    def view(self, cap: int) -> ChannelView:
        """The board's view of this channel, rebuilt only after :meth:`add` or :meth:`charge`
        (the only changes a view shows besides the bids and offers that come with an event)."""
        if self._view is None:
            self._view = ChannelView(
                self.status,
                self.used,
                cap - self.used,
                tuple(self.events),
                dict(self.bids),
                dict(self.offers),
            )
        return self._view


class Settlement(NamedTuple):
    """How an episode ended and what each side earned (Section 3.2), without the transcript."""

    outcome: str
    """"deal", "no_deal", "violation" or "error"."""
    seller_reward: float
    buyer_rewards: tuple[float, ...]
    violation: str | None
    violation_reason: str | None
    violation_by: str | None


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
        self._public_products = tuple(_public(p) for p in scenario.products)
        self._costs = scenario.costs
        self._seller_reward = SELLER_REWARDS[config.seller_reward]
        self._buyer_reward = BUYER_REWARDS[config.buyer_reward]
        self._seats = buyer_seats(config.num_buyers)
        self._cap = config.per_buyer_cap
        self.channels = [_Channel() for _ in range(config.num_buyers)]
        self._bids = [c.bids for c in self.channels]
        self.stock = list(scenario.stock)
        self.remaining = config.total_turns
        self.turn = 0
        self.deals: list[Deal] = []
        self._rows: list[tuple] = []
        self._turns: list[TurnRecord] = []
        self.attempts = 0
        self.violation: tuple[Violation, str, str] | None = None
        self.termination: str | None = None
        self._error: str | None = None
        self._settlement: Settlement | None = None
        self._result: EpisodeResult | None = None
        self._seller_seen = 0
        self._log: list[tuple[int, Event]] = []
        self.phase = "opening"
        self.buyer = 0
        self.current = self._seats[0]
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
        if seat == SELLER:
            return self.seller_view()
        return self.buyer_view(self.buyer if seat == self.current else buyer_index(seat))

    def seller_view(self) -> SellerView:
        K = self.config.per_buyer_cap
        return SellerView(
            self.turn + 1,
            self.remaining,
            K,
            self.scenario.products,
            tuple(self.stock),
            tuple([c.view(K) for c in self.channels]),
            tuple(self._log[self._seller_seen :]),
        )

    def buyer_view(self, buyer: int) -> BuyerView:
        c = self.channels[buyer]
        sc = self.scenario
        return BuyerView(
            buyer,
            self.turn,
            self.phase == "opening",
            self._public_products,
            sc.valuations[buyer],
            sc.first_offers[buyer],
            sc.opening_products[buyer],
            self.config.per_buyer_cap,
            tuple(c.events),
            dict(c.offers),
            dict(c.bids),
            c.rejected,
        )

    def step(self, text: str, tokens_in: int = 0, tokens_out: int = 0) -> None:
        """Apply the current agent's message."""
        if self.termination is not None:
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
        self._settlement = self._result = None

    def _record(
        self,
        agent: str,
        to: str,
        text: str,
        msg: SellerMessage | BuyerMessage | FormatViolation,
        reason: str | None,
        tokens_in: int,
        tokens_out: int,
    ) -> None:
        if not self.keep_turns:
            return
        if not isinstance(text, str):
            text = ""  # the transcript holds text; the reason says it was none (`not_text`)
        if isinstance(msg, FormatViolation):
            kind = price = product = None
        else:
            kind, price, product = _KIND_TEXT[msg.kind], msg.price, msg.product
        valid = reason is None and kind is not None
        self._rows.append(
            (agent, to, text, kind, price, product, valid, reason, tokens_in, tokens_out)
        )

    @property
    def turns(self) -> list[TurnRecord]:
        """The transcript so far, every message as sent, valid or not (built when read)."""
        for index in range(len(self._turns), len(self._rows)):
            self._turns.append(TurnRecord(index, *self._rows[index]))
        return self._turns

    def _seller_step(self, text: str, tokens_in: int, tokens_out: int) -> None:
        msg = parse_seller(text, self.multi)
        self.turn += 1
        self._seller_seen = len(self._log)
        statuses = [c.status for c in self.channels]
        found = seller_violation(msg, statuses, self._bids, self._costs, self.stock)
        to = (
            self._seat(msg.buyer)
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
        event = Event(self.turn, "seller", _KIND_TEXT[msg.kind], msg.price, msg.product, msg.talk)
        channel.add(event)
        assert msg.price is not None
        if msg.kind is Kind.DEAL:
            self._close(buyer, product, msg.price, "seller")
            self._account(buyer, quit=False, closed=True)
            return
        channel.offers[product] = msg.price
        self.phase, self.buyer, self.current = "reply", buyer, self._seats[buyer]
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
        event = Event(self.turn, "buyer", _KIND_TEXT[msg.kind], msg.price, msg.product, msg.talk)
        channel.add(event)
        self._log.append((i, event))
        if opening:
            if channel.failed:
                channel.status = Status.QUIT  # an opening costs no exchange
            self._next_opening()
            return
        if msg.kind is Kind.DEAL:
            product = msg.product if msg.product is not None else 0
            self._close(i, product, channel.offers[product], "buyer")
        self._account(i, quit=msg.kind is Kind.QUIT, closed=msg.kind is Kind.DEAL)

    def _seat(self, buyer: int) -> str:
        """The seat name of ``buyer``, also for an out-of-range target (``buyer_0``)."""
        return self._seats[buyer] if 0 <= buyer < len(self._seats) else buyer_seat(buyer)

    def _next_opening(self) -> None:
        self.buyer += 1
        if self.buyer < self.config.num_buyers:
            self.current = self._seats[self.buyer]
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
        self.remaining -= 1
        status = Status.CLOSED if closed else status_after_reply(channel.used + 1, self._cap, quit)
        channel.charge(status)
        over = market_over([c.status for c in self.channels], self.remaining, self.stock)
        if over is not None:
            self._finish(over)
            return
        self.phase, self.current = "seller", SELLER

    def _finish(self, termination: str) -> None:
        self.termination = termination
        self.phase, self.current = "done", ""

    def settlement(self) -> Settlement:
        """Outcome and rewards of the finished episode, without the transcript (cheap)."""
        if not self.done:
            raise RuntimeError("the episode is not over yet")
        if self._settlement is None:
            self._settlement = self._settle()
        return self._settlement

    def _settle(self) -> Settlement:
        """Outcome and rewards: the market's named rewards read one
        :class:`arena.rewards.RewardInput`; a violation pays its author -1 whatever the rewards
        (Section 3.2)."""
        sc = self.scenario
        n = sc.num_buyers
        buyer_rewards = [0.0] * n
        violation = reason = by = None
        if self.termination == "error":
            outcome, seller = "error", 0.0
        elif self.violation is not None and self.violation[2] == "seller":
            violation, reason, by = self.violation[0].value, self.violation[1], "seller"
            outcome, seller = "violation", VIOLATION_REWARD
        else:
            read = reward_input(sc, self.deals)
            seller = self._seller_reward(read)
            buyer_rewards = [self._buyer_reward(read, i) for i in range(n)]
            outcome = "deal" if self.deals else "no_deal"
            if self.violation is not None:
                violation, reason, by = (
                    self.violation[0].value,
                    self.violation[1],
                    self.violation[2],
                )
                buyer_rewards[buyer_index(by)] = VIOLATION_REWARD
                outcome = "violation"
        return Settlement(outcome, seller, tuple(buyer_rewards), violation, reason, by)

    def result(self) -> EpisodeResult:
        """The episode's outcome, rewards and transcript; call once ``done`` (built once)."""
        if self._result is None:
            paid = self.settlement()
            self._result = EpisodeResult(
                outcome=paid.outcome,
                termination=self.termination or "",
                violation=paid.violation,
                violation_reason=paid.violation_reason,
                violation_by=paid.violation_by,
                seller_reward=paid.seller_reward,
                buyer_rewards=paid.buyer_rewards,
                deals=tuple(self.deals),
                seller_turns=self.turn,
                messages_per_buyer=tuple(c.used for c in self.channels),
                engaged=tuple(c.engaged for c in self.channels),
                first_bids=tuple(c.first_bid for c in self.channels),
                buyer_resamples=tuple(c.resamples for c in self.channels),
                buyer_failures=tuple(c.failed for c in self.channels),
                statuses=tuple(c.status.value for c in self.channels),
                turns=tuple(self.turns),
                error=self._error,
            )
        return self._result
