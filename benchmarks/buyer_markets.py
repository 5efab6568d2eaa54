"""A buyer spec's held-out reward per seat and deal rate against scripted sellers, per market.

Run: python benchmarks/buyer_markets.py BUYER [BUYER ...] [--preset in-distribution]
     [--seller scripted:prober] [--episodes 96]

Each buyer fills every buyer seat and plays the same held-out scenarios (``split = "test"``)
against each seller, with the buyer reward ``budget_surplus`` (docs/metrics.md); the seller's
reward (surplus extraction) is printed beside it. docs/training.md
quotes it for the scripted teachers of the buyer league (b6) and for the hand-off's transfer
table (a bilateral buyer checkpoint in the three-buyer market, before and after the opening fix):
a checkpoint is the spec its league registered, e.g.
``hf:runs/bases/<hash>/warm-start?lora=runs/buyer-seed0/gen-003-buyer/adapter&batch_size=96&max_tokens=64&prompt=compact&steer=protocol``.
"""

from __future__ import annotations

import argparse
import statistics

from tournaments.evaluate import EvalConfig, evaluate

SELLERS = ("scripted:prober", "scripted:time?e=0.5", "scripted:satisficer")


def figures(preset: str, seller: str, buyer: str, episodes: int) -> tuple[float, float, float]:
    """(mean buyer reward per seat, deal rate, seller reward) of ``buyer`` in every seat against
    ``seller``: the seller's figure says what the buyer leaves a seller (the hand-off's room)."""
    records = []
    config = EvalConfig(seller=seller, buyers=(buyer,), preset=preset, episodes=episodes,
                        split="test", overrides=(("buyer_reward", "budget_surplus"),))  # fmt: skip
    evaluate(config, records.append)
    reward = statistics.mean(statistics.mean(r.result.buyer_rewards) for r in records)
    deals = statistics.mean(r.result.outcome == "deal" for r in records)
    return reward, deals, statistics.mean(r.result.seller_reward for r in records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("buyers", nargs="+", help="buyer agent specs")
    parser.add_argument("--preset", action="append", help="market preset (repeatable)")
    parser.add_argument("--seller", action="append", help=f"seller spec (default: {SELLERS})")
    parser.add_argument("--episodes", type=int, default=96)
    args = parser.parse_args()
    for preset in args.preset or ["in-distribution"]:
        for seller in args.seller or SELLERS:
            for buyer in args.buyers:
                reward, deals, earned = figures(preset, seller, buyer, args.episodes)
                print(f"{preset:16} {seller:22} {buyer[-60:]:60} reward {reward:+.3f} "
                      f"deal {deals:.2f} seller {earned:+.3f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
