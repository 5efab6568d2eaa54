"""Scripted buyers. Each reads its own channel view and emits protocol text.

- ``time``: concedes from its opening toward its budget, bid_k = open + (B - open)(k/K)^(1/e);
  with ``accept = a`` it also takes any offer at or below a x B at once (a reservation price of
  its own below the budget: a patient buyer that still closes when the seller comes down).
- ``tit-for-tat``: reciprocal concession: raises its bid by what the seller last conceded.
- ``hardliner``: barely moves and accepts only offers close to its current bid.
- ``random``: each reply one of the moves that can pay, uniformly and whatever it did before: a
  bid on any rung of its ladder below its budget, or a deal at an offer below its budget. No
  strategy, every move: the teacher of a base that knows the protocol and leaves the bargaining
  to RL (docs/training.md, "A base that knows the moves, not the game").

Any of them with ``ladder = N`` bids only on the rungs of its budget's ladder (90%, 80%, ... of
the budget, N tenths down) or at the budget: the numbers an LLM buyer with the agent option
``ladder=N`` reads in its prompt, so that its warm start imitates prices it can copy.

Every scripted buyer is individually rational: it never bids or accepts above its budget.
Openings follow the regulator when the market has one; otherwise a buyer opens at a share of its
budget, so unregulated openings leak the budget rank (paper Section 13.1). With several products
a buyer negotiates for the product it prefers (largest valuation over list price) and switches
only when that product sells out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from agents.base import EpisodeContext
from arena.game import BuyerView
from arena.money import cents, check_ladder, dollars, floor_cents, ladder_bids
from arena.protocol import BuyerMessage, Kind, render_buyer


def respond(
    view: BuyerView, kind: Kind, price: float | None, thought: str, talk: str, product: int
) -> str:
    multi = len(view.products) > 1
    msg = BuyerMessage(thought, talk, kind, price, product if multi else None)
    return render_buyer(msg)


def target_product(view: BuyerView) -> int:
    """The product this buyer negotiates for: its opening product unless the seller names one."""
    if len(view.products) == 1:
        return 0
    offered = [p for p in view.offers if view.valuations[p] >= view.products[p].list_price * 0.4]
    if view.events and view.events[-1].speaker == "seller" and view.events[-1].product is not None:
        return view.events[-1].product
    return offered[0] if offered else view.opening_product


@dataclass(frozen=True)
class BuyerStyle:
    """Shared knobs of the scripted buyers."""

    opening: float = 0.35
    """Unregulated opening bid as a share of the budget."""
    jitter: float = 0.15
    """Relative noise on the unregulated opening (drawn from the agent's own generator)."""
    ladder: int = 0
    """Bids on the budget's ladder (:func:`arena.money.ladder_bids`, this many rungs) or at
    the budget: each bid goes down to the nearest of them, up to the lowest rung (0: any cent).
    A teacher whose numbers the LLM option ``ladder`` writes into the prompt."""

    def _check(self) -> None:
        if not 0.0 < self.opening <= 1.0:
            raise ValueError("opening must lie in (0, 1]")
        if not 0.0 <= self.jitter < 1.0:
            raise ValueError("jitter must lie in [0, 1)")
        check_ladder(self.ladder)


def on_ladder(bid: float, budget: float, rungs: int) -> float:
    """``bid`` taken down to the nearest rung of the budget's ladder or the budget itself, or up
    to the lowest rung when it lies below them all; ``bid`` itself without a ladder."""
    if not rungs:
        return bid
    prices = ladder_bids(budget, rungs)
    below = [p for p in prices if cents(p) <= cents(bid)]
    return max(below) if below else prices[-1]


class _Buyer:
    """Opening logic shared by the scripted buyers; subclasses decide each reply."""

    style: BuyerStyle

    def __init__(self, spec: str, config: BuyerStyle) -> None:
        self.spec, self.config, self.style = spec, config, config
        self.seed = 0
        self._rng: np.random.Generator | None = None

    def reset(self, context: EpisodeContext) -> None:
        self.seed, self._rng = context.seed, None

    @property
    def rng(self) -> np.random.Generator:
        """This episode's generator, created on first use (regulated openings never need it)."""
        if self._rng is None:
            self._rng = np.random.default_rng(self.seed)
        return self._rng

    def act(self, view: BuyerView) -> str:
        if view.opening:
            return self.open(view)
        p = target_product(view)
        offer = view.offers.get(p)
        bid = floor_cents(min(self.next_bid(view, p, view.seller_messages), view.valuations[p]))
        bid = on_ladder(bid, view.valuations[p], self.style.ladder)
        if offer is not None and (cents(offer) <= cents(bid) or self.accepts(view, p, offer)):
            return respond(view, Kind.DEAL, None, "The offer is within my plan.", "Deal.", p)
        if offer is not None:
            bid = min(bid, floor_cents(offer - 0.01))
        previous = view.bids.get(p, 0.0)
        bid = max(bid, min(previous, view.valuations[p]))
        return respond(view, Kind.BUY, bid, "Counter below my budget.", f"I can pay {bid:.2f}.", p)

    def open(self, view: BuyerView) -> str:
        p = view.opening_product
        if view.regulated_opening is not None:
            price = view.regulated_opening
        else:
            noise = 1.0 + self.rng.uniform(-self.style.jitter, self.style.jitter)
            price = floor_cents(view.valuations[p] * self.style.opening * noise)
            price = on_ladder(price, view.valuations[p], self.style.ladder)
        price = min(price, floor_cents(view.valuations[p]))
        return respond(view, Kind.BUY, price, "Open low.", f"Would you take {price:.2f}?", p)

    def opening_bid(self, view: BuyerView, p: int) -> float:
        bids = [e.price for e in view.events if e.speaker == "buyer" and e.price is not None]
        return bids[0] if bids else view.valuations[p] * self.style.opening

    def next_bid(self, view: BuyerView, p: int, rounds: int) -> float:
        raise NotImplementedError

    def accepts(self, view: BuyerView, p: int, offer: float) -> bool:
        """Whether an offer above its current bid is taken anyway (never, by default)."""
        return False


@dataclass(frozen=True)
class TimeBuyerConfig(BuyerStyle):
    e: float = 1.0
    """Concession exponent: e < 1 Boulware, e > 1 Conceder."""
    accept: float = 0.0
    """Any offer at or below this share of the budget is taken at once (0: only offers at or
    below the current bid)."""

    def __post_init__(self) -> None:
        self._check()
        if not (math.isfinite(self.e) and self.e > 0):
            raise ValueError("e must be a positive number")
        if not 0.0 <= self.accept <= 1.0:
            raise ValueError("accept must lie in [0, 1] (a share of the budget)")


class TimeBuyer(_Buyer):
    """Time-dependent concession toward the budget over the channel's K rounds."""

    config: TimeBuyerConfig

    def next_bid(self, view: BuyerView, p: int, rounds: int) -> float:
        start = self.opening_bid(view, p)
        progress = (rounds / view.max_rounds) ** (1.0 / self.config.e)
        return start + (view.valuations[p] - start) * progress

    def accepts(self, view: BuyerView, p: int, offer: float) -> bool:
        return cents(offer) <= cents(floor_cents(self.config.accept * view.valuations[p]))


@dataclass(frozen=True)
class TitForTatConfig(BuyerStyle):
    opening: float = 0.30
    factor: float = 1.0
    """Share of the seller's last concession the buyer reciprocates."""
    step: float = 0.05
    """Minimum raise per round, as a share of list price."""

    def __post_init__(self) -> None:
        self._check()
        if self.factor < 0 or self.step < 0:
            raise ValueError("factor and step must be >= 0")


class TitForTat(_Buyer):
    """Reciprocal concession: matches the seller's last price drop (times ``factor``)."""

    config: TitForTatConfig

    def next_bid(self, view: BuyerView, p: int, rounds: int) -> float:
        offers = [e.price for e in view.events if e.speaker == "seller" and e.price is not None]
        conceded = offers[-2] - offers[-1] if len(offers) >= 2 else 0.0
        current = view.bids.get(p, self.opening_bid(view, p))
        raise_by = max(
            self.config.factor * max(conceded, 0.0), self.config.step * view.products[p].list_price
        )
        return current + raise_by


@dataclass(frozen=True)
class HardlinerConfig(BuyerStyle):
    opening: float = 0.25
    step: float = 0.02
    """Raise per round, as a share of list price."""

    def __post_init__(self) -> None:
        self._check()
        if self.step < 0:
            raise ValueError("step must be >= 0")


class Hardliner(_Buyer):
    """Tiny fixed raises; accepts only offers at or below its current bid."""

    config: HardlinerConfig

    def next_bid(self, view: BuyerView, p: int, rounds: int) -> float:
        current = view.bids.get(p, self.opening_bid(view, p))
        return current + self.config.step * view.products[p].list_price


@dataclass(frozen=True)
class RandomBuyerConfig(BuyerStyle):
    def __post_init__(self) -> None:
        self._check()


class RandomBuyer(_Buyer):
    """Uniform over the moves that can pay, whatever it did before: each rung of its ladder below
    its budget (any cent below it without a ladder), and a deal when the standing offer is below
    its budget; the moves :func:`agents.steering.explore_moves` holds an exploring start to."""

    config: RandomBuyerConfig

    def act(self, view: BuyerView) -> str:
        if view.opening:
            return self.open(view)
        p = target_product(view)
        budget, offer = view.valuations[p], view.offers.get(p)
        top = cents(budget) - 1  # a deal at the budget pays nothing
        if self.style.ladder:
            rungs = sorted(set(ladder_bids(budget, self.style.ladder)))  # lowest first: c74's draws
            moves: list[float | None] = [b for b in rungs if 0 < cents(b) <= top]
        else:
            moves = [dollars(int(self.rng.integers(1, top + 1)))] if top >= 1 else []
        if offer is not None and cents(offer) <= top:
            moves.append(None)  # the deal
        if not moves:  # a budget under two cents: bid it
            moves = [floor_cents(budget)]
        move = moves[int(self.rng.integers(len(moves)))]
        if move is None:
            return respond(view, Kind.DEAL, None, "Take the offer.", "Deal.", p)
        return respond(view, Kind.BUY, move, "A bid at random.", f"I can pay {move:.2f}.", p)


BUYERS: dict[str, tuple[type, type]] = {
    "time": (TimeBuyer, TimeBuyerConfig),
    "tit-for-tat": (TitForTat, TitForTatConfig),
    "hardliner": (Hardliner, HardlinerConfig),
    "random": (RandomBuyer, RandomBuyerConfig),
}
