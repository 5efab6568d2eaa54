"""Verifiable rewards (paper Section 3.2, equation (1); buyer side after seed 003).

Pure functions of prices; the environment only decides which one applies.
"""

from __future__ import annotations

from collections.abc import Sequence

VIOLATION_REWARD = -1.0
"""Reward of the agent that commits a violation (Section 3.2, third branch of equation (1))."""

NO_DEAL_REWARD = 0.0
"""Reward when the episode ends without a deal (Section 3.2, second branch of equation (1))."""


def seller_surplus_ratio(price: float, cost: float, list_price: float) -> float:
    """Seller Surplus Extraction Ratio min{1, (P - C)/(P_list - C)} (Section 3.2, eq. (1))."""
    return min(1.0, (price - cost) / (list_price - cost))


def buyer_surplus_ratio(price: float, cost: float, list_price: float) -> float:
    """Buyer reward clip((P_list - P)/(P_list - C), 0, 1) (Section 13.2; seed 003)."""
    return min(1.0, max(0.0, (list_price - price) / (list_price - cost)))


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


def seller_reward(
    deals: Sequence[tuple[int, float]],
    list_prices: Sequence[float],
    costs: Sequence[float],
    stock: Sequence[int],
    num_buyers: int,
) -> float:
    """Seller reward of an episode without violation: deals are (product, price) pairs.

    One product: equation (1), min{1, (P - C)/(P_list - C)} or 0 without a deal. Several
    products: realised profit over :func:`list_margin_capacity`, capped at 1 (issue 6).
    """
    if not deals:
        return NO_DEAL_REWARD
    if len(list_prices) == 1 and len(deals) == 1:
        product, price = deals[0]
        return seller_surplus_ratio(price, costs[product], list_prices[product])
    profit = sum(price - costs[product] for product, price in deals)
    return min(1.0, profit / list_margin_capacity(list_prices, costs, stock, num_buyers))
