"""KV reuse in the GRPO rollouts: the learner's sampler and whole GRPO steps, with and without
keeping each learner stream's KV cache between its turns.

The learner is a buyer (slot 1 of the in-distribution market, scripted seller and buyers around
it) played by the project's tiny model, untrained: its invalid openings are re-sampled by the
game ``--retries`` times, so every stream has ``retries + 1`` turns and grows by a reply and the
rejection notice each turn, as a seller's stream grows by a reply and a board. Three samplers play
the same rollout batch:

* ``generate``: transformers' ``model.generate`` on the left-padded batch of whole streams, the
  learner's sampler before stream KV reuse (kept here as the reference);
* ``loop``: the project's decoding loop (``agents.backends.hf_decode``) with
  ``rollout_kv_cache_mib = 0``: every turn prefills its whole stream;
* ``reuse``: the same loop keeping each stream's prefill KV (the default): a turn prefills only
  its new tokens.

``loop`` and ``reuse`` must play identical rollouts (tokens and float logprobs); the script checks
it, prints each round's latency (one generator call answers every stream's turn k) and the
rollout's wall time. Then ``--steps`` GRPO steps (``leagues.trainer.train_learner``: rollout,
TRL's scoring and the update) run with ``rollout_kv_cache_mib`` 0 and the default, and the mean
step time is printed.

    python benchmarks/bench_rollout.py                      # ~4 minutes on 2 shared cores
    python benchmarks/bench_rollout.py --episodes 32 --retries 6 --steps 3
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents.testing.tiny_model import build_tiny_model
from arena.catalog import load_catalog
from arena.config import get_preset
from arena.scenarios import make_scenario
from leagues.generators import Context, HFGenerator, Sample, cut_at_stop, learner_stop_ids
from leagues.rollout import LEARNER, GroupRow, Policy, play_rollouts
from leagues.streams import ChatFormat
from leagues.train_config import TrainConfig
from leagues.trainer import TrainJob, load_chat_tokenizer, train_learner

MIB = 2**20


def rows(args: argparse.Namespace, count: int) -> list[GroupRow]:
    market = get_preset("in-distribution", {"max_buyer_retries": args.retries})
    buyers = (LEARNER, "scripted:time", "scripted:time")
    return [
        GroupRow(f"b{i}", make_scenario(market, load_catalog(), 11, i), "scripted:prober", buyers,
                 "buyer_1")
        for i in range(count)
    ]  # fmt: skip


class Timed:
    """A generator wrapped to time each call (one call = one round of turns)."""

    def __init__(self, generate: Callable[[list[Context], int], list[Sample]]) -> None:
        self.generate = generate
        self.rounds: list[tuple[int, int, float]] = []  # (streams, context tokens, seconds)

    def __call__(self, contexts: list[Context], seed: int) -> list[Sample]:
        start = time.perf_counter()
        out = self.generate(contexts, seed)
        tokens = sum(len(c.ids) for c in contexts)
        self.rounds.append((len(contexts), tokens, time.perf_counter() - start))
        return out


def transformers_generate(model: Any, tokenizer: Any, args: argparse.Namespace) -> Callable:
    """The reference sampler: ``model.generate`` on the whole padded streams, seeded per chunk."""
    import torch

    stops = learner_stop_ids(model, tokenizer)
    pad = tokenizer.pad_token_id

    def generate(contexts: list[Context], seed: int) -> list[Sample]:
        out: list[Sample] = []
        for start in range(0, len(contexts), args.chunk):
            streams = [c.ids for c in contexts[start : start + args.chunk]]
            width = max(len(s) for s in streams)
            ids = torch.tensor([[pad] * (width - len(s)) + s for s in streams])
            mask = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in streams])
            with torch.random.fork_rng(devices=[]), torch.no_grad():
                torch.manual_seed(seed + start)
                result = model.generate(
                    input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0, top_k=0,
                    max_new_tokens=args.max_new_tokens, pad_token_id=pad,
                    eos_token_id=sorted(stops), return_dict_in_generate=True, output_scores=True,
                )  # fmt: skip
            new = result.sequences[:, width:]
            logps = torch.stack(result.scores, 1).float().log_softmax(-1)
            chosen = logps.gather(-1, new.unsqueeze(-1)).squeeze(-1)
            pairs = zip(new.tolist(), chosen.tolist(), strict=True)
            out += [cut_at_stop(row, lps, stops) for row, lps in pairs]
        return out

    return generate


def rollout_benchmark(model_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForCausalLM

    from agents.backends.hf_attention import register

    tokenizer = load_chat_tokenizer(model_dir)
    model = AutoModelForCausalLM.from_pretrained(
        str(model_dir), dtype=torch.float32, attn_implementation=register()
    ).eval()
    market = get_preset("in-distribution", {"max_buyer_retries": args.retries})
    batch = rows(args, args.episodes)
    samplers = {
        "generate": transformers_generate(model, tokenizer, args),
        "loop": HFGenerator(model, tokenizer, 1.0, 1.0, args.max_new_tokens, args.chunk, 0),
        "reuse": HFGenerator(
            model, tokenizer, 1.0, 1.0, args.max_new_tokens, args.chunk, 1024 * MIB
        ),
    }
    results: dict[str, Any] = {}
    played: dict[str, Any] = {}
    for name, sampler in samplers.items():
        timed = Timed(sampler)
        policy = Policy("hf:learner", ChatFormat(tokenizer), timed, args.max_new_tokens, 16384)
        start = time.perf_counter()
        rollouts = play_rollouts(batch, market, policy, seed=args.seed)
        seconds = time.perf_counter() - start
        streams = [r.streams["buyer_1"] for r in rollouts]
        played[name] = [(s.completion_ids, s.logprobs) for s in streams]
        rounds = [{"streams": n, "context_tokens": t, "seconds": s} for n, t, s in timed.rounds]
        results[name] = {
            "seconds": seconds,
            "rounds": rounds,
            "turns_per_stream": statistics.mean(len(s.replies) for s in streams),
            "stream_tokens": statistics.mean(len(s.context) for s in streams),
        }
        if isinstance(sampler, HFGenerator):
            results[name]["prefilled_tokens"] = sampler.prefilled
            results[name]["reused_tokens"] = sampler.reused
    results["identical"] = played["loop"] == played["reuse"]
    return results


def step_benchmark(model_dir: Path, args: argparse.Namespace, out: Path) -> dict[str, float]:
    """Mean seconds of a GRPO step (after the first) with the stream KV recomputed and kept."""
    train = TrainConfig.from_dict(
        {
            "num_generations": args.group_size,
            "per_device_train_batch_size": args.group_size,
            "gradient_accumulation_steps": args.episodes // args.group_size,
            "max_completion_length": args.max_new_tokens,
            "save_steps": 10_000,
        }
    )
    market = get_preset("in-distribution", {"max_buyer_retries": args.retries})
    seconds = {}
    for mib in (0, train.rollout_kv_cache_mib):
        job = TrainJob(
            model_dir, None, tuple(rows(args, args.steps * train.scenarios_per_step)), market,
            dataclasses.replace(train, rollout_kv_cache_mib=mib), args.steps,
            out / f"kv{mib}" / "trainer", out / f"kv{mib}" / "adapter", args.seed,
        )  # fmt: skip
        times: list[float] = []

        def record(_step: int, logs: dict[str, float], times: list[float] = times) -> None:
            times.append(float(logs["step_time"]))

        train_learner(job, record)
        seconds[f"kv_cache_mib={mib}"] = statistics.mean(times[1:] or times)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=16, help="rollout batch (GRPO entries)")
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--retries", type=int, default=6, help="re-samples: turns per stream - 1")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--chunk", type=int, default=16, help="rows decoded together")
    parser.add_argument("--steps", type=int, default=3, help="GRPO steps per setting (0: none)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_tiny_model(Path(tmp) / "tiny", seed=0, max_positions=16384)
        rollout = rollout_benchmark(model_dir, args)
        for name in ("generate", "loop", "reuse"):
            r = rollout[name]
            rounds = " ".join(f"{x['seconds']:.2f}" for x in r["rounds"])
            print(
                f"{name:>8}: rollout {r['seconds']:6.1f} s, {r['turns_per_stream']:.1f} turns of "
                f"{r['stream_tokens']:.0f}-token streams; per round (s): {rounds}"
            )
        print(f"loop and reuse identical: {rollout['identical']}")
        speed = rollout["loop"]["seconds"] / rollout["reuse"]["seconds"]
        print(f"reuse vs loop: {speed:.2f}x, vs generate: "
              f"{rollout['generate']['seconds'] / rollout['reuse']['seconds']:.2f}x")  # fmt: skip
        steps = step_benchmark(model_dir, args, Path(tmp)) if args.steps else {}
        for name, seconds in steps.items():
            print(f"GRPO step, {name}: {seconds:.1f} s")
    if args.json:
        args.json.write_text(json.dumps({"rollout": rollout, "steps": steps}, indent=2))
    if not rollout["identical"]:
        raise SystemExit("KV reuse changed the rollout: a bug")


if __name__ == "__main__":
    main()
