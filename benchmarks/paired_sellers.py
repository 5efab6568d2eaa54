"""Every seller in a results database against one reference seller, paired episode by episode.

    python benchmarks/paired_sellers.py --db runs/continued-compare.db \
        --reference '*learning-seed0/gen-003*'

One line per seller: its episodes, and for each seller figure of the leagues' tables (reward,
deal rate, deal with the top-budget buyer, violations) its mean and its gain over the reference
on the episodes both played, the same scenario against the same buyer lineup, each with a
standard error. Ratings come from ``arena ratings --db ... --role seller``. A tournament of
fixed checkpoints (e.g. two leagues' sellers against another league's buyers) has no league
rows, so ``bench_learning.py --reference`` cannot read it; this can. docs/training.md quotes it
for the hand-off's fourth attempt (issue 19, item 3).

With ``--seeds`` and ``--mine`` it compares two sellers per seed instead, and the gains across
seeds (``{k}`` in either pattern stands for the seed):

    python benchmarks/paired_sellers.py --db runs/continued-compare.db --seeds 0,1,2,3 \
        --mine '*handoff-continued-seed{k}/*' --reference '*scripted-continued-seed{k}/*'

one line per seed (``--mine``'s reward gain over ``--reference``'s, paired), then the mean,
the interquartile mean and the 95% bootstrap interval over the seeds
(:func:`leagues.seeds.interval_across_runs`, as ``bench_learning.py`` reports across seeds).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from arena.records import EpisodeRecord
from leagues.evaluation import FIGURES, by_agent, paired, reference_of
from leagues.seeds import interval_across_runs
from tournaments.store import Store


def paired_rows(records: list[EpisodeRecord], reference: str) -> list[dict[str, Any]]:
    """Per seller (in order of first appearance) its figures paired against the one seller
    whose spec matches the shell pattern ``reference``."""
    players = by_agent(records, "seller")
    base = players[reference_of(players, reference, "seller")]
    rows = []
    for spec, episodes in players.items():
        row: dict[str, Any] = {"seller": spec, "episodes": len(episodes)}
        for name, metric in FIGURES["seller"].items():
            row[name] = paired(episodes, base, metric)
        rows.append(row)
    return rows


def paired_by_seed(
    records: list[EpisodeRecord], mine: str, reference: str, seeds: list[int]
) -> dict[str, Any]:
    """For each seed ``k``, the reward of the one seller matching ``mine`` paired against the
    one matching ``reference`` (``{k}`` in a pattern standing for the seed), and those gains
    across the seeds (:func:`interval_across_runs`)."""
    players = by_agent(records, "seller")
    per_seed = []
    for k in seeds:
        where = f" (seed {k})"
        a = reference_of(players, mine.replace("{k}", str(k)), "seller", where=where)
        b = reference_of(players, reference.replace("{k}", str(k)), "seller", where=where)
        figure = paired(players[a], players[b], FIGURES["seller"]["reward"])
        per_seed.append({"seed": k, "seller": a, "reference": b, **figure})
    return {"seeds": per_seed, "across_seeds": interval_across_runs([r["gain"] for r in per_seed])}


def seed_list(text: str) -> list[int]:
    """``--seeds``: comma-separated whole numbers."""
    if not all(k.strip().isdigit() for k in text.split(",")):
        raise argparse.ArgumentTypeError(f"{text!r}: comma-separated whole numbers, e.g. 0,1,2,3")
    return [int(k) for k in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--reference", required=True, help="shell pattern naming one seller spec")
    parser.add_argument("--mine", help="with --seeds: the seller paired against --reference")
    parser.add_argument(
        "--seeds", type=seed_list, help="comma-separated seeds for {k} in --mine and --reference"
    )
    parser.add_argument("--tournament", help="only this tournament's episodes (name)")
    args = parser.parse_args()
    if (args.mine is None) != (args.seeds is None):
        parser.error("--mine and --seeds go together")
    with Store.open(args.db, read_only=True) as store:
        records = store.load_records(tournament=args.tournament)
    if args.seeds is not None:
        result = paired_by_seed(records, args.mine, args.reference, args.seeds)
        for row in result["seeds"]:
            print(f"seed {row['seed']}: reward gain {row['gain']:+.3f} +- {row['gain_se']:.3f}"
                  f" ({row['n']} episodes of --mine)")  # fmt: skip
        a = result["across_seeds"]
        print(f"across {a['n']} seeds: mean {a['mean']:+.3f}, IQM {a['iqm']:+.3f}, "
              f"95% bootstrap [{a['ci_low']:+.3f}, {a['ci_high']:+.3f}]")  # fmt: skip
        return
    for row in paired_rows(records, args.reference):
        cells = [
            f"{name} {f['mean']:+.3f} ({f['gain']:+.3f} +- {f['gain_se']:.3f})"
            for name in FIGURES["seller"]
            if (f := row[name])["n"]
        ]
        seller = row["seller"].split("lora=")[-1].split("&")[0]
        print(f"{seller[-60:]:60s} n {row['episodes']:4d}  " + "  ".join(cells))


if __name__ == "__main__":
    main()
