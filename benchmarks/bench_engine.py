"""Batched rollout engine vs one request at a time, and the hf back-end's KV reuse, on CPU.

Plays the same scenarios with the same agents and seeds: with ``--max-concurrent`` episodes in
flight (one batched ``generate`` per back-end per round) and with ``max_concurrent=1`` (every
model request alone), prints both rates and their ratio, and checks the records are identical.

Lineups:

- ``hf-seller``: the tiny local model (``hf`` back-end, greedy) as seller against scripted buyers.
  A random model writes garbage, so each episode is one model call and a seller violation.
- ``hf-narrated``: the same seller narrating a scripted prober's moves
  (``narrate=scripted:prober``), so every message is valid and episodes run five seller turns
  whose prompts grow from ~1,800 to ~4,200 tokens (a 16k-context tiny model). This is where
  conversation KV reuse matters: each mode runs with reuse (the default) and without
  (``kv_cache_mib=0``, every turn re-prefilled), all four runs must give identical records, and
  the one-at-a-time runs print the latency of each turn.
- ``hf-buyer``: a scripted seller against tiny-model buyers: every opening attempt is garbage and
  re-sampled by the game, twelve model calls per episode.
- ``http-buyer``: the same with ``openai`` buyers served by the scripted HTTP server on
  127.0.0.1, each reply delayed by ``--latency`` seconds like a remote model server.

Usage: python benchmarks/bench_engine.py [--episodes 64] [--max-tokens 32] [--lineup all]
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents.backends import close_backends
from agents.engine import play_vs_pool
from agents.llm import make_llm_agent
from arena.catalog import load_catalog
from arena.config import MarketConfig, get_preset
from arena.records import EpisodeRecord
from arena.scenarios import Scenario, make_scenarios

LINEUPS = ("hf-seller", "hf-narrated", "hf-buyer", "http-buyer")
LONG_CONTEXT = 16384


def regulated_opening(messages: list[dict[str, str]]) -> str:
    """The HTTP server's buyer: opens at its regulated price, then walks away."""
    match = re.search(r"must be exactly (\$[\d,.]+\d)", messages[-1]["content"])
    if match is None:
        return "Thought: enough\nTalk: No, thank you.\nAction: [QUIT]"
    return f"Thought: regulated\nTalk: Hello.\nAction: [BUY] {match.group(1)}"


def measure(
    config: MarketConfig, scenarios: list[Scenario], seller: str, pool: list[str], concurrent: int
) -> tuple[float, list[EpisodeRecord]]:
    """(episodes per second, records) of one run."""
    start = time.perf_counter()
    records, _ = play_vs_pool(config, scenarios, seller, pool, max_concurrent=concurrent)
    return len(records) / (time.perf_counter() - start), records


def outcomes(records: list[EpisodeRecord]) -> list[Any]:
    """What must not change between modes: every episode's result (turn texts included)."""
    return [record.result for record in records]


def compare(name: str, config, scenarios, seller: str, pool: list[str], concurrent: int) -> None:
    measure(config, scenarios[:1], seller, pool, 1)  # load the model once, untimed
    batched, records_b = measure(config, scenarios, seller, pool, concurrent)
    single, records_s = measure(config, scenarios, seller, pool, 1)
    same = outcomes(records_b) == outcomes(records_s)
    print(
        f"{name:11s}: batched ({concurrent} concurrent) {batched:7.2f} ep/s | one at a time "
        f"{single:7.2f} ep/s | ratio {batched / single:5.1f}x | identical records: {same}",
        flush=True,
    )


class TurnTimer:
    """Wraps a back-end's generate to time each request by its agent's turn index."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.seconds: dict[int, list[float]] = defaultdict(list)
        self._generate: Callable = backend.generate
        backend.generate = self

    def __call__(self, requests: list) -> list:
        start = time.perf_counter()
        completions = self._generate(requests)
        if len(requests) == 1:  # one at a time: the call's time is the turn's latency
            turn = int(requests[0].tag.rsplit("/", 1)[1])
            self.seconds[turn].append(time.perf_counter() - start)
        return completions

    def restore(self) -> None:
        self.backend.generate = self._generate


def compare_reuse(config, scenarios, model: Path, args: argparse.Namespace) -> None:
    """The narrated seller batched and one at a time, with and without conversation KV reuse."""
    rates: dict[tuple[str, int], float] = {}
    results: dict[tuple[str, int], list[Any]] = {}
    latency: dict[str, dict[int, list[float]]] = {}
    for reuse, mib in (("reuse", 1024), ("no reuse", 0)):
        seller = (
            f"hf:{model}?device=cpu&temperature=0&max_tokens={args.max_tokens}"
            f"&batch_size={args.batch_size}&narrate=scripted:prober&kv_cache_mib={mib}"
        )
        pool = ["scripted:time"]
        measure(config, scenarios[:1], seller, pool, 1)  # load the model once, untimed
        for concurrent in (args.max_concurrent, 1):
            backend = make_llm_agent(seller, "seller").backend  # the run's shared back-end
            backend.kv_cache.clear()
            timer = TurnTimer(backend)
            rate, records = measure(config, scenarios, seller, pool, concurrent)
            timer.restore()
            rates[reuse, concurrent] = rate
            results[reuse, concurrent] = outcomes(records)
            if concurrent == 1:
                latency[reuse] = timer.seconds
        hits = backend.stats.cache_hit_rate
        print(f"hf-narrated, {reuse}: prompt tokens served from the cache {hits:.0%}", flush=True)
        close_backends()
    same = len({repr(r) for r in results.values()}) == 1
    batched, single = rates["reuse", args.max_concurrent], rates["reuse", 1]
    old_batched, old_single = rates["no reuse", args.max_concurrent], rates["no reuse", 1]
    print(
        f"hf-narrated: batched ({args.max_concurrent} concurrent) {batched:6.2f} ep/s | one at a "
        f"time {single:6.2f} ep/s | ratio {batched / single:4.1f}x  (KV reuse)\n"
        f"hf-narrated: batched ({args.max_concurrent} concurrent) {old_batched:6.2f} ep/s | one "
        f"at a time {old_single:6.2f} ep/s | ratio {old_batched / old_single:4.1f}x  (no reuse)\n"
        f"hf-narrated: batched with reuse / one at a time without: {batched / old_single:4.1f}x | "
        f"identical records in all four runs: {same}"
    )
    print("hf-narrated, one at a time: seller latency per turn (median ms)")
    print("  turn     " + "".join(f"{turn + 1:>8d}" for turn in sorted(latency["reuse"])))
    for reuse, seconds in latency.items():
        cells = "".join(f"{statistics.median(seconds[t]) * 1000:8.1f}" for t in sorted(seconds))
        print(f"  {reuse:9s}{cells}", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--max-concurrent", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=32, help="tokens per model reply")
    parser.add_argument("--batch-size", type=int, default=16, help="hf back-end batch size")
    parser.add_argument("--model-dir", type=Path, help="a local chat model; default: tiny model")
    parser.add_argument("--latency", type=float, default=0.02, help="http reply delay, seconds")
    parser.add_argument("--lineup", choices=(*LINEUPS, "all"), default="all")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (1 avoids spin contention)"
    )
    args = parser.parse_args(argv)
    chosen = LINEUPS if args.lineup == "all" else (args.lineup,)
    config = get_preset("in-distribution")
    scenarios = make_scenarios(config, load_catalog(None), 0, args.episodes)
    print(f"{args.episodes} episodes of in-distribution, {args.max_tokens} tokens per reply")

    if any(name.startswith("hf") for name in chosen):
        import torch

        torch.set_num_threads(args.threads)
        with tempfile.TemporaryDirectory() as tmp:
            model = args.model_dir
            if model is None:
                from agents.testing.tiny_model import build_tiny_model

                # heads=2: the same model the vLLM benchmark runs (vLLM needs head size >= 32).
                model = build_tiny_model(Path(tmp) / "tiny", heads=2, max_positions=LONG_CONTEXT)
            print(f"hf: {model}, batch size {args.batch_size}, {args.threads} torch thread(s)")
            llm = (
                f"hf:{model}?device=cpu&temperature=0&max_tokens={args.max_tokens}"
                f"&batch_size={args.batch_size}"
            )
            if "hf-seller" in chosen:
                compare("hf-seller", config, scenarios, llm, ["scripted:time"], args.max_concurrent)
            if "hf-narrated" in chosen:
                close_backends()
                compare_reuse(config, scenarios, model, args)
            if "hf-buyer" in chosen:
                compare(
                    "hf-buyer", config, scenarios, "scripted:prober", [llm], args.max_concurrent
                )
            close_backends()

    if "http-buyer" in chosen:
        from agents.testing.http_server import ScriptedChatServer

        with ScriptedChatServer(reply_text=regulated_opening, default_delay=args.latency) as server:
            print(f"http: scripted server at {server.url}, {args.latency * 1000:.0f} ms per reply")
            llm = (
                f"openai:bench?base_url={server.url}&max_concurrency={args.max_concurrent}"
                f"&temperature=0&max_tokens={args.max_tokens}"
            )
            compare("http-buyer", config, scenarios, "scripted:prober", [llm], args.max_concurrent)
            close_backends()


if __name__ == "__main__":
    main()
