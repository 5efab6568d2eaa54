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
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from arena.records import EpisodeRecord
from leagues.evaluation import FIGURES, by_agent, paired, reference_of
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--reference", required=True, help="shell pattern naming one seller spec")
    parser.add_argument("--tournament", help="only this tournament's episodes (name)")
    args = parser.parse_args()
    with Store.open(args.db, read_only=True) as store:
        records = store.load_records(tournament=args.tournament)
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
