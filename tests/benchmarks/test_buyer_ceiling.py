"""benchmarks/buyer_ceiling.py scores a scripted buyer as the co-evolution league scores its
buyer (the side's mean over seats, on held-out products, the same scenarios for every spec), and
its two ceilings are what they say: one spec for every seller, or the best spec per seller."""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

from tests.benchmarks import BENCHMARKS, load_script
from tournaments.evaluate import EvalConfig, evaluate

SCRIPT = BENCHMARKS / "buyer_ceiling.py"
ARGS = argparse.Namespace(
    preset="in-distribution", buyer_reward="budget_surplus", episodes=24, seed=3
)


def test_the_side_reward_is_the_mean_over_seats_of_held_out_episodes_under_the_reward_asked():
    buyer, seller = "scripted:time?ladder=9&e=2", "scripted:satisficer"
    config = EvalConfig(
        seller=seller, buyers=(buyer,), overrides=(("buyer_reward", "budget_surplus"),),
        episodes=24, seed=3, split="test",
    )  # fmt: skip
    records = evaluate(config).records
    expected = statistics.fmean(statistics.fmean(r.result.buyer_rewards) for r in records)
    assert load_script("buyer_ceiling").side_reward(buyer, seller, ARGS) == expected
    other = argparse.Namespace(**{**vars(ARGS), "buyer_reward": "surplus_extraction"})
    assert (
        load_script("buyer_ceiling").side_reward(buyer, seller, other) != expected
    )  # the reward asked


def test_the_best_spec_per_seller_is_at_least_the_best_single_spec():
    buyers = ["scripted:time?ladder=9&e=0.5", "scripted:time?ladder=9&e=2"]
    out = subprocess.run(
        [sys.executable, str(SCRIPT), *buyers, "--episodes", "24", "--seed", "3"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    rows = {
        line.split()[0]: [float(x) for x in line.split()[1:]]
        for line in out.splitlines()
        if line.startswith("scripted:")
    }
    assert set(rows) == set(buyers)
    assert all(abs(row[2] - statistics.fmean(row[:2])) < 1e-3 for row in rows.values())
    single = float(out.split("best single spec: ")[1].split()[1])
    per_seller = float(out.split("best spec per seller: ")[1].split()[0])
    assert single == max(row[2] for row in rows.values())
    assert (
        abs(per_seller - statistics.fmean(max(r[k] for r in rows.values()) for k in (0, 1))) < 1e-3
    )
    assert per_seller >= single
