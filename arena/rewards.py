"""Verifiable rewards (paper Section 3.2, equation (1); buyer side Section 13.2 and seed 003).

Each side's reward is a named pure function of one typed value, the episode's
:class:`RewardInput` (every deal with its price, cost, list price and the dealt buyer's budget,
and the market's products and budgets). A market picks one per side by name,
``MarketConfig.seller_reward`` from :data:`SELLER_REWARDS` and ``MarketConfig.buyer_reward``
from :data:`BUYER_REWARDS`: a new variant is one function and one entry. Violations are not a
reward's business: the market pays :data:`VIOLATION_REWARD` to whoever committed one, under any
reward. The names are recorded with every episode (:class:`Rewards`), so episodes played under
different rewards are never pooled.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from arena.money import cents

if TYPE_CHECKING:
    from arena.records import Deal
    from arena.scenarios import Scenario

VIOLATION_REWARD = -1.0
"""Reward of the agent that commits a violation (Section 3.2, third branch of equation (1))."""

NO_DEAL_REWARD = 0.0
"""Reward when the episode ends without a deal (Section 3.2, second branch of equation (1))."""


class Trade(NamedTuple):
    """One deal as a reward reads it (dollars)."""

    buyer: int
    """0-based slot of the buyer who bought."""
    product: int
    price: float
    cost: float
    list_price: float
    budget: float
    """The dealt buyer's private budget (valuation) for the product."""


class RewardInput(NamedTuple):
    """What any reward reads of a finished episode without a seller violation: one value, so a
    new reward needs no new argument anywhere."""

    trades: tuple[Trade, ...]
    list_prices: tuple[float, ...]
    costs: tuple[float, ...]
    stock: tuple[int, ...]
    """Units of each product on sale at the start."""
    budgets: tuple[tuple[float, ...], ...]
    """budgets[buyer][product]: every buyer's private budget (``Scenario.valuations``)."""

    @property
    def num_buyers(self) -> int:
        return len(self.budgets)

    def trade_of(self, buyer: int) -> Trade | None:
        """The deal of ``buyer`` (unit demand: at most one), None without one."""
        return next((t for t in self.trades if t.buyer == buyer), None)


def reward_input(scenario: Scenario, deals: Sequence[Deal]) -> RewardInput:
    """What the rewards read of ``deals`` closed on ``scenario``."""
    products, budgets = scenario.products, scenario.valuations
    trades = tuple(
        Trade(
            d.buyer,
            d.product,
            d.price,
            products[d.product].cost,
            products[d.product].list_price,
            budgets[d.buyer][d.product],
        )
        for d in deals
    )
    return RewardInput(trades, scenario.list_prices, scenario.costs, scenario.stock, budgets)


# Formulas on one deal -------------------------------------------------------------------------


def seller_surplus_ratio(price: float, cost: float, list_price: float) -> float:
    """Seller Surplus Extraction Ratio min{1, (P - C)/(P_list - C)} (Section 3.2, eq. (1))."""
    return min(1.0, (price - cost) / (list_price - cost))


def buyer_surplus_ratio(price: float, cost: float, list_price: float) -> float:
    """Buyer surplus extraction clip((P_list - P)/(P_list - C), 0, 1) (Section 13.2, Table 12)."""
    return min(1.0, max(0.0, (list_price - price) / (list_price - cost)))


def buyer_budget_share(price: float, cost: float, budget: float) -> float:
    """Buyer's share of the gains from trade clip((B - P)/(B - C), 0, 1), -1 above B (seed 003).

    0 when B <= C (no gains to share: a valid deal is then at P = B = C); prices compared in
    cents. docs/metrics.md gives the reasons for this form.
    """
    if cents(price) > cents(budget):
        return VIOLATION_REWARD
    if cents(budget) <= cents(cost):
        return 0.0
    return min(1.0, max(0.0, (budget - price) / (budget - cost)))


def buyer_reservation_share(price: float, cost: float, list_price: float, budget: float) -> float:
    """clip((V - P)/(V - C), 0, 1) with V = min(B, P_list), -1 above B: surplus over the outside
    option of paying list (docs/metrics.md).

    A buyer never gains by paying list price, which it could pay anywhere, so a deal at or
    above list is worth no more than no deal; below list it is the budget share with the
    budget capped at list. 0 when V <= C.
    """
    if cents(price) > cents(budget):
        return VIOLATION_REWARD
    return max(0.0, buyer_budget_share(price, cost, min(budget, list_price)))


def list_margin_capacity(
    list_prices: Sequence[float], costs: Sequence[float], stock: Sequence[int], num_buyers: int
) -> float:
    """Profit of selling at list price to as many unit-demand buyers as stock allows.

    The normaliser of the multi-product seller reward: the most profitable units, one per
    buyer. With one product and one unit it is P_list - C, so the reward reduces to eq. (1).
    """
    margins = sorted(
        (lp - c for lp, c, s in zip(list_prices, costs, stock, strict=True) for _ in range(s)),
        reverse=True,
    )
    return sum(margins[:num_buyers])


# The rewards, by name ---------------------------------------------------------------------------


def seller_surplus_extraction(s: RewardInput) -> float:
    """Eq. (1) on one deal, else profit over list-margin capacity capped at 1 (Sec 3.2; issue 6)."""
    if not s.trades:
        return NO_DEAL_REWARD
    if len(s.list_prices) == 1 and len(s.trades) == 1:
        t = s.trades[0]
        return seller_surplus_ratio(t.price, t.cost, t.list_price)
    profit = sum(t.price - t.cost for t in s.trades)
    return min(1.0, profit / list_margin_capacity(s.list_prices, s.costs, s.stock, s.num_buyers))


def buyer_surplus_extraction(s: RewardInput, buyer: int) -> float:
    """Table 12: clip((P_list - P)/(P_list - C), 0, 1) on its deal, 0 without (Sec 13.2)."""
    t = s.trade_of(buyer)
    return NO_DEAL_REWARD if t is None else buyer_surplus_ratio(t.price, t.cost, t.list_price)


def buyer_budget_surplus(s: RewardInput, buyer: int) -> float:
    """clip((B - P)/(B - C), 0, 1) on the buyer's deal, -1 above budget, 0 without (seed 003)."""
    t = s.trade_of(buyer)
    return NO_DEAL_REWARD if t is None else buyer_budget_share(t.price, t.cost, t.budget)


def buyer_reservation_surplus(s: RewardInput, buyer: int) -> float:
    """clip((min(B, P_list) - P)/(min(B, P_list) - C), 0, 1) on its deal, -1 above B, 0 without."""
    t = s.trade_of(buyer)
    if t is None:
        return NO_DEAL_REWARD
    return buyer_reservation_share(t.price, t.cost, t.list_price, t.budget)


SellerReward = Callable[[RewardInput], float]
BuyerReward = Callable[[RewardInput, int], float]

SELLER_REWARDS: dict[str, SellerReward] = {
    "surplus_extraction": seller_surplus_extraction,
}
"""Seller rewards by name (``MarketConfig.seller_reward``); the first is the default."""

BUYER_REWARDS: dict[str, BuyerReward] = {
    "surplus_extraction": buyer_surplus_extraction,
    "budget_surplus": buyer_budget_surplus,
    "reservation_surplus": buyer_reservation_surplus,
}
"""Buyer rewards by name (``MarketConfig.buyer_reward``), each paid to every buyer slot; the
first is the default."""


class Rewards(NamedTuple):
    """The reward names an episode was played under, recorded with it."""

    seller: str
    buyer: str

    def describe(self) -> str:
        """``seller surplus_extraction, buyer budget_surplus``: how outputs name them."""
        return f"seller {self.seller}, buyer {self.buyer}"


DEFAULT_REWARDS = Rewards(next(iter(SELLER_REWARDS)), next(iter(BUYER_REWARDS)))
"""The rewards of every episode stored before they were a setting."""
