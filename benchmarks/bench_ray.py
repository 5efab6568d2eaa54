"""Episodes per second of an LLM tournament: in this process, and on 1 and 2 Ray actors.

Run: python benchmarks/bench_ray.py [--episodes 24] [--chunk-size 4] [--model FOLDER]
     [--backend hf|vllm]

One tournament with a model in a seat of every episode (the model selling against scripted
buyers, and buying in all three seats against a scripted seller), played three ways on the
same scenarios: the local executor with one worker (the model in this process), then the ray
executor with ``workers`` 1 and 2 on a local Ray instance of two CPUs: one and two model-holding
actors (tournaments/ray_actors.py), each loading the model once. Every back-end runs on one torch
thread (``threads=1``), so one actor is one core and the local run is one core too. Wall times
include what each way pays to start: Ray's workers, the actors' imports and model loads; the
steady rate leaves that out (episodes stored after the first batch, over the time from the first
batch to the last). The runs must store the same episodes (checked); the ratios to the local run
are printed.

Without ``--model`` the project's tiny random chat model is built in a temporary folder: its
replies are gibberish of ``max_tokens`` tokens, so every request costs a full prompt prefill and
a fixed decode, the shape of a real model's work at a far smaller scale. ``--backend vllm`` serves
the same model with vLLM (its CPU build where installed).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

from agents.backends import close_backends
from tournaments.config import TournamentConfig
from tournaments.runner import run_tournament
from tournaments.store import Store, load_records


def config(spec: str, episodes: int) -> TournamentConfig:
    return TournamentConfig.from_dict(
        {
            "name": "bench-ray",
            "episodes": episodes,
            "sellers": [spec, "scripted:prober"],
            "buyers": ["scripted:time", [spec]],
        }
    )


def stored(db: Path) -> list[str]:
    return sorted(json.dumps(r.to_dict(), sort_keys=True) for r in load_records(db))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=24, help="per pairing")
    parser.add_argument("--chunk-size", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--model", type=Path, help="model folder (default: the tiny model)")
    parser.add_argument("--backend", choices=("hf", "vllm"), default="hf")
    args = parser.parse_args()
    import ray

    with tempfile.TemporaryDirectory() as folder:
        model = args.model
        if model is None:
            from agents.testing.tiny_model import build_tiny_model

            model = build_tiny_model(Path(folder) / "tiny", seed=0, heads=2)
        params = f"max_tokens={args.max_tokens}"
        if args.backend == "hf":
            params += "&threads=1&batch_size=8"
        spec = f"{args.backend}:{model}?{params}"
        tournament = config(spec, args.episodes)
        runs: dict[str, tuple[float, int, float]] = {}
        dbs: dict[str, Path] = {}

        def timed(label: str, **options: object) -> None:
            db = dbs[label] = Path(folder) / f"{label.replace(' ', '-')}.db"
            batches: list[tuple[float, int]] = []
            with Store.open(db) as store:
                add = store.add_episodes

                def add_timed(tournament_id, episodes):  # when each batch arrives
                    batches.append((time.perf_counter(), len(episodes)))
                    return add(tournament_id, episodes)

                store.add_episodes = add_timed  # type: ignore[method-assign]
                began = time.perf_counter()
                summary = run_tournament(
                    tournament, store, progress=False, chunk_size=args.chunk_size, **options
                )
                wall = time.perf_counter() - began
            close_backends()
            after_first = sum(n for _, n in batches[1:])
            steady = after_first / (batches[-1][0] - batches[0][0])
            runs[label] = (wall, summary.played, steady)
            print(f"{label:>12}: {summary.played} episodes in {wall:.1f} s; "
                  f"{'; '.join(summary.notes)}", flush=True)  # fmt: skip

        timed("local", workers=1)
        ray.init(address="local", num_cpus=2, include_dashboard=False)
        try:
            timed("ray 1 actor", workers=1, executor="ray")
            timed("ray 2 actors", workers=2, executor="ray")
        finally:
            ray.shutdown()
        reference = stored(dbs["local"])
        for label, db in dbs.items():
            if stored(db) != reference:
                raise SystemExit(f"{label} stored other episodes than the local run")
    local_s, played, local_steady = runs["local"]
    print(f"\n{played} episodes ({args.backend}, chunks of {args.chunk_size}, "
          f"{args.max_tokens} tokens per reply), the same episodes stored by each run")  # fmt: skip
    print(f"{'run':>12}  {'wall s':>7}  {'episodes/s':>10}  {'vs local':>8}  "
          f"{'steady ep/s':>11}  {'vs local':>8}")  # fmt: skip
    for label, (seconds, n, steady) in runs.items():
        print(f"{label:>12}  {seconds:7.1f}  {n / seconds:10.2f}  {local_s / seconds:7.2f}x  "
              f"{steady:11.2f}  {steady / local_steady:7.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
