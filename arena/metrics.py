"""The paper's evaluation metrics as pure functions over stored episode records.

Two layers, kept apart so every number can be traced to one episode:

- ``episode_*`` functions read one :class:`EpisodeRecord` and return the episode's value, or
  ``None`` when the metric does not apply to it (a deal-only metric on a no-deal episode).
- :data:`METRICS` is the one registry of the per-episode metrics: name, function, headers,
  paper reference, deal-only flag and the tables that show it (:func:`group`). A metric's
  ``over(records)`` averages its values into an :class:`Estimate` (mean, standard error, sample
  count): ``METRICS["deal_rate"].over(records)``. ``summarize``, the leaderboards, the CLI
  columns, the league's per-step logging, the reports and the browser all read it, and nothing
  else aggregates a registered metric.

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
from dataclasses import dataclass, field
from typing import Any

from arena.buyer_metrics import (
    buyer_first_offer_ratio,
    buyer_surplus_extraction,
    deal_rate_by_buyer_type,
    episode_first_offer_full_rank_match,
    episode_first_offer_top1_match,
    is_deal,
)
from arena.estimates import Estimate, counted, error_count, estimate, mean_over
from arena.matching import matching_quality as _matching_quality
from arena.matching import optimal_pair_share as _optimal_pair_share
from arena.money import cents
from arena.records import Deal, EpisodeRecord
from arena.rewards import seller_surplus_ratio
from arena.rules import Violation
from arena.scenarios import Scenario

VIOLATION_KINDS: tuple[str, ...] = tuple(v.value for v in Violation)
"""Every violation kind the rules can record; ``violation_rate_by_kind`` always has these keys."""


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


def episode_buyer_resamples(record: EpisodeRecord) -> float:
    """Invalid buyer replies re-sampled in the episode, all buyers together (Sec 3.1)."""
    return float(sum(record.result.buyer_resamples))


def episode_deals(record: EpisodeRecord) -> float:
    """Deals closed in the episode: 0 or 1 with one product, up to the stock otherwise."""
    return float(len(record.result.deals))


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


def episode_seller_surplus_share(record: EpisodeRecord) -> float | None:
    """The seller's share of the realised gains from trade over the episode's deals,
    clip(sum(P - C) / sum(B - C), 0, 1) with B the dealt buyer's budget (seed 004); None without
    a deal, or when the deals realise no gains (every dealt budget at or below cost)."""
    deals = record.result.deals
    sc = record.scenario
    total = sum(sc.valuations[d.buyer][d.product] - sc.costs[d.product] for d in deals)
    if not deals or cents(total) <= 0:
        return None
    share = sum(d.price - sc.costs[d.product] for d in deals) / total
    return min(1.0, max(0.0, share))


def episode_cross_score(record: EpisodeRecord) -> float | None:
    """The seller's score against the buyer side in [0, 1], the cross-role rating's game
    (docs/tournaments.md); None for an "error" episode.

    A seller violation scores 0 and a (penalised) buyer violation 1; a no-deal is a draw, 0.5; a
    deal scores the seller's surplus share (:func:`episode_seller_surplus_share`), 1 when the
    deals realised no gains (the seller took all there was).
    """
    res = record.result
    if res.outcome == "error":
        return None
    if res.violation_by is not None:
        return 0.0 if res.violation_by == "seller" else 1.0
    if not res.deals:
        return 0.5
    share = episode_seller_surplus_share(record)
    return 1.0 if share is None else share


def episode_turns_per_deal(record: EpisodeRecord) -> float | None:
    """Seller messages spent per deal closed (deal only; seed 004's attention budget)."""
    deals = record.result.deals
    return record.result.seller_turns / len(deals) if deals else None


# The registry -------------------------------------------------------------------------------

TABLE1 = "table1"
"""The six columns of the paper's Table 1, in its order (``arena eval`` prints them)."""
LEADERBOARD = "leaderboard"
"""Seller metrics on leaderboard rows (``arena ratings``, reports)."""
MULTI_PRODUCT = "multi-product"
"""Added to the eval table and leaderboard rows when a market sells several products."""
TRAINING = "training"
"""Logged for every training step of a league, over the step's episodes (Figures 5-9)."""


@dataclass(frozen=True)
class Metric:
    """One per-episode metric and everything a table, a log or a plot needs to show it."""

    name: str
    """The key in ``summarize``, leaderboard rows and training logs."""
    per_episode: Callable[[EpisodeRecord], float | None]
    header: str
    """The paper's name of the metric."""
    short: str
    """A narrow column header; "" keeps the metric out of compact tables."""
    reference: str
    """Where the paper (or the seed text) defines it."""
    deal_only: bool = False
    """Defined on episodes that closed a deal only (None elsewhere)."""
    groups: frozenset[str] = field(default_factory=frozenset)
    figure: int = 0
    """The paper's training-curve figure of the metric (0: none)."""
    phase: int = 0
    """The training phase whose story the metric tells (Sec 4.3): 1 cost-floor internalisation
    (it falls), 2 concentrated closing, 3 surplus and rank-1 routing (they rise); 0: none."""

    def over(self, records: Iterable[EpisodeRecord]) -> Estimate:
        """The metric's estimate over the counted episodes where it applies."""
        return mean_over(records, self.per_episode)


def _metric(
    name: str,
    fn: Callable[[EpisodeRecord], float | None],
    header: str,
    short: str,
    reference: str,
    *groups: str,
    deal_only: bool = False,
    figure: int = 0,
    phase: int = 0,
) -> Metric:
    return Metric(name, fn, header, short, reference, deal_only, frozenset(groups), figure, phase)


_SELLER = (TABLE1, LEADERBOARD)
_LOGGED = (TABLE1, LEADERBOARD, TRAINING)
METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        _metric("reward", episode_reward, "Reward", "Reward", "Sec 3.2, 4.1", *_SELLER, figure=4,
                phase=2),
        _metric("surplus_extraction_ratio", episode_surplus_extraction_ratio,
                "Seller Surplus Extraction Ratio", "Surplus Extr.", "Sec 4.1", *_LOGGED,
                deal_only=True, figure=7, phase=3),
        _metric("deal_rate", episode_deal, "Deal Rate", "Deal Rate", "Sec 4.1", *_LOGGED,
                figure=6, phase=2),
        _metric("distinct_buyers_engaged", episode_distinct_buyers_engaged,
                "Distinct Buyers Engaged", "", "Sec 4.1", *_LOGGED, figure=8, phase=3),
        _metric("deal_on_top_buyer_rate", episode_deal_on_top_buyer, "Deal on Top Buyer Rate",
                "Top Buyer", "Sec 4.1, 6.3", *_LOGGED, deal_only=True, figure=9, phase=3),
        _metric("sell_below_cost_error_rate", episode_sold_below_cost,
                "Sell-Below-Cost Error Rate", "Below Cost", "Sec 4.2", *_LOGGED, figure=5,
                phase=1),
        _metric("sell_above_cost_accuracy", episode_sold_above_cost, "Sell-Above-Cost Accuracy",
                "", "Sec 4.2, Fig. 3", LEADERBOARD),
        _metric("violation_rate", episode_violation, "Violation Rate", "", "Sec 3.2", TRAINING,
                phase=1),
        _metric("first_offer_full_rank_match", episode_first_offer_full_rank_match,
                "First-Offer Full Rank Match", "", "Sec 13.1, Table 11"),
        _metric("first_offer_top1_match", episode_first_offer_top1_match,
                "First-Offer Top-1 Match", "", "Sec 13.1, Table 11"),
        _metric("buyer_resamples_per_episode", episode_buyer_resamples,
                "Buyer Re-samples per Episode", "", "Sec 3.1"),
        _metric("matching_quality", episode_matching_quality, "Matching Quality", "Matching",
                "seed 004", MULTI_PRODUCT),
        _metric("optimal_pair_share", episode_optimal_pair_share, "Optimal Pair Share",
                "Opt. Pairs", "seed 004", MULTI_PRODUCT, deal_only=True),
        _metric("deals_per_episode", episode_deals, "Deals per Episode", "Deals/Ep", "seed 004",
                MULTI_PRODUCT),
        _metric("seller_surplus_share", episode_seller_surplus_share, "Seller Surplus Share",
                "", "seed 004", deal_only=True),
        _metric("turns_per_deal", episode_turns_per_deal, "Turns per Deal", "", "seed 004",
                deal_only=True),
    )
}  # fmt: skip
"""Every per-episode metric, in the order of ``summarize`` (Table 1 first); a name is the key
of one quantity everywhere (JSON, logs, stored rows, docs/metrics.md)."""


def group(name: str) -> tuple[Metric, ...]:
    """The registered metrics of one group (:data:`TABLE1`, ...), in registry order."""
    return tuple(m for m in METRICS.values() if name in m.groups)


# Aggregates over records --------------------------------------------------------------------


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


def summarize(records: Iterable[EpisodeRecord]) -> dict[str, Any]:
    """The JSON ``metrics`` object of a run: every registered metric as {"mean", "se", "n"},
    then the violation kinds, the deal rank distribution, the buyer types and the error count."""
    records = list(records)
    first_offer = buyer_first_offer_ratio(records)
    surplus = buyer_surplus_extraction(records)
    closing = deal_rate_by_buyer_type(records)
    empty = estimate(())
    types = sorted(set(first_offer) | set(surplus) | set(closing))
    summary: dict[str, Any] = {m.name: m.over(records).as_dict() for m in METRICS.values()}
    summary["violation_rate_by_kind"] = {
        kind: est.as_dict() for kind, est in violation_rate_by_kind(records).items()
    }
    summary["deal_buyer_rank_distribution"] = deal_buyer_rank_distribution(records)
    summary["by_buyer_type"] = {
        spec: {
            "first_offer_ratio": first_offer.get(spec, empty).as_dict(),
            "buyer_surplus_extraction": surplus.get(spec, empty).as_dict(),
            "deal_rate": closing.get(spec, empty).as_dict(),
        }
        for spec in types
    }
    summary["errors"] = error_count(records)
    return summary
