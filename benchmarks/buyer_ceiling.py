"""How much a buyer can gain against the scripted sellers: scripted buyer policies, each in every
buyer seat, scored as a co-evolution buyer is (the buyer side's reward, the mean over its seats).

    python benchmarks/buyer_ceiling.py                         # the default grid of time buyers
    python benchmarks/buyer_ceiling.py "scripted:time?ladder=9&e=2" --episodes 800

One line per buyer spec: its side reward against each seller (``--sellers``) on the preset's
held-out products (``split = "test"``, the same scenarios for every spec: paired), and their
mean (a co-evolution buyer's paired gain is over the scripted sellers, equally weighted). The
last lines give the best single spec and the best spec per seller: a buyer that tells the
sellers apart (from the offers it sees) can reach the second; one policy for every seller, the
first. docs/training.md quotes it for the share steer's buyers ("Where the share buyer's gain
stops"): a trained buyer that picks one share whatever the seller does is bounded by the first.
"""

from __future__ import annotations

import argparse
import statistics

from tournaments.evaluate import EvalConfig, evaluate

SELLERS = ("scripted:prober", "scripted:satisficer")
"""The scripted sellers of the co-evolution league (its buyers' paired gains are over these)."""
GRID = tuple(
    f"scripted:time?ladder=9&e={e}&accept={accept}" for e in (0.5, 1, 2, 4) for accept in (0, 0.6)
)
"""Time buyers on the share ladder: Boulware to Conceder, with and without taking an offer at
or below 60% of the budget at once."""


def side_reward(buyer: str, seller: str, args: argparse.Namespace) -> float:
    """The buyer side's mean reward (over seats, then episodes) with ``buyer`` in every seat."""
    config = EvalConfig(
        seller=seller,
        buyers=(buyer,),
        preset=args.preset,
        overrides=(("buyer_reward", args.buyer_reward),),
        episodes=args.episodes,
        seed=args.seed,
        split="test",
    )
    records = evaluate(config).records
    return statistics.fmean(statistics.fmean(r.result.buyer_rewards) for r in records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("buyers", nargs="*", default=list(GRID), help="scripted buyer specs")
    parser.add_argument("--sellers", default=",".join(SELLERS), help="comma-separated")
    parser.add_argument("--preset", default="in-distribution")
    parser.add_argument("--buyer-reward", default="budget_surplus")
    parser.add_argument("--episodes", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sellers = [s.strip() for s in args.sellers.split(",") if s.strip()]
    table = {b: [side_reward(b, s, args) for s in sellers] for b in args.buyers}
    width = max(len(b) for b in table)
    head = "  ".join(f"{s.removeprefix('scripted:'):>11}" for s in sellers)
    print(f"{'buyer (every seat)':{width}}  {head}  {'mean':>7}")
    for buyer, row in table.items():
        cells = "  ".join(f"{r:+11.3f}" for r in row)
        print(f"{buyer:{width}}  {cells}  {statistics.fmean(row):+7.3f}")
    best = max(table, key=lambda b: statistics.fmean(table[b]))
    print(f"best single spec: {best} {statistics.fmean(table[best]):+.3f}")
    per_seller = [max(table[b][k] for b in table) for k in range(len(sellers))]
    picks = [max(table, key=lambda b, k=k: table[b][k]) for k in range(len(sellers))]
    print(
        f"best spec per seller: {statistics.fmean(per_seller):+.3f} ("
        + ", ".join(f"{s}: {p}" for s, p in zip(sellers, picks, strict=True))
        + ")"
    )


if __name__ == "__main__":
    main()
