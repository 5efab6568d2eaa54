"""Batched rollout engine vs one request at a time: episodes per second on CPU.

Plays the same scenarios twice with the same agents and seeds: once with ``--max-concurrent``
episodes in flight (one batched ``generate`` per back-end per round) and once with
``max_concurrent=1`` (every model request alone), and prints both rates and their ratio.

Lineups:

- ``hf-seller``: the tiny local model (``hf`` back-end, greedy) as seller against scripted buyers.
  A random model writes garbage, so each episode is one model call and a seller violation.
- ``hf-buyer``: a scripted seller against tiny-model buyers: every opening attempt is garbage and
  re-sampled by the game, twelve model calls per episode.
- ``http-buyer``: the same with ``openai`` buyers served by the scripted HTTP server on
  127.0.0.1, each reply delayed by ``--latency`` seconds like a remote model server.

Greedy decoding and per-request seeds make both runs produce the same records; the script checks.

Usage: python benchmarks/bench_engine.py [--episodes 64] [--max-tokens 32] [--lineup all]
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from pathlib import Path

from agents.backends import close_backends
from agents.engine import run_episodes
from arena.catalog import load_catalog
from arena.config import MarketConfig, get_preset
from arena.records import EpisodeRecord
from arena.scenarios import Scenario, make_scenarios

LINEUPS = ("hf-seller", "hf-buyer", "http-buyer")


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
    records, _ = run_episodes(config, scenarios, seller, pool, max_concurrent=concurrent)
    return len(records) / (time.perf_counter() - start), records


def compare(name: str, config, scenarios, seller: str, pool: list[str], concurrent: int) -> None:
    measure(config, scenarios[:1], seller, pool, 1)  # load the model once, untimed
    batched, records_b = measure(config, scenarios, seller, pool, concurrent)
    single, records_s = measure(config, scenarios, seller, pool, 1)
    same = [r.to_dict() for r in records_b] == [r.to_dict() for r in records_s]
    print(
        f"{name:10s}: batched ({concurrent} concurrent) {batched:7.2f} ep/s | one at a time "
        f"{single:7.2f} ep/s | ratio {batched / single:5.1f}x | identical records: {same}",
        flush=True,
    )


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

                model = build_tiny_model(Path(tmp) / "tiny", seed=0)
            print(f"hf: {model}, batch size {args.batch_size}, {args.threads} torch thread(s)")
            llm = (
                f"hf:{model}?device=cpu&temperature=0&max_tokens={args.max_tokens}"
                f"&batch_size={args.batch_size}"
            )
            if "hf-seller" in chosen:
                compare("hf-seller", config, scenarios, llm, ["scripted:time"], args.max_concurrent)
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
