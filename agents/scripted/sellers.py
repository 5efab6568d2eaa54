"""Scripted sellers. Each reads the structured seller view and emits protocol text.

- ``satisficer`` (alias ``greedy``): locks onto the highest opening bid and closes on the first
  standing bid at or above cost: the behaviour the paper reports for untrained LLMs (Section 4.4).
- ``prober``: anchors at list price on every active buyer, then concentrates on the buyer whose
  bids escalate most and closes when the standing bid clears a threshold or messages run out
  (the trained agent's strategy, Sections 4.3 and 14.4).
- ``time``: time-dependent concession from list toward cost; ``e < 1`` Boulware, ``e > 1``
  Conceder (Faratin et al.).
- ``oracle``: reads the hidden budgets and works only the richest buyer. An upper-bound
  reference, labelled as such wherever it appears; not a fair competitor.

Every scripted seller is individually rational: it never asks or accepts below cost.

Several products: a seller works one (buyer, product) pair at a time. A buyer's bid on a product
comes with the product's cost; "profit" is bid minus cost. The single-product behaviour is the
case M = 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from agents.base import EpisodeContext
from arena.game import SellerView
from arena.matching import optimal_assignment
from arena.money import ceil_cents, cents, floor_cents
from arena.protocol import Kind, SellerMessage, render_seller


def say(
    view: SellerView,
    buyer: int,
    kind: Kind,
    price: float | None,
    thought: str,
    talk: str,
    product: int = 0,
) -> str:
    """Render a seller message; the Product field appears only in multi-product markets."""
    multi = len(view.products) > 1
    msg = SellerMessage(thought, buyer, talk, kind, price, product if multi else None)
    return render_seller(msg)


def quit_message(view: SellerView, reason: str) -> str:
    target = view.active[0] if view.active else 0
    return say(view, target, Kind.QUIT, None, reason, "Thank you, I will stop here.")


def standing_bids(view: SellerView) -> list[tuple[int, int, float]]:
    """(buyer, product, bid) for active buyers and products in stock."""
    return [
        (i, p, bid)
        for i in view.active
        for p, bid in sorted(view.channels[i].bids.items())
        if view.stock[p] > 0
    ]


def profitable(view: SellerView) -> list[tuple[int, int, float]]:
    """Standing bids at or above the product's cost."""
    costs = view.costs
    return [(i, p, b) for i, p, b in standing_bids(view) if cents(b) >= cents(costs[p])]


def preferred_product(view: SellerView, buyer: int) -> int:
    """The in-stock product this buyer bid highest on relative to list (0 with one product)."""
    channel = view.channels[buyer]
    in_stock = [p for p in range(len(view.products)) if view.stock[p] > 0]
    bids = {p: b for p, b in channel.bids.items() if p in in_stock}
    if not bids:
        return max(in_stock, key=lambda p: view.products[p].list_price - view.products[p].cost)
    return max(bids, key=lambda p: bids[p] / view.products[p].list_price)


@dataclass(frozen=True)
class SatisficerConfig:
    concession: float = 0.5
    """Each counter moves this fraction of the way from list price down toward the bid."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.concession <= 1.0:
            raise ValueError("concession must lie in [0, 1]")


class Satisficer:
    """Closes on the first standing bid at or above cost (paper Section 4.4, untrained LLM)."""

    def __init__(self, spec: str, config: SatisficerConfig) -> None:
        self.spec, self.config = spec, config
        self.focus: int | None = None

    def reset(self, context: EpisodeContext) -> None:
        self.focus = None

    def act(self, view: SellerView) -> str:
        for i, p, bid in profitable(view):
            return say(view, i, Kind.DEAL, bid, "A profitable bid: take it.", "Deal.", p)
        if not view.active:
            return quit_message(view, "Nobody is left.")
        if self.focus not in view.active:
            self.focus = max(view.active, key=lambda i: view.channels[i].bids.get(0, 0.0))
        i = self.focus
        p = preferred_product(view, i)
        product = view.products[p]
        bid = view.channels[i].bids.get(p, 0.0)
        ask = product.list_price - self.config.concession * (product.list_price - bid)
        ask = max(ceil_cents(ask), product.cost)
        talk = f"I can do {ask:.2f} for the {product.title[:40]}."
        return say(view, i, Kind.SELL, ask, "Meet them partway.", talk, p)


@dataclass(frozen=True)
class ProberConfig:
    threshold: float = 0.6
    """Close at once when a standing bid captures this share of the list-price surplus."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError("threshold must lie in [0, 1]")


class Prober:
    """Probe every buyer at list, then work the pairs whose bids escalate most.

    After one list-price anchor per buyer, it extrapolates each buyer's bid trend into a budget
    estimate, solves the buyer-product assignment on those estimates, and works the most
    valuable pair: anchor again while messages allow, close on the last one.
    """

    def __init__(self, spec: str, config: ProberConfig) -> None:
        self.spec, self.config = spec, config

    def reset(self, context: EpisodeContext) -> None:
        pass

    def act(self, view: SellerView) -> str:
        if not view.active:
            return quit_message(view, "Nobody is left.")
        costs = view.costs
        lists = [p.list_price for p in view.products]

        def share(p: int, bid: float) -> float:
            return (bid - costs[p]) / (lists[p] - costs[p])

        good = profitable(view)
        best = max(good, key=lambda t: share(t[1], t[2]), default=None)
        if best is not None and share(best[1], best[2]) >= self.config.threshold:
            return say(view, best[0], Kind.DEAL, best[2], "Clears my threshold.", "Deal.", best[1])
        unprobed = [
            i
            for i in view.active
            if not any(e.speaker == "seller" for e in view.channels[i].events)
        ]
        if unprobed and view.remaining_turns > len(unprobed):
            i = unprobed[0]
            p = preferred_product(view, i)
            return self._anchor(view, i, p, "Probe this buyer at list price.")
        estimates = self._estimates(view)
        _, pairs = optimal_assignment(estimates, costs, view.stock)
        if not pairs:
            in_stock = [p for p in range(len(view.products)) if view.stock[p] > 0]
            pairs = [
                max(
                    ((i, p) for i in view.active for p in in_stock),
                    key=lambda t: estimates[t[0]][t[1]] / lists[t[1]],
                )
            ]
        i, p = max(pairs, key=lambda t: estimates[t[0]][t[1]] - costs[t[1]])
        allotted = min(view.channels[i].remaining, view.remaining_turns // len(pairs))
        if allotted <= 1 or view.remaining_turns == 1:
            mine = [t for t in good if t[0] == i]
            pick = max(mine or good, key=lambda t: share(t[1], t[2]), default=None)
            if pick is not None:
                return say(
                    view, pick[0], Kind.DEAL, pick[2], "Last chance: close.", "Deal.", pick[1]
                )
            expected = floor_cents(min(estimates[i][p], lists[p]))
            if expected >= costs[p] and view.channels[i].bids.get(p) is not None:
                talk = f"Meet me at {expected:.2f} and it is yours."
                return say(
                    view, i, Kind.SELL, expected, "Ask what its trend says it can pay.", talk, p
                )
            if view.remaining_turns == 1:
                return quit_message(view, "No profitable bid and no messages left.")
        return self._anchor(view, i, p, "Hold the anchor on the most promising pair.")

    @staticmethod
    def _estimates(view: SellerView) -> list[list[float]]:
        """Inferred budget per (buyer, product): the bid trend extrapolated over the rounds left.

        A buyer that escalates under the list-price anchor reveals room in its budget; one that
        stands still reveals none (paper Section 14.4). Inactive buyers and products without
        bids are estimated at 0.
        """
        out = []
        for channel in view.channels:
            row = [0.0] * len(view.products)
            if channel.status.value == "active":
                for p in range(len(view.products)):
                    bids = [
                        e.price
                        for e in channel.events
                        if e.speaker == "buyer" and e.price is not None and (e.product or 0) == p
                    ]
                    if bids:
                        step = (bids[-1] - bids[0]) / max(1, len(bids) - 1)
                        row[p] = bids[-1] + step * channel.remaining
            out.append(row)
        return out

    @staticmethod
    def _anchor(view: SellerView, i: int, p: int, thought: str) -> str:
        product = view.products[p]
        talk = f"The {product.title[:40]} lists at {product.list_price:.2f}; that is my price."
        return say(view, i, Kind.SELL, product.list_price, thought, talk, p)


@dataclass(frozen=True)
class TimeSellerConfig:
    e: float = 1.0
    """Concession exponent: e < 1 Boulware (holds, then drops), e > 1 Conceder."""
    margin: float = 0.0
    """Reserve price above cost, as a share of the list-price surplus."""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.e) and self.e > 0):
            raise ValueError("e must be a positive number")
        if not 0.0 <= self.margin < 1.0:
            raise ValueError("margin must lie in [0, 1)")


class TimeSeller:
    """Asks cost + (list - cost) * (1 - (t/(T-1))^(1/e)) and accepts any bid at the ask."""

    def __init__(self, spec: str, config: TimeSellerConfig) -> None:
        self.spec, self.config = spec, config
        self.total = 1

    def reset(self, context: EpisodeContext) -> None:
        self.total = context.config.total_turns

    def ask(self, view: SellerView, p: int) -> float:
        product = view.products[p]
        floor = product.cost + self.config.margin * (product.list_price - product.cost)
        t = (view.turn - 1) / max(1, self.total - 1)
        price = floor + (product.list_price - floor) * (1.0 - t ** (1.0 / self.config.e))
        return max(ceil_cents(price), product.cost)

    def act(self, view: SellerView) -> str:
        if not view.active:
            return quit_message(view, "Nobody is left.")
        for i, p, bid in sorted(profitable(view), key=lambda t: -t[2]):
            if cents(bid) >= cents(self.ask(view, p)):
                return say(view, i, Kind.DEAL, bid, "The bid meets my ask.", "Deal.", p)
        bids = standing_bids(view)
        if bids:
            i, p, _ = max(bids, key=lambda t: t[2] / view.products[t[1]].list_price)
        else:
            i = view.active[0]
            p = preferred_product(view, i)
        ask = self.ask(view, p)
        return say(view, i, Kind.SELL, ask, "Concede on schedule.", f"I can do {ask:.2f}.", p)


@dataclass(frozen=True)
class OracleConfig:
    pass


class Oracle:
    """UPPER-BOUND REFERENCE: reads the hidden budgets and sells along an optimal assignment.

    Each turn it solves the maximum-weight buyer-product assignment over the active buyers and
    the stock left (:mod:`arena.matching`), works its most valuable pair and asks that buyer's
    budget (at most list price), which a buyer conceding toward its budget accepts on its last
    reply. When the pair's share of the remaining messages is down to one and the standing bid
    is profitable, it takes the bid instead.
    """

    def __init__(self, spec: str, config: OracleConfig) -> None:
        self.spec, self.config = spec, config
        self.valuations: list[list[float]] = []

    def reset(self, context: EpisodeContext) -> None:
        self.valuations = [list(v) for v in context.scenario.valuations]

    def act(self, view: SellerView) -> str:
        costs = view.costs
        active = set(view.active)
        values = [row if i in active else [0.0] * len(row) for i, row in enumerate(self.valuations)]
        _, pairs = optimal_assignment(values, costs, view.stock)
        if not pairs:
            return quit_message(view, "Oracle: no profitable pair is left.")
        gains = {(i, p): values[i][p] - costs[p] for i, p in pairs}
        i, p = max(pairs, key=lambda pair: gains[pair])
        product = view.products[p]
        bid = view.channels[i].bids.get(p)
        allotted = min(view.channels[i].remaining, view.remaining_turns // len(pairs))
        if allotted <= 1 and bid is not None and cents(bid) >= cents(product.cost):
            return say(view, i, Kind.DEAL, bid, "Oracle: close this pair.", "Deal.", p)
        ask = max(min(product.list_price, floor_cents(self.valuations[i][p])), product.cost)
        return say(view, i, Kind.SELL, ask, "Oracle: ask its budget.", f"{ask:.2f}, final.", p)


SELLERS: dict[str, tuple[type, type]] = {
    "satisficer": (Satisficer, SatisficerConfig),
    "greedy": (Satisficer, SatisficerConfig),
    "prober": (Prober, ProberConfig),
    "time": (TimeSeller, TimeSellerConfig),
    "oracle": (Oracle, OracleConfig),
}
