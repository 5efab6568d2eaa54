"""How a league's buyers bid after their opening, counted from the stored episodes.

    python benchmarks/buyer_bids.py --db runs/c13-s0.db --league coevolution-seed0
    python benchmarks/buyer_bids.py --db runs/c13-s0.db --league coevolution-seed0 \
        --seller scripted:satisficer

One line per buyer agent that filled every buyer seat against the seller (``--seller``, default
``scripted:prober``): episodes, its replies after each seat's first message by kind, the
malformed ones (re-sampled), the median bid over the seat's budget, the bids at or above the
seller's cost of the product, the bids on the budget's ladder (a whole tenth of the budget, 10%
to 100%, floored to cents: the rungs of the ``ladder`` agent option), the deal rate and mean
deal price over list, the median bid over the budget by reply (the first reply after the
seat's opening, the second, ...: whether the buyer raises its bid as the seller's messages run
out, as ``scripted:time`` does), and the buyer side's mean reward against that seller (the mean
over the seats, as ``bench_learning.py --role buyer`` pools it over every seller).
docs/training.md quotes it for c13 and c14 (why the trained buyers take the list price), for the
ladder runs (b10, c24: whether the model copies a rung), for c42-c43 (which reply the time buyer
wins with) and for c62-c64 (where the buyer's headroom is: its side reward seller by seller).
"""

from __future__ import annotations

import argparse
import statistics
from collections import Counter
from pathlib import Path

from arena.buyer_metrics import episode_buyer_side_reward
from arena.money import MAX_LADDER_RUNGS, budget_ladder, cents, floor_cents
from arena.records import EpisodeRecord
from arena.seats import SELLER, buyer_index
from leagues.state import league_records
from tournaments.store import Store


def bid_figures(episodes: list[EpisodeRecord]) -> dict[str, object]:
    """Counts over the buyers' replies after their first message (see the module docstring)."""
    kinds: Counter[str] = Counter()
    malformed, ratios, at_cost, on_ladder = 0, [], 0, 0
    by_reply: dict[int, list[float]] = {}
    for record in episodes:
        replies: Counter[str] = Counter()  # valid messages per seat, its opening the 0th
        for turn in record.result.turns:
            if turn.agent == SELLER:
                continue
            if not replies[turn.agent]:  # the seat's opening (regulated), not a choice
                replies[turn.agent] += turn.valid
                continue
            if not turn.valid:
                malformed += 1
                continue
            reply = replies[turn.agent]
            replies[turn.agent] += 1
            kinds[turn.kind or "?"] += 1
            if turn.kind == "BUY" and turn.price is not None:
                product = turn.product or 0
                budget = record.scenario.valuations[buyer_index(turn.agent)][product]
                ratios.append(turn.price / budget)
                by_reply.setdefault(reply, []).append(turn.price / budget)
                at_cost += turn.price >= record.scenario.costs[product]
                rungs = (floor_cents(budget), *budget_ladder(budget, MAX_LADDER_RUNGS))
                on_ladder += cents(turn.price) in {cents(p) for p in rungs}
    deals = [r for r in episodes if r.result.deals]
    over_list = [
        d.price / r.scenario.products[d.product].list_price for r in deals for d in r.result.deals
    ]
    return {
        "episodes": len(episodes),
        "replies": dict(kinds),
        "malformed": malformed,
        "bid_over_budget_median": statistics.median(ratios) if ratios else None,
        "bids_at_or_above_cost": at_cost,
        "bids_on_the_ladder": on_ladder,
        "bids": len(ratios),
        "deal_rate": len(deals) / len(episodes) if episodes else None,
        "deal_price_over_list": statistics.mean(over_list) if over_list else None,
        "bid_over_budget_by_reply": [statistics.median(by_reply[i]) for i in sorted(by_reply)],
        "side_reward": statistics.fmean(map(episode_buyer_side_reward, episodes))
        if episodes
        else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--league", required=True)
    parser.add_argument("--seller", default="scripted:prober")
    args = parser.parse_args()
    with Store.open(args.db, read_only=True) as store:
        records, _ = league_records(store, args.league)
        labels = {a["spec"]: a["label"] for a in store.db.query(
            "SELECT spec, label FROM agents WHERE role = 'buyer'")}  # fmt: skip
    groups: dict[str, list[EpisodeRecord]] = {}
    for record in records:
        if record.seller == args.seller and len(set(record.buyers)) == 1:
            groups.setdefault(record.buyers[0], []).append(record)
    for spec, episodes in groups.items():
        f = bid_figures(episodes)
        median, price = f["bid_over_budget_median"], f["deal_price_over_list"]
        print(
            f"{labels.get(spec, spec)[:40]:40s} episodes {f['episodes']}, replies {f['replies']}, "
            f"malformed {f['malformed']}, bid/budget median "
            f"{'-' if median is None else f'{median:.2f}'}, bids >= cost "
            f"{f['bids_at_or_above_cost']} of {f['bids']}, on the ladder "
            f"{f['bids_on_the_ladder']}, deal rate {f['deal_rate']:.2f} at "
            f"{'-' if price is None else f'{price:.2f}'} of list, bid/budget median by reply "
            + " ".join(f"{m:.2f}" for m in f["bid_over_budget_by_reply"])
            + f", side reward {f['side_reward']:+.3f}"
        )


if __name__ == "__main__":
    main()
