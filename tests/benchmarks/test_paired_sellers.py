"""benchmarks/paired_sellers.py pairs what docs/training.md quotes (the hand-off's fourth
attempt): each seller's gain over the reference is the mean difference on shared episodes."""

from __future__ import annotations

import statistics
import subprocess
import sys

import pytest

from agents.engine import play_vs_pool
from arena.catalog import load_catalog
from arena.config import get_preset
from arena.scenarios import make_scenarios
from tests.benchmarks import BENCHMARKS, load_script

SCRIPT = BENCHMARKS / "paired_sellers.py"
SELLERS = ("scripted:prober", "scripted:satisficer")


@pytest.fixture(scope="module")
def records():
    config = get_preset("in-distribution")
    scenarios = make_scenarios(config, load_catalog(None), 3, 16)
    out = []
    for seller in SELLERS:
        out += play_vs_pool(config, scenarios, seller, ["scripted:time"])[0]
    return out


def test_the_gain_is_the_mean_paired_difference_and_the_reference_gains_nothing(records):
    rows = {r["seller"]: r for r in load_script("paired_sellers").paired_rows(records, "*prober")}
    reward = {s: [r.result.seller_reward for r in records if r.seller == s] for s in SELLERS}

    assert rows["scripted:prober"]["reward"]["gain"] == 0.0
    satisficer = rows["scripted:satisficer"]
    assert satisficer["episodes"] == 16
    assert satisficer["reward"]["mean"] == pytest.approx(statistics.mean(reward[SELLERS[1]]))
    differences = [a - b for a, b in zip(reward[SELLERS[1]], reward[SELLERS[0]], strict=True)]
    assert satisficer["reward"]["gain"] == pytest.approx(statistics.mean(differences))
    assert satisficer["reward"]["gain"] != 0.0  # the two sellers do differ on these scenarios


@pytest.mark.parametrize("pattern", ["scripted:*", "hf:*"])
def test_a_reference_must_match_exactly_one_seller(records, pattern):
    choices = "choose one of scripted:prober, scripted:satisficer"
    with pytest.raises(ValueError, match=rf"matches (2|0) sellers, not one; {choices}"):
        load_script("paired_sellers").paired_rows(records, pattern)


def test_pairing_by_seed_pairs_each_seeds_two_sellers_and_intervals_the_gains(records):
    # "Seeds" 1 and 9 name two prober settings, each paired against the satisficer.
    config = get_preset("in-distribution")
    scenarios = make_scenarios(config, load_catalog(None), 3, 16)
    more = records + [
        r
        for k in (1, 9)
        for r in play_vs_pool(
            config, scenarios, f"scripted:prober?threshold=0.{k}", ["scripted:time"]
        )[0]
    ]
    result = load_script("paired_sellers").paired_by_seed(
        more, "*threshold=0.{k}", "*satisficer", [1, 9]
    )

    gains = []
    for row, k in zip(result["seeds"], (1, 9), strict=True):
        mine = [
            r.result.seller_reward for r in more if r.seller == f"scripted:prober?threshold=0.{k}"
        ]
        base = [r.result.seller_reward for r in more if r.seller == "scripted:satisficer"]
        gains.append(statistics.mean(a - b for a, b in zip(mine, base, strict=True)))
        assert row["gain"] == pytest.approx(gains[-1])
    assert gains[0] != gains[1]  # the two seeds paired different sellers
    across = result["across_seeds"]
    assert across["n"] == 2 and across["mean"] == pytest.approx(statistics.mean(gains))
    assert across["ci_low"] <= across["mean"] <= across["ci_high"]


def test_pairing_by_seed_refuses_a_pattern_that_names_no_seller_for_a_seed(records):
    with pytest.raises(ValueError, match=r"matches 0 sellers \(seed 1\), not one"):
        load_script("paired_sellers").paired_by_seed(records, "*prober{k}", "*satisficer", [1])


def test_the_command_line_refuses_seeds_that_are_not_numbers(tmp_path):
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--db", str(tmp_path / "none.db"), "--reference", "*{k}",
         "--mine", "*{k}", "--seeds", "0,one"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 2
    assert "--seeds: '0,one': comma-separated whole numbers" in run.stderr
