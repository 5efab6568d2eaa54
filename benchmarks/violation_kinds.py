"""What each held-out checkpoint of a league violates, counted from its stored episodes.

    python benchmarks/violation_kinds.py --db runs/lin-s0.db --league learning-seed0
    python benchmarks/violation_kinds.py --db runs/bp-s0.db --league buyer-seed0 --role buyer

One line per agent of the role: episodes, deals, episodes ending in a violation, and the
violations by reason (``EpisodeResult.violation_reason``); docs/training.md quotes the output.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from leagues.evaluation import by_agent
from leagues.state import league_records
from tournaments.store import Store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--league", required=True)
    parser.add_argument("--role", choices=("seller", "buyer"), default="seller")
    args = parser.parse_args()
    with Store.open(args.db, read_only=True) as store:
        records, _ = league_records(store, args.league)
        labels = {a["spec"]: a["label"] for a in store.db.query(
            "SELECT spec, label FROM agents WHERE role = ?", [args.role])}  # fmt: skip
    for spec, episodes in by_agent(records, args.role).items():
        results = [r.result for r in episodes.values()]
        reasons = Counter(r.violation_reason for r in results if r.violation)
        deals = sum(1 for r in results if r.deals)
        print(f"{labels.get(spec, spec)[:40]:40s} episodes {len(results)}, deals {deals}, "
              f"violations {sum(reasons.values())}: {dict(reasons.most_common())}")  # fmt: skip


if __name__ == "__main__":
    main()
