"""Time a scripted round-robin with and without the results store.

Run: python benchmarks/bench_tournament.py [--workers 2] [--episodes 256] [--repeat 3]

10 scripted sellers x 10 scripted buyers x 256 episodes on the in-distribution market (25,600
episodes), local process pool. The stored run writes every episode and every message to a fresh
SQLite file; the unstored run plays the same episodes and only keeps the summary figures. The
difference is what storing costs: encoding rows in the workers, shipping them to the parent, and
the inserts. Targets: stored run under 60 s, overhead at most 30%.

Besides wall time, each run's CPU seconds (this process plus its finished workers) are printed:
on a shared machine they are the steadier measure of the overhead.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from cpu_time import cpu_seconds

from tournaments.config import TournamentConfig
from tournaments.runner import run_tournament
from tournaments.store import Store

SELLERS = (
    "scripted:satisficer",
    "scripted:satisficer?concession=0.3",
    "scripted:prober",
    "scripted:prober?threshold=0.5",
    "scripted:prober?threshold=0.8",
    "scripted:time?e=0.3",
    "scripted:time?e=0.5",
    "scripted:time?e=2",
    "scripted:time?margin=0.2",
    "scripted:oracle",
)
BUYERS = (
    "scripted:time",
    "scripted:time?e=0.3",
    "scripted:time?e=0.5",
    "scripted:time?e=2",
    "scripted:tit-for-tat",
    "scripted:tit-for-tat?factor=0.5",
    "scripted:tit-for-tat?step=0.1",
    "scripted:hardliner",
    "scripted:hardliner?step=0.05",
    "scripted:hardliner?step=0.01",
)


def timed(config: TournamentConfig, db: Path | None, workers: int, chunk_size: int):
    """(summary, wall seconds, CPU seconds) of one run."""
    start, cpu = time.perf_counter(), cpu_seconds()
    summary = run_tournament(config, db, workers, "local", progress=False, chunk_size=chunk_size)
    return summary, time.perf_counter() - start, cpu_seconds() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--episodes", type=int, default=256)
    parser.add_argument("--chunk-size", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=1, help="alternate runs; report the best")
    parser.add_argument("--no-turns", action="store_true", help="store without messages")
    args = parser.parse_args()
    config = TournamentConfig(
        name="bench",
        sellers=SELLERS,
        buyers=tuple((b,) for b in BUYERS),
        episodes=args.episodes,
        keep_turns=not args.no_turns,
    )
    episodes = len(SELLERS) * len(BUYERS) * args.episodes
    stored_runs, bare_runs = [], []
    with tempfile.TemporaryDirectory() as folder:
        for attempt in range(args.repeat):
            db = Path(folder) / f"bench{attempt}.db"
            stored, *times = timed(config, db, args.workers, args.chunk_size)
            stored_runs.append(times)
            bare, *times = timed(config, None, args.workers, args.chunk_size)
            bare_runs.append(times)
            if stored.pairings != bare.pairings:
                raise SystemExit("the stored and unstored runs disagree on the pairing summaries")
        with Store.open(db) as store:
            rows = store.db.execute("SELECT COUNT(*) FROM episodes").fetchone()[0]
            turns = store.db.execute("SELECT COUNT(*) FROM turns").fetchone()[0]
        size_mb = sum(f.stat().st_size for f in db.parent.glob(db.name + "*")) / 1e6
    stored_s, stored_cpu = (min(x) for x in zip(*stored_runs, strict=True))
    bare_s, bare_cpu = (min(x) for x in zip(*bare_runs, strict=True))
    print(
        f"{episodes} episodes ({rows} stored, {turns} turns, {size_mb:.0f} MB), "
        f"{args.workers} workers, chunks of {args.chunk_size}, best of {args.repeat}"
    )
    print(f"stored:   {stored_s:6.1f} s wall, {stored_cpu:6.1f} s CPU")
    print(f"unstored: {bare_s:6.1f} s wall, {bare_cpu:6.1f} s CPU")
    print(
        f"store overhead: {stored_s / bare_s - 1:+.1%} wall, {stored_cpu / bare_cpu - 1:+.1%} CPU"
    )


if __name__ == "__main__":
    main()
