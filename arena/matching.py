"""Matching quality of multi-product markets (issue 6; seed 004).

The gains from trade of buyer i taking product p are max(0, v_ip - c_p), whatever the price. The
efficient allocation is a maximum-weight bipartite matching between buyers (unit demand) and
product units (stock), computed with networkx. Matching quality is the realised gains over the
efficient gains: 1 means the seller spent its scarce messages on the right buyer-product pairs.
"""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx

from arena.money import cents, dollars


def gains(valuations: Sequence[Sequence[float]], costs: Sequence[float]) -> list[list[float]]:
    """Gains from trade max(0, v_ip - c_p) per buyer and product, in dollars."""
    return [
        [max(0.0, dollars(cents(v - c))) for v, c in zip(row, costs, strict=True)]
        for row in valuations
    ]


def optimal_assignment(
    valuations: Sequence[Sequence[float]], costs: Sequence[float], stock: Sequence[int]
) -> tuple[float, list[tuple[int, int]]]:
    """Best total gains and one optimal list of (buyer, product) pairs (max-weight matching).

    Each unit of stock is a node, each buyer a node; edges carry the pair's positive gains.
    Weights go to networkx as integer cents so ties and sums are exact.
    """
    weights = gains(valuations, costs)
    if len(costs) == 1 and stock[0] == 1:
        # One unit: the best single buyer (the fast path of every single-product market).
        best = max(range(len(weights)), key=lambda i: weights[i][0], default=None)
        if best is None or weights[best][0] <= 0:
            return 0.0, []
        return weights[best][0], [(best, 0)]
    graph = nx.Graph()
    for i, row in enumerate(weights):
        for p, w in enumerate(row):
            if w <= 0:
                continue
            for unit in range(stock[p]):
                graph.add_edge(("b", i), ("u", p, unit), weight=cents(w))
    matching = nx.max_weight_matching(graph, maxcardinality=False)
    pairs = []
    for a, b in matching:
        buyer, unit = (a, b) if a[0] == "b" else (b, a)
        pairs.append((buyer[1], unit[1]))
    pairs.sort()
    total = dollars(sum(cents(weights[i][p]) for i, p in pairs))
    return total, pairs


def realised_gains(
    deals: Sequence[tuple[int, int]],
    valuations: Sequence[Sequence[float]],
    costs: Sequence[float],
) -> float:
    """Gains from trade of the closed (buyer, product) deals."""
    weights = gains(valuations, costs)
    return dollars(sum(cents(weights[i][p]) for i, p in deals))


def matching_quality(
    deals: Sequence[tuple[int, int]],
    valuations: Sequence[Sequence[float]],
    costs: Sequence[float],
    stock: Sequence[int],
) -> float | None:
    """Realised gains over the optimal assignment's gains; None when no trade can gain."""
    best, _ = optimal_assignment(valuations, costs, stock)
    if best <= 0:
        return None
    return realised_gains(deals, valuations, costs) / best


def optimal_pair_share(
    deals: Sequence[tuple[int, int]],
    valuations: Sequence[Sequence[float]],
    costs: Sequence[float],
    stock: Sequence[int],
) -> float | None:
    """Share of deals on pairs that belong to some optimal assignment; None without deals."""
    if not deals:
        return None
    return sum(on_optimal_assignment(i, p, valuations, costs, stock) for i, p in deals) / len(deals)


def on_optimal_assignment(
    buyer: int,
    product: int,
    valuations: Sequence[Sequence[float]],
    costs: Sequence[float],
    stock: Sequence[int],
) -> bool:
    """Whether some optimal assignment pairs ``buyer`` with ``product`` (ties included).

    Force the pair, solve the rest of the market, and compare with the unconstrained optimum.
    """
    weight = gains(valuations, costs)[buyer][product]
    if weight <= 0:
        return False
    best, _ = optimal_assignment(valuations, costs, stock)
    others = [row if i != buyer else [0.0] * len(row) for i, row in enumerate(valuations)]
    rest_stock = [s - (p == product) for p, s in enumerate(stock)]
    rest, _ = optimal_assignment(others, costs, rest_stock)
    return cents(weight + rest) == cents(best)
