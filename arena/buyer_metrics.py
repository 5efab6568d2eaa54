"""Section 13's buyer-side metrics: what opening bids reveal, and how each buyer type fares.

Per-episode values follow :mod:`arena.metrics` (None where a metric does not apply); per-buyer
values are (buyer type, value) pairs, the buyer type being the slot's agent spec string, and
their estimates are grouped by type. Error episodes count for nothing (Section 4.1).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from arena.estimates import Estimate, by_buyer_type, counted, estimate, mean_over
from arena.money import cents
from arena.records import EpisodeRecord
from arena.rewards import buyer_surplus_ratio
from arena.seats import seat_role


def is_deal(record: EpisodeRecord) -> bool:
    """The episode closed in the deal branch of equation (1) (Section 3.2)."""
    return record.result.outcome == "deal"


# First-offer transparency (Section 13.1, Table 11) --------------------------------------------


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


# Buyer types (Section 13.2, Table 12): one entry per buyer slot or per closing buyer -----


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


def episode_buyer_violation(record: EpisodeRecord) -> float:
    """1 if a buyer's violation ended the episode (Sec 3.2; seed 003: a bid above the budget)."""
    by = record.result.violation_by
    return float(by is not None and seat_role(by) == "buyer")


def episode_buyer_side_reward(record: EpisodeRecord) -> float:
    """The buyer side's reward: the mean buyer reward over all slots (buyers without a deal
    count 0, a penalised violator -1; Section 13.2 rewards)."""
    rewards = record.result.buyer_rewards
    return math.fsum(rewards) / len(rewards)


# Estimates -----------------------------------------------------------------------------------


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


def buyer_reward(records: Iterable[EpisodeRecord]) -> Estimate:
    """Mean buyer reward over closing buyers of deal episodes (Sec 13.2; seed 003)."""
    return estimate(v for r in counted(records) for v in episode_buyer_rewards(r))
