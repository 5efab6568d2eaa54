"""Batched rollout engine vs one request at a time: episodes per second on CPU, tiny model.

Plays the same scenarios twice with the same agents and seeds: once with ``max_concurrent``
episodes in flight (one batched ``generate`` per round) and once with ``max_concurrent=1`` (every
model request alone), and prints both rates and their ratio. Target: >= 5x at 64 episodes.

Two lineups are measured: an LLM seller against scripted buyers (one model call per episode with
a random model, whose garbage is a seller violation) and a scripted seller against LLM buyers
(twelve calls per episode: every opening attempt is garbage and re-sampled). Decoding is greedy,
so both runs should produce the same records; the script reports whether they do.

Usage: python benchmarks/bench_engine.py [--episodes 64] [--max-tokens 32] [--model-dir DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from agents.backends import close_backends
from agents.engine import run_episodes
from arena.catalog import load_catalog
from arena.config import get_preset
from arena.scenarios import make_scenarios


def measure(config, scenarios, seller: str, pool: list[str], concurrent: int) -> tuple[float, list]:
    """(episodes per second, records) of one run."""
    start = time.perf_counter()
    records, _ = run_episodes(config, scenarios, seller, pool, max_concurrent=concurrent)
    return len(records) / (time.perf_counter() - start), records


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--max-concurrent", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=32, help="tokens per model reply")
    parser.add_argument("--batch-size", type=int, default=16, help="hf back-end batch size")
    parser.add_argument("--model-dir", type=Path, help="a local chat model; default: tiny model")
    parser.add_argument("--lineup", choices=("seller", "buyer", "both"), default="both")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (1 avoids spin contention)"
    )
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory() as tmp:
        model = args.model_dir
        if model is None:
            from agents.testing.tiny_model import build_tiny_model

            model = build_tiny_model(Path(tmp) / "tiny", seed=0)
        llm = (
            f"hf:{model}?device=cpu&temperature=0&max_tokens={args.max_tokens}"
            f"&batch_size={args.batch_size}"
        )
        lineups = {
            "seller": (llm, ["scripted:time"]),
            "buyer": ("scripted:prober", [llm]),
        }
        chosen = list(lineups) if args.lineup == "both" else [args.lineup]
        config = get_preset("in-distribution")
        scenarios = make_scenarios(config, load_catalog(None), 0, args.episodes)
        print(
            f"{args.episodes} episodes, in-distribution, {args.max_tokens} tokens per reply, "
            f"hf batch size {args.batch_size}, {args.threads} torch thread(s), model {model}"
        )
        for name in chosen:
            seller, pool = lineups[name]
            measure(config, scenarios[:1], seller, pool, 1)  # load the model once, untimed
            batched, records_b = measure(config, scenarios, seller, pool, args.max_concurrent)
            single, records_s = measure(config, scenarios, seller, pool, 1)
            same = [r.to_dict() for r in records_b] == [r.to_dict() for r in records_s]
            print(
                f"LLM {name}: batched ({args.max_concurrent} concurrent) {batched:.2f} ep/s, "
                f"one at a time {single:.2f} ep/s, ratio {batched / single:.1f}x, "
                f"identical records: {same}"
            )
        close_backends()


if __name__ == "__main__":
    main()
