"""vLLM throughput of the rollout engine: episodes per hour for a named model, prefix-cache hits.

Runs on a GPU machine. Two ways to reach vLLM:

- offline (default): the agents' ``vllm`` back-end builds an in-process engine for MODEL (with
  ``--lora DIR`` the seller plays through that adapter on the same engine);
- ``--server URL``: a running ``vllm serve MODEL`` reached through the ``openai`` back-end.

Every agent (seller and buyers) is MODEL unless ``--buyer`` names another spec, so all requests of
a round share one batch and the system prompts share cached prefixes.

Prefix-cache hit rate = hits / queries, both counted in prompt tokens, taken as the difference of
vLLM's counters before and after the run:

- offline: ``LLM.get_metrics()`` (vLLM >= 0.9, V1 engine) counters ``vllm:prefix_cache_hits`` and
  ``vllm:prefix_cache_queries``, read from the back-end's engine (``VLLMBackend.llm``). The specs
  set ``log_stats=true`` (the engine then runs with ``disable_log_stats=False``); when metrics are
  still unavailable (e.g. an older vLLM), the rate is reported as unavailable, with the reason;
- server: the Prometheus text at ``<server root>/metrics``, counters
  ``vllm:prefix_cache_hits_total`` and ``vllm:prefix_cache_queries_total`` (older servers export
  the gauge ``vllm:gpu_prefix_cache_hit_rate``, printed as is).

Examples:
  python benchmarks/vllm_throughput.py Qwen/Qwen3-4B-Instruct-2507 --episodes 256
  python benchmarks/vllm_throughput.py Qwen/Qwen3-4B-Instruct-2507 --lora ckpt/gen3
  python benchmarks/vllm_throughput.py Qwen/Qwen3-4B-Instruct-2507 --server http://127.0.0.1:8000/v1
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterable
from typing import Any

PREFIX_COUNTERS = ("vllm:prefix_cache_hits", "vllm:prefix_cache_queries")
LEGACY_GAUGE = "vllm:gpu_prefix_cache_hit_rate"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Episodes per hour of the batched rollout engine on vLLM.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("Examples:", 1)[1],
    )
    parser.add_argument("model", help="model name or path (as vLLM loads it)")
    parser.add_argument("--lora", help="PEFT adapter folder for the seller (offline mode)")
    parser.add_argument("--server", help="base URL of a running `vllm serve`, e.g. .../v1")
    parser.add_argument("--buyer", help="buyer spec; default: MODEL itself")
    parser.add_argument("--preset", default="in-distribution")
    parser.add_argument("--episodes", type=int, default=256)
    parser.add_argument("--max-concurrent", type=int, default=256)
    parser.add_argument("--max-tokens", type=int, default=512, help="token limit per reply")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    parser.add_argument("--max-model-len", type=int, help="context length (offline mode)")
    parser.add_argument("--seed", type=int, default=0, help="scenario seed")
    parser.add_argument("--catalog", help="catalogue path; default: the packaged one")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    if args.episodes < 1 or args.max_concurrent < 1:
        parser.error("--episodes and --max-concurrent must be >= 1")
    if args.server and args.lora:
        parser.error("--lora applies to offline mode; load the adapter in `vllm serve` instead")
    return args


def specs(args: argparse.Namespace) -> tuple[str, str]:
    """(seller spec, buyer spec) for the run."""
    if args.server:
        base = (
            f"openai:{args.model}?base_url={args.server}&max_concurrency={args.max_concurrent}"
            f"&max_tokens={args.max_tokens}"
        )
        return base, args.buyer or base
    base = (
        f"vllm:{args.model}?max_tokens={args.max_tokens}"
        f"&gpu_memory_utilization={args.gpu_memory_utilization}&log_stats=true"
    )
    if args.max_model_len:
        base += f"&max_model_len={args.max_model_len}"
    seller = base + (f"&lora={args.lora}" if args.lora else "")
    return seller, args.buyer or base


def counters_from_metrics(metrics: Iterable[Any]) -> dict[str, float]:
    """Sum of each prefix-cache counter (and the legacy gauge) in ``LLM.get_metrics()``."""
    totals: dict[str, float] = {}
    for metric in metrics:
        name = metric.name.removesuffix("_total")
        if name in (*PREFIX_COUNTERS, LEGACY_GAUGE):
            totals[name] = totals.get(name, 0.0) + float(metric.value)
    return totals


def counters_from_prometheus(text: str) -> dict[str, float]:
    """The same counters from a Prometheus ``/metrics`` page (summed over label sets)."""
    totals: dict[str, float] = {}
    for line in text.splitlines():
        match = re.match(r"^(vllm:[a-z_]+?)(?:_total)?(?:\{[^}]*\})?\s+([-+0-9.eE]+|NaN)$", line)
        if match and match.group(1) in (*PREFIX_COUNTERS, LEGACY_GAUGE):
            totals[match.group(1)] = totals.get(match.group(1), 0.0) + float(match.group(2))
    return totals


def hit_rate(before: dict[str, float], after: dict[str, float]) -> str:
    """The run's prefix-cache hit rate as text, or why it is unavailable."""
    hits, queries = PREFIX_COUNTERS
    if hits in after and queries in after:
        asked = after[queries] - before.get(queries, 0.0)
        found = after[hits] - before.get(hits, 0.0)
        if asked <= 0:
            return "unavailable (no prefix-cache queries were counted)"
        return f"{found / asked:.1%} ({found:,.0f} of {asked:,.0f} prompt tokens)"
    if LEGACY_GAUGE in after:
        return f"{after[LEGACY_GAUGE]:.1%} (legacy gauge {LEGACY_GAUGE})"
    return "unavailable (vLLM exported no prefix-cache counters)"


class Probe:
    """Reads the prefix-cache counters of the engine or server the run uses."""

    def __init__(self, args: argparse.Namespace, seller_spec: str) -> None:
        self.server = args.server
        self.engine: Any = None
        self.problem = ""
        if self.server is None:
            from agents.llm import make_llm_agent

            # Builds the engine now; the seller's back-end shares it with every same-model agent.
            self.engine = make_llm_agent(seller_spec, "seller").backend.llm

    def read(self) -> dict[str, float]:
        if self.server is not None:
            url = re.sub(r"/v1/?$", "", self.server.rstrip("/")) + "/metrics"
            try:
                with urllib.request.urlopen(url, timeout=30) as response:
                    return counters_from_prometheus(response.read().decode())
            except urllib.error.URLError as exc:  # HTTPError included: no /metrics route
                self.problem = f"cannot read {url}: {exc}"
                return {}
        try:
            return counters_from_metrics(self.engine.get_metrics())
        except (AssertionError, AttributeError) as exc:
            # vLLM asserts when the engine was built with disable_log_stats=True (a spec without
            # log_stats=true); older versions have no get_metrics at all.
            self.problem = f"engine metrics unavailable: {type(exc).__name__}: {exc}"
            return {}


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.server is None and importlib.util.find_spec("vllm") is None:
        sys.exit(
            "error: vLLM is not installed. Run this on a GPU machine after "
            "`pip install 'bargain-arena[vllm]'`, or point --server at a running `vllm serve`."
        )
    from agents.backends import close_backends
    from agents.engine import run_episodes
    from arena.catalog import load_catalog
    from arena.config import get_preset
    from arena.scenarios import make_scenarios

    seller, buyer = specs(args)
    config = get_preset(args.preset)
    scenarios = make_scenarios(config, load_catalog(args.catalog), args.seed, args.episodes)
    print(f"seller {seller}\nbuyer  {buyer}\n{args.episodes} episodes of {args.preset}", flush=True)
    probe = Probe(args, seller)
    before = probe.read()
    start = time.perf_counter()
    records, stats = run_episodes(
        config, scenarios, seller, [buyer], max_concurrent=args.max_concurrent
    )
    seconds = time.perf_counter() - start
    after = probe.read()
    close_backends()

    outcomes = Counter(r.result.outcome for r in records)
    rate = hit_rate(before, after) if not probe.problem else f"unavailable ({probe.problem})"
    figures = {
        "model": args.model,
        "lora": args.lora,
        "episodes": len(records),
        "seconds": seconds,
        "episodes_per_hour": len(records) / seconds * 3600,
        "output_tokens_per_second": stats.tokens_out / seconds,
        "prefix_cache_hit_rate": rate,
        "outcomes": dict(outcomes),
        "run_stats": stats.as_dict(),
    }
    print(f"episodes per hour:  {figures['episodes_per_hour']:,.0f}  ({seconds:.1f} s)")
    print(
        f"requests:           {stats.requests:,} ({stats.errors} errors, {stats.retries} retries)"
    )
    print(f"tokens in / out:    {stats.tokens_in:,} / {stats.tokens_out:,}")
    print(f"output tokens/s:    {figures['output_tokens_per_second']:,.0f}")
    print(f"prefix-cache hits:  {rate}")
    print(f"outcomes:           {dict(outcomes)}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(figures, handle, indent=2)


if __name__ == "__main__":
    main()
