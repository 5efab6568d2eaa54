"""The paper's evaluation metrics as pure functions over stored episode records.

Two layers, kept apart so every number can be traced to one episode:

- ``episode_*`` functions read one :class:`EpisodeRecord` and return the episode's value, or
  ``None`` when the metric does not apply to it (a deal-only metric on a no-deal episode).
- Aggregators named after the paper's metrics (``reward``, ``deal_rate``, ...) average those
  values over a list of records into an :class:`Estimate` (mean, standard error, sample count).

Episodes whose outcome is ``"error"`` (a back-end failure, not a decision of the agent) count for
no metric: the paper reports over "successfully-parsed" episodes (Section 4.1).
:func:`summarize` composes everything into the JSON ``metrics`` object of a run.

Markets with several products or units can close several deals per episode
(``record.result.deals``); per-deal quantities are averaged within the episode, so a
single-product market is exactly the case of one deal. docs/metrics.md lists every definition.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from arena.matching import matching_quality as _matching_quality
from arena.matching import optimal_pair_share as _optimal_pair_share
from arena.money import cents
from arena.records import Deal, EpisodeRecord
from arena.rewards import buyer_surplus_ratio, seller_surplus_ratio
from arena.rules import Violation
from arena.scenarios import Scenario

TABLE1_COLUMNS: list[tuple[str, str]] = [
    ("reward", "Reward"),
    ("surplus_extraction_ratio", "Seller Surplus Extraction Ratio"),
    ("deal_rate", "Deal Rate"),
    ("distinct_buyers_engaged", "Distinct Buyers Engaged"),
    ("deal_on_top_buyer_rate", "Deal on Top Buyer Rate"),
    ("sell_below_cost_error_rate", "Sell-Below-Cost Error Rate"),
]
"""(summary key, header) of the Table-1 row the CLI prints, in the paper's column order."""

MULTI_PRODUCT_COLUMNS: list[tuple[str, str]] = [
    ("matching_quality", "Matching Quality"),
    ("optimal_pair_share", "Optimal Pair Share"),
    ("deals_per_episode", "Deals per Episode"),
]
"""Extra columns the CLI prints for markets with several products (issue 6)."""

VIOLATION_KINDS: tuple[str, ...] = tuple(v.value for v in Violation)
"""Every violation kind the rules can record; ``violation_rate_by_kind`` always has these keys."""


@dataclass(frozen=True)
class Estimate:
    """A sample mean with its standard error (sample std with ddof=1 over sqrt(n))."""

    mean: float
    se: float
    n: int

    def as_dict(self) -> dict[str, Any]:
        return {"mean": self.mean, "se": self.se, "n": self.n}


def estimate(values: Iterable[float]) -> Estimate:
    """Mean and standard error of ``values``; nan for no values, se 0.0 for one (Table 9)."""
    xs = [float(x) for x in values]
    n = len(xs)
    if n == 0:
        return Estimate(math.nan, math.nan, 0)
    mean = math.fsum(xs) / n
    if n == 1:
        return Estimate(mean, 0.0, 1)
    var = math.fsum((x - mean) ** 2 for x in xs) / (n - 1)
    return Estimate(mean, math.sqrt(var / n), n)


def counted(records: Iterable[EpisodeRecord]) -> list[EpisodeRecord]:
    """The successfully-parsed episodes: every outcome but "error" (Section 4.1)."""
    return [r for r in records if r.result.outcome != "error"]


def error_count(records: Iterable[EpisodeRecord]) -> int:
    """How many episodes ended in a back-end error and were left out of every metric."""
    return sum(r.result.outcome == "error" for r in records)


def mean_over(
    records: Iterable[EpisodeRecord], per_episode: Callable[[EpisodeRecord], float | None]
) -> Estimate:
    """Estimate of ``per_episode`` over counted episodes where it applies (is not None)."""
    values = (per_episode(r) for r in counted(records))
    return estimate(v for v in values if v is not None)


def is_deal(record: EpisodeRecord) -> bool:
    """The episode closed in the deal branch of equation (1) (Section 3.2)."""
    return record.result.outcome == "deal"


def buyer_rank(scenario: Scenario, buyer: int, product: int = 0) -> int:
    """Rank of ``buyer`` by hidden valuation of ``product``: 1 + buyers strictly higher (Sec 6.3).

    Ties share the better rank, so rank 1 means no other buyer has a strictly higher budget.
    """
    own = cents(scenario.valuations[buyer][product])
    return 1 + sum(cents(v[product]) > own for v in scenario.valuations)


def _deal_ratio(record: EpisodeRecord, deal: Deal) -> float:
    product = record.scenario.products[deal.product]
    return seller_surplus_ratio(deal.price, product.cost, product.list_price)


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


# Per-episode values -------------------------------------------------------------------------


def episode_reward(record: EpisodeRecord) -> float:
    """Seller reward R of equation (1): ratio on a deal, 0 without, -1 on violation (Sec 3.2)."""
    return record.result.seller_reward


def episode_surplus_extraction_ratio(record: EpisodeRecord) -> float | None:
    """Deal only: min{1, (P - C)/(P_list - C)}, averaged over the episode's deals (Sec 4.1)."""
    if not is_deal(record):
        return None
    return _mean([_deal_ratio(record, d) for d in record.result.deals])


def episode_deal(record: EpisodeRecord) -> float:
    """1 if the episode closes with a successful deal, else 0 (Sec 4.1 Deal Rate)."""
    return float(is_deal(record))


def episode_distinct_buyers_engaged(record: EpisodeRecord) -> float:
    """Buyers that received at least one targeted seller message (Sec 4.1)."""
    return float(sum(record.result.engaged))


def episode_deal_on_top_buyer(record: EpisodeRecord) -> float | None:
    """Deal only: share of deals closed with a rank-1 buyer of the dealt product (Sec 4.1)."""
    if not is_deal(record):
        return None
    ranks = [buyer_rank(record.scenario, d.buyer, d.product) for d in record.result.deals]
    return _mean([float(rank == 1) for rank in ranks])


def episode_sold_below_cost(record: EpisodeRecord) -> float:
    """1 if the episode ended on a below-cost [SELL]/[DEAL] violation (Sec 4.2, Figure 5)."""
    return float(record.result.violation == Violation.BELOW_COST.value)


def episode_sold_above_cost(record: EpisodeRecord) -> float:
    """1 - the below-cost indicator: the seller respected M >= C (Sec 4.2, Figure 3)."""
    return 1.0 - episode_sold_below_cost(record)


def episode_violation(record: EpisodeRecord) -> float:
    """1 if any instruction violation ended the episode, seller or penalised buyer (Sec 3.2)."""
    return float(record.result.violation is not None)


def episode_violation_of_kind(record: EpisodeRecord, kind: str) -> float:
    """1 if the episode ended on a violation of ``kind`` (Sec 3.2 (i)-(iv) and extensions)."""
    return float(record.result.violation == kind)


def _first_offer_ranking(record: EpisodeRecord) -> tuple[list[int], list[int]] | None:
    """(first bids, budgets) in cents when the episode is eligible for Table 11, else None.

    Eligible: at least two buyers, every buyer recorded a numeric opening bid, all buyers opened
    on the same product, and the budgets for that product have no ties.
    """
    sc = record.scenario
    bids = record.result.first_bids
    if sc.num_buyers < 2 or any(b is None for b in bids):
        return None
    if len(set(sc.opening_products)) != 1:
        return None
    product = sc.opening_products[0]
    budgets = [cents(v[product]) for v in sc.valuations]
    if len(set(budgets)) != len(budgets):
        return None
    return [cents(b) for b in bids if b is not None], budgets


def episode_first_offer_full_rank_match(record: EpisodeRecord) -> float | None:
    """1 if the first-offer ordering equals the budget ordering (Sec 13.1, Table 11).

    Tied first bids have no strict order, so any tie is not a match.
    """
    ranking = _first_offer_ranking(record)
    if ranking is None:
        return None
    bids, budgets = ranking
    if len(set(bids)) != len(bids):
        return 0.0
    by_bid = sorted(range(len(bids)), key=lambda i: bids[i])
    by_budget = sorted(range(len(budgets)), key=lambda i: budgets[i])
    return float(by_bid == by_budget)


def episode_first_offer_top1_match(record: EpisodeRecord) -> float | None:
    """1 if the highest first bid comes from the highest-budget buyer (Sec 13.1, Table 11).

    A tie for the highest first bid is not a match.
    """
    ranking = _first_offer_ranking(record)
    if ranking is None:
        return None
    bids, budgets = ranking
    top_bid = max(bids)
    if bids.count(top_bid) > 1:
        return 0.0
    return float(bids.index(top_bid) == budgets.index(max(budgets)))


def episode_buyer_resamples(record: EpisodeRecord) -> float:
    """Invalid buyer replies re-sampled in the episode, all buyers together (Sec 3.1)."""
    return float(sum(record.result.buyer_resamples))


def episode_deals(record: EpisodeRecord) -> float:
    """Deals closed in the episode: 0 or 1 with one product, up to the stock otherwise."""
    return float(len(record.result.deals))


# Per-buyer values (one entry per buyer slot or per closing buyer) ---------------------------


def _check_lineup(record: EpisodeRecord) -> None:
    if len(record.buyers) != record.scenario.num_buyers:
        raise ValueError(
            f"episode {record.scenario.index} of seed {record.scenario.seed} lists "
            f"{len(record.buyers)} buyer specs for {record.scenario.num_buyers} buyers; "
            "record.buyers must name every buyer slot"
        )


def buyer_first_offer_ratios(record: EpisodeRecord) -> list[tuple[str, float]]:
    """(buyer type, P_first / P_list of the opening product) per buyer with a bid (Sec 13.2)."""
    _check_lineup(record)
    sc = record.scenario
    return [
        (record.buyers[i], bid / sc.products[sc.opening_products[i]].list_price)
        for i, bid in enumerate(record.result.first_bids)
        if bid is not None
    ]


def buyer_surplus_extractions(record: EpisodeRecord) -> list[tuple[str, float]]:
    """Deal only: (buyer type, clip((P_list - P)/(P_list - C), 0, 1)) per deal (Sec 13.2)."""
    _check_lineup(record)
    if not is_deal(record):
        return []
    products = record.scenario.products
    return [
        (
            record.buyers[d.buyer],
            buyer_surplus_ratio(d.price, products[d.product].cost, products[d.product].list_price),
        )
        for d in record.result.deals
    ]


def buyer_closings(record: EpisodeRecord) -> list[tuple[str, float]]:
    """(buyer type, 1 if that buyer closed a deal else 0) per buyer slot (Sec 13.2)."""
    _check_lineup(record)
    closers = {d.buyer for d in record.result.deals} if is_deal(record) else set()
    return [(spec, float(i in closers)) for i, spec in enumerate(record.buyers)]


def episode_buyer_rewards(record: EpisodeRecord) -> list[float]:
    """Deal only: the buyer reward of each closing buyer (Sec 13.2; seed 003)."""
    if not is_deal(record):
        return []
    return [record.result.buyer_rewards[d.buyer] for d in record.result.deals]


def by_buyer_type(
    records: Iterable[EpisodeRecord],
    per_buyer: Callable[[EpisodeRecord], list[tuple[str, float]]],
) -> dict[str, Estimate]:
    """Estimate per buyer type (spec string) of ``per_buyer`` values over counted episodes."""
    groups: dict[str, list[float]] = {}
    for record in counted(records):
        for spec, value in per_buyer(record):
            groups.setdefault(spec, []).append(value)
    return {spec: estimate(groups[spec]) for spec in sorted(groups)}


# Aggregates over records --------------------------------------------------------------------


def reward(records: Iterable[EpisodeRecord]) -> Estimate:
    """Mean seller reward R (Sec 4.1)."""
    return mean_over(records, episode_reward)


def surplus_extraction_ratio(records: Iterable[EpisodeRecord]) -> Estimate:
    """Seller Surplus Extraction Ratio over deal episodes only (Sec 4.1)."""
    return mean_over(records, episode_surplus_extraction_ratio)


def deal_rate(records: Iterable[EpisodeRecord]) -> Estimate:
    """Fraction of successfully-parsed episodes that close with a deal (Sec 4.1)."""
    return mean_over(records, episode_deal)


def distinct_buyers_engaged(records: Iterable[EpisodeRecord]) -> Estimate:
    """Mean count of buyers that received a seller message (Sec 4.1)."""
    return mean_over(records, episode_distinct_buyers_engaged)


def deal_on_top_buyer_rate(records: Iterable[EpisodeRecord]) -> Estimate:
    """Conditional on a deal, fraction closed with the rank-1 buyer by budget (Sec 4.1)."""
    return mean_over(records, episode_deal_on_top_buyer)


def sell_below_cost_error_rate(records: Iterable[EpisodeRecord]) -> Estimate:
    """Fraction of episodes ended by a below-cost violation (Sec 4.2, Figure 5)."""
    return mean_over(records, episode_sold_below_cost)


def sell_above_cost_accuracy(records: Iterable[EpisodeRecord]) -> Estimate:
    """1 - Sell-Below-Cost Error Rate (Sec 4.2, Figure 3)."""
    return mean_over(records, episode_sold_above_cost)


def violation_rate(records: Iterable[EpisodeRecord]) -> Estimate:
    """Fraction of episodes ended by any violation (Sec 3.2)."""
    return mean_over(records, episode_violation)


def violation_rate_by_kind(records: Iterable[EpisodeRecord]) -> dict[str, Estimate]:
    """Violation rate of each kind over all counted episodes (Sec 3.2 (i)-(iv))."""
    records = counted(records)
    seen = {r.result.violation for r in records if r.result.violation is not None}
    kinds = [*VIOLATION_KINDS, *sorted(seen - set(VIOLATION_KINDS))]
    return {kind: estimate(episode_violation_of_kind(r, kind) for r in records) for kind in kinds}


def deal_buyer_rank_distribution(records: Iterable[EpisodeRecord]) -> list[float]:
    """Share of deals closed with buyer rank 1..N, deal episodes only (Sec 6.3, Figure 10).

    N is the largest buyer count among the deal episodes; an empty list means no deals.
    """
    deals = [r for r in counted(records) if is_deal(r)]
    if not deals:
        return []
    counts = [0] * max(r.scenario.num_buyers for r in deals)
    for record in deals:
        for d in record.result.deals:
            counts[buyer_rank(record.scenario, d.buyer, d.product) - 1] += 1
    total = sum(counts)
    return [c / total for c in counts]


def first_offer_full_rank_match(records: Iterable[EpisodeRecord]) -> Estimate:
    """Fraction of eligible episodes whose first-offer order equals the budget order (Sec 13.1)."""
    return mean_over(records, episode_first_offer_full_rank_match)


def first_offer_top1_match(records: Iterable[EpisodeRecord]) -> Estimate:
    """Fraction of eligible episodes whose top first offer is the top budget (Sec 13.1)."""
    return mean_over(records, episode_first_offer_top1_match)


def buyer_first_offer_ratio(records: Iterable[EpisodeRecord]) -> dict[str, Estimate]:
    """First-offer ratio P_first / P_list per buyer type (Sec 13.2, Table 12)."""
    return by_buyer_type(records, buyer_first_offer_ratios)


def buyer_surplus_extraction(records: Iterable[EpisodeRecord]) -> dict[str, Estimate]:
    """Buyer Surplus Extraction (deal only) per type of the deal buyer (Sec 13.2, Table 12)."""
    return by_buyer_type(records, buyer_surplus_extractions)


def deal_rate_by_buyer_type(records: Iterable[EpisodeRecord]) -> dict[str, Estimate]:
    """Fraction of buyers of each type that close a deal (Sec 13.2, Table 12)."""
    return by_buyer_type(records, buyer_closings)


def buyer_resample_rate(records: Iterable[EpisodeRecord]) -> Estimate:
    """Mean re-sampled buyer replies per episode (Sec 3.1 buyer interception)."""
    return mean_over(records, episode_buyer_resamples)


def buyer_reward(records: Iterable[EpisodeRecord]) -> Estimate:
    """Mean buyer reward over closing buyers of deal episodes (Sec 13.2; seed 003)."""
    return estimate(v for r in counted(records) for v in episode_buyer_rewards(r))


def deals_per_episode(records: Iterable[EpisodeRecord]) -> Estimate:
    """Mean number of deals per episode (1 at most with one product and one unit)."""
    return mean_over(records, episode_deals)


def _deal_pairs(record: EpisodeRecord) -> list[tuple[int, int]]:
    return [(d.buyer, d.product) for d in record.result.deals]


def episode_matching_quality(record: EpisodeRecord) -> float | None:
    """Realised gains from trade over the optimal assignment's gains (issue 6; seed 004)."""
    sc = record.scenario
    return _matching_quality(_deal_pairs(record), sc.valuations, sc.costs, sc.stock)


def episode_optimal_pair_share(record: EpisodeRecord) -> float | None:
    """Share of the episode's deals on pairs of an optimal assignment (deal only; seed 004)."""
    sc = record.scenario
    return _optimal_pair_share(_deal_pairs(record), sc.valuations, sc.costs, sc.stock)


def episode_seller_surplus_captured(record: EpisodeRecord) -> float | None:
    """Seller's share of the realised gains from trade, sum(P - C)/sum(v - C) (deal only)."""
    deals = record.result.deals
    sc = record.scenario
    total = sum(sc.valuations[d.buyer][d.product] - sc.costs[d.product] for d in deals)
    if not deals or total <= 0:
        return None
    return sum(d.price - sc.costs[d.product] for d in deals) / total


def episode_turns_per_deal(record: EpisodeRecord) -> float | None:
    """Seller messages spent per deal closed (deal only; seed 004's attention budget)."""
    deals = record.result.deals
    return record.result.seller_turns / len(deals) if deals else None


def matching_quality(records: Iterable[EpisodeRecord]) -> Estimate:
    """Mean matching quality over episodes where some trade can gain (issue 6)."""
    return mean_over(records, episode_matching_quality)


def optimal_pair_share(records: Iterable[EpisodeRecord]) -> Estimate:
    """Mean share of deals on optimal-assignment pairs over deal episodes (issue 6)."""
    return mean_over(records, episode_optimal_pair_share)


def seller_surplus_captured(records: Iterable[EpisodeRecord]) -> Estimate:
    """Mean seller share of realised gains over deal episodes (issue 6)."""
    return mean_over(records, episode_seller_surplus_captured)


def turns_per_deal(records: Iterable[EpisodeRecord]) -> Estimate:
    """Mean seller messages per deal over deal episodes (issue 6)."""
    return mean_over(records, episode_turns_per_deal)


def summarize(records: Iterable[EpisodeRecord]) -> dict[str, Any]:
    """The JSON ``metrics`` object of a run: every metric above as {"mean", "se", "n"}."""
    records = list(records)
    first_offer = buyer_first_offer_ratio(records)
    surplus = buyer_surplus_extraction(records)
    closing = deal_rate_by_buyer_type(records)
    empty = estimate(())
    types = sorted(set(first_offer) | set(surplus) | set(closing))
    return {
        "reward": reward(records).as_dict(),
        "surplus_extraction_ratio": surplus_extraction_ratio(records).as_dict(),
        "deal_rate": deal_rate(records).as_dict(),
        "distinct_buyers_engaged": distinct_buyers_engaged(records).as_dict(),
        "deal_on_top_buyer_rate": deal_on_top_buyer_rate(records).as_dict(),
        "sell_below_cost_error_rate": sell_below_cost_error_rate(records).as_dict(),
        "sell_above_cost_accuracy": sell_above_cost_accuracy(records).as_dict(),
        "violation_rate": violation_rate(records).as_dict(),
        "first_offer_full_rank_match": first_offer_full_rank_match(records).as_dict(),
        "first_offer_top1_match": first_offer_top1_match(records).as_dict(),
        "buyer_resamples": buyer_resample_rate(records).as_dict(),
        "deals_per_episode": deals_per_episode(records).as_dict(),
        "matching_quality": matching_quality(records).as_dict(),
        "optimal_pair_share": optimal_pair_share(records).as_dict(),
        "seller_surplus_captured": seller_surplus_captured(records).as_dict(),
        "turns_per_deal": turns_per_deal(records).as_dict(),
        "violation_rate_by_kind": {
            kind: est.as_dict() for kind, est in violation_rate_by_kind(records).items()
        },
        "deal_buyer_rank_distribution": deal_buyer_rank_distribution(records),
        "by_buyer_type": {
            spec: {
                "first_offer_ratio": first_offer.get(spec, empty).as_dict(),
                "buyer_surplus_extraction": surplus.get(spec, empty).as_dict(),
                "deal_rate": closing.get(spec, empty).as_dict(),
            }
            for spec in types
        },
        "errors": error_count(records),
    }
