"""Time one stored league evaluation replayed under other batch sizes and worker counts.

Run: python benchmarks/bench_eval.py --db runs/coevolution-s0.db \
         --tournament coevolution-seed0/gen-004-buyer --setting 96:1 --setting 192:1 --setting 192:2

A league evaluates each checkpoint against the other side's population in one tournament
(``<league>/gen-NNN-<side>``, ``leagues.rounds.play_round``). This replays such a
tournament as it is stored (scenarios, specs, episodes per pairing), each ``--setting``
``BATCH:WORKERS[:CHUNK]`` once into a fresh database: ``BATCH`` prompts a generate call
(``batch_size`` of every hf spec, the league's ``eval_batch_size``), ``WORKERS`` processes
(``[league] workers``), at most ``CHUNK`` episodes a task (by default the league's,
``max(EVAL_CHUNK, BATCH)``; the runner cuts equal chunks, a multiple of the workers:
``tournaments.runner.even_chunks``), one torch thread a process (``--cpu-threads``). It prints the
wall and CPU seconds of each setting, its speed relative to the first, and a fingerprint of the
results (each pairing's mean seller reward and deal rate, bit for bit): equal fingerprints mean
the setting changed the time and not the episodes (the hf back-end draws each request from its
own seed, ``agents.llm.request_seed``).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import re
import tempfile
import time
from pathlib import Path

from cpu_time import cpu_seconds

from leagues.rounds import EVAL_CHUNK
from tournaments.config import TournamentConfig
from tournaments.runner import even_chunks, run_tournament
from tournaments.store import Store


def stored_tournament(db: Path, name: str) -> TournamentConfig:
    """The tournament ``name`` as its config was stored."""
    with Store.open(db, read_only=True) as store:
        row = store.db.execute("SELECT config FROM tournaments WHERE name = ?", [name]).fetchone()
        if row is None:
            names = [r[0] for r in store.db.execute("SELECT name FROM tournaments ORDER BY id")]
            raise SystemExit(f"no tournament {name!r} in {db}; stored: {', '.join(names)}")
    return TournamentConfig.from_dict(json.loads(row[0]))


def with_batch(spec: str, batch: int) -> str:
    """An hf spec with ``batch_size`` set to ``batch``; other specs unchanged."""
    if not spec.startswith("hf:"):
        return spec
    if re.search(r"[?&]batch_size=\d+", spec):
        return re.sub(r"([?&])batch_size=\d+", rf"\g<1>batch_size={batch}", spec)
    return spec + ("&" if "?" in spec else "?") + f"batch_size={batch}"


def rebatched(config: TournamentConfig, batch: int, episodes: int | None) -> TournamentConfig:
    """``config`` with every hf spec's batch size ``batch`` (and ``episodes`` a pairing)."""
    return dataclasses.replace(
        config,
        sellers=tuple(with_batch(s, batch) for s in config.sellers),
        buyers=tuple(tuple(with_batch(s, batch) for s in pool) for pool in config.buyers),
        episodes=episodes or config.episodes,
    )


def fingerprint(pairings) -> str:
    """Each pairing's mean seller reward (exact) and deal rate, in order, hashed."""
    text = ";".join(f"{p.mean_seller_reward.hex()},{p.deal_rate!r}" for p in pairings)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True, help="a league's database")
    parser.add_argument("--tournament", required=True, help="e.g. coevolution-seed0/gen-004-buyer")
    parser.add_argument(
        "--setting", action="append", required=True, help="BATCH:WORKERS[:CHUNK], repeatable"
    )
    parser.add_argument("--episodes", type=int, help="episodes a pairing (default: as stored)")
    parser.add_argument(
        "--cpu-threads", type=int, default=1, help="torch threads a process (the league's setting)"
    )
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.cpu_threads)  # the workers are forked: they inherit it
    stored = stored_tournament(args.db, args.tournament)
    pairings = len(stored.sellers) * len(stored.buyers)
    print(
        f"{args.tournament}: {pairings} pairings x {args.episodes or stored.episodes} episodes, "
        f"{len(stored.sellers)} seller(s), {len(stored.buyers)} buyer entries"
    )
    first = None
    with tempfile.TemporaryDirectory() as folder:
        for index, setting in enumerate(args.setting):
            batch, workers, *rest = (int(x) for x in setting.split(":"))
            config = rebatched(stored, batch, args.episodes)
            episodes = len(config.sellers) * len(config.buyers) * config.episodes
            chunk = rest[0] if rest else max(EVAL_CHUNK, batch)
            sizes = [len(c) for c in even_chunks(range(episodes), chunk, workers)]
            start, cpu = time.perf_counter(), cpu_seconds()
            summary = run_tournament(
                config, Path(folder) / f"{index}.db", workers, progress=False, chunk_size=chunk
            )
            wall, used = time.perf_counter() - start, cpu_seconds() - cpu
            first = first or wall
            print(
                f"batch {batch:4d}, {workers} worker(s), {len(sizes)} chunks of {max(sizes):4d}: "
                f"{wall:7.1f} s wall "
                f"({first / wall:4.2f}x the first), {used:7.1f} s CPU, results "
                f"{fingerprint(summary.pairings)}"
            )


if __name__ == "__main__":
    main()
