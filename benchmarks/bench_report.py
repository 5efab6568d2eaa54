"""Time `arena report` on a large database and what its episode browser adds.

Run: python benchmarks/bench_report.py [--episodes 3400] [--cap 200]

3 scripted sellers x 2 buyer entries x ``--episodes`` scenarios (20,400 episodes by default, every
message stored), then ``write_report``. Printed: the whole report's seconds, the browser's share
(pairings, sampled episode lists and one data file per sampled episode), the files written and
the bytes a person's browser loads to open one episode: the index, a pairing's list and the
episode's file. The browser writes at most ``--cap`` episodes per pairing, so its share and the
bytes per page stay flat as the database grows; the rest of the report (ratings, plots) is
what scales with the episode count.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import tournaments.report as report
from tournaments.config import TournamentConfig
from tournaments.runner import run_tournament

SELLERS = ("scripted:satisficer", "scripted:prober", "scripted:time?e=0.3")
BUYERS = (("scripted:time",), ("scripted:time", "scripted:tit-for-tat"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=3400, help="Scenarios per pairing.")
    parser.add_argument("--cap", type=int, default=200, help="Episodes per pairing shown.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "big.db"
        config = TournamentConfig("big", SELLERS, BUYERS, episodes=args.episodes)
        summary = run_tournament(config, db, workers=2, progress=False)
        spent: dict[str, float] = {}
        write_browser = report.write_browser

        def timed_browser(*a: object, **k: object) -> object:
            began = time.perf_counter()
            links = write_browser(*a, **k)
            spent["browser"] = time.perf_counter() - began
            return links

        report.write_browser = timed_browser
        began = time.perf_counter()
        page = report.write_report(db, Path(tmp) / "site", episodes_per_pairing=args.cap)
        total = time.perf_counter() - began
        data = page.parent / "data"
        files = list(data.glob("episode-*.js"))
        one_episode = max(f.stat().st_size for f in files)
        pairing = max(f.stat().st_size for f in data.glob("pairing-*.js"))
        index = (data / "pairings.js").stat().st_size
        print(f"episodes stored: {summary.played}")
        print(f"report: {total:.1f} s, of which the episode browser {spent['browser']:.1f} s "
              f"({spent['browser'] / total:.0%})")  # fmt: skip
        size = sum(f.stat().st_size for f in files) / 1e6
        print(f"browser files: {len(files)} episode files, {size:.1f} MB")
        print(f"bytes loaded to open one episode: {(index + pairing + one_episode) / 1e3:.0f} kB "
              f"(index {index / 1e3:.1f}, pairing {pairing / 1e3:.1f}, episode "
              f"{one_episode / 1e3:.1f})")  # fmt: skip


if __name__ == "__main__":
    main()
