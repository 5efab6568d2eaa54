"""GPU throughput of league training: generation and GRPO training tokens per second.

Runs on one NVIDIA GPU; nothing is downloaded. A Qwen2-architecture model of about 0.5B
parameters is built from a config with random weights (``--layers``, ``--hidden``) and saved with
the project's tiny tokenizer (whose vocabulary sizes the embedding), then:

1. generation: the learner's sampler alone, ``--prompts`` prompts of the seller's real first
   observation, ``--max-new-tokens`` each (``ignore_eos``-like: the random model rarely stops),
   through vLLM when installed (``--generator vllm``) or the model's own ``generate`` (``hf``);
2. training: ``--steps`` GRPO steps (:mod:`leagues.trainer`, CISPO, LoRA) as a seller against
   scripted buyers, generation included, through TRL's vLLM integration in colocate mode when
   ``--generator vllm``. A random model breaks the format at its first turn, so each episode is one
   learner turn: the steps measure the cost of a rollout batch and of the loss, not learning.

Printed: generated tokens per second, and per training step the seconds and the tokens the loss
ran over (prompt + completion) per second.

    python benchmarks/gpu_throughput.py                      # vLLM colocate if installed
    python benchmarks/gpu_throughput.py --generator hf --steps 3 --batch-size 32

``--device cpu`` runs the same code on the CPU, for checking the script on a small model (its
test does, in CI): no GPU machine is needed to notice that a library change broke it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Generation and GRPO training tokens per second on one GPU (random ~0.5B).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--generator", choices=("auto", "vllm", "hf"), default="auto")
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--prompts", type=int, default=256, help="generation benchmark batch")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--steps", type=int, default=4, help="GRPO steps to time")
    parser.add_argument("--batch-size", type=int, default=64, help="episodes per GRPO step")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--micro-batch-size", type=int, default=16)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.3)
    parser.add_argument("--out", type=Path, default=None, help="keep the model and logs here")
    parser.add_argument("--json", type=Path, default=None, help="write the numbers as JSON")
    parser.add_argument(
        "--device",
        choices=("cuda", "cpu"),
        default="cuda",
        help="cpu only to check the script itself on a small model (tests/benchmarks/)",
    )
    return parser.parse_args(argv)


def require_cuda() -> None:
    """Exit with a clear message unless torch sees an NVIDIA GPU."""
    import torch

    if not torch.cuda.is_available():
        sys.exit(
            "gpu_throughput.py needs an NVIDIA GPU with CUDA, and torch sees none "
            f"(torch {torch.__version__}, CUDA build: {torch.version.cuda or 'no'}). "
            "Run it on a GPU machine; on CPU use benchmarks/bench_learning.py instead."
        )


def synchronize(device: str) -> None:
    """Wait for the GPU's queued work, so the timer reads finished work."""
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def build_model(folder: Path, layers: int, hidden: int) -> int:
    """A random Qwen2 model with the tiny tokenizer, saved to ``folder``; returns its size."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    from agents.testing.tiny_model import build_tokenizer

    tokenizer = build_tokenizer(seed=0, vocab_size=1024)
    heads = hidden // 64
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 4,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 4),
        max_position_embeddings=32768,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = Qwen2ForCausalLM(config).to(torch.bfloat16)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return sum(p.numel() for p in model.parameters())


def first_prompts(folder: Path, count: int) -> list[list[int]]:
    """The seller's real first prompt (system prompt and board) on ``count`` scenarios: a
    rollout whose learner answers with the end-of-turn token alone."""
    from arena.catalog import load_catalog
    from arena.config import get_preset
    from arena.scenarios import make_scenario
    from leagues.generators import Context, Sample
    from leagues.rollout import LEARNER, GroupRow, Policy, play_rollouts
    from leagues.streams import ChatFormat
    from leagues.trainer import load_chat_tokenizer

    tokenizer = load_chat_tokenizer(folder)
    market = get_preset("in-distribution")
    catalog = load_catalog()
    rows = [
        GroupRow(
            f"p{i}", make_scenario(market, catalog, 0, i), LEARNER, ("scripted:time",) * 3, "seller"
        )
        for i in range(count)
    ]

    def stop(contexts: list[Context], seed: int) -> list[Sample]:
        return [Sample([tokenizer.eos_token_id], [0.0]) for _ in contexts]

    policy = Policy("hf:benchmark", ChatFormat(tokenizer), stop, 1, 1 << 30)
    return [r.streams["seller"].prompt_ids for r in play_rollouts(rows, market, policy, 0)]


def generation_throughput(folder: Path, args: argparse.Namespace, use_vllm: bool) -> dict:
    """Tokens per second of sampling ``args.prompts`` replies of ``args.max_new_tokens``."""
    prompts = first_prompts(folder, args.prompts)
    if use_vllm:
        from vllm import LLM, SamplingParams

        llm = LLM(model=str(folder), gpu_memory_utilization=0.5, enable_prefix_caching=True)
        params = SamplingParams(temperature=1.0, max_tokens=args.max_new_tokens, ignore_eos=True)
        inputs = [{"prompt_token_ids": p} for p in prompts]
        llm.generate(inputs[:8], params)  # warm-up
        start = time.perf_counter()
        outputs = llm.generate(inputs, params)
        seconds = time.perf_counter() - start
        tokens = sum(len(o.outputs[0].token_ids) for o in outputs)
        del llm
    else:
        import torch
        from transformers import AutoModelForCausalLM

        from leagues.generators import Context, HFGenerator
        from leagues.trainer import load_chat_tokenizer

        tokenizer = load_chat_tokenizer(folder)
        dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype)
        model = model.to(args.device).eval()
        generate = HFGenerator(model, tokenizer, 1.0, 1.0, args.max_new_tokens, chunk=64)
        contexts = [Context(p, (), key) for key, p in enumerate(prompts)]
        generate(contexts[:8], 0)  # warm-up
        synchronize(args.device)
        start = time.perf_counter()
        replies = generate(contexts, 1)
        synchronize(args.device)
        seconds = time.perf_counter() - start
        tokens = sum(len(reply.ids) for reply in replies)
        del model
    prompt_tokens = sum(len(p) for p in prompts)
    return {
        "generator": "vllm" if use_vllm else "hf",
        "prompts": len(prompts),
        "prompt_tokens": prompt_tokens,
        "generated_tokens": tokens,
        "seconds": seconds,
        "generated_tokens_per_second": tokens / seconds,
    }


def training_throughput(folder: Path, out: Path, args: argparse.Namespace, use_vllm: bool) -> dict:
    """Seconds and loss tokens per second of ``args.steps`` GRPO steps as a seller."""
    from arena.catalog import load_catalog
    from arena.config import get_preset
    from arena.scenarios import make_scenario
    from leagues.rollout import LEARNER, GroupRow
    from leagues.train_config import TrainConfig
    from leagues.trainer import TrainJob, train_learner

    market = get_preset("in-distribution")
    train = TrainConfig.from_dict(
        {
            "num_generations": args.group_size,
            "per_device_train_batch_size": args.micro_batch_size,
            "gradient_accumulation_steps": args.batch_size // args.micro_batch_size,
            "max_completion_length": args.max_new_tokens,
            "device": args.device,
            "use_vllm": use_vllm,
            "vllm_mode": "colocate",
            "vllm_gpu_memory_utilization": args.gpu_memory_utilization,
            "save_steps": 10_000,
        }
    )
    catalog = load_catalog()
    rows = tuple(
        GroupRow(
            f"s{i}", make_scenario(market, catalog, 1, i), LEARNER, ("scripted:time",) * 3, "seller"
        )
        for i in range(args.steps * train.scenarios_per_step)
    )
    job = TrainJob(
        folder, None, rows, market, train, args.steps, out / "trainer", out / "adapter", 0
    )
    logs: list[dict[str, float]] = []
    start = time.perf_counter()
    train_learner(job, lambda _step, entry: logs.append(entry))
    total = time.perf_counter() - start
    steps = []
    previous = 0.0
    for entry in logs:
        tokens = entry["num_tokens"] - previous
        previous = entry["num_tokens"]
        steps.append(
            {
                "seconds": entry["step_time"],
                "tokens": tokens,
                "tokens_per_second": tokens / entry["step_time"],
                "learner_tokens_mean": entry["completions/mean_length"],
            }
        )
    return {
        "generator": "vllm colocate" if use_vllm else "hf",
        "wall_seconds": total,
        "steps": steps,
    }


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.device == "cuda":
        require_cuda()
    has_vllm = importlib.util.find_spec("vllm") is not None
    if args.generator == "vllm" and not has_vllm:
        sys.exit("--generator vllm needs vLLM: pip install 'bargain-arena[vllm]'")
    use_vllm = has_vllm if args.generator == "auto" else args.generator == "vllm"
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        folder = out / "model"
        size = build_model(folder, args.layers, args.hidden)
        print(f"random Qwen2 model: {size / 1e6:.0f}M parameters ({args.layers} x {args.hidden})")
        generation = generation_throughput(folder, args, use_vllm)
        print(
            f"generation ({generation['generator']}): {generation['generated_tokens']} tokens for "
            f"{generation['prompts']} prompts in {generation['seconds']:.1f} s = "
            f"{generation['generated_tokens_per_second']:.0f} tokens/s"
        )
        training = training_throughput(folder, out, args, use_vllm)
        for k, step in enumerate(training["steps"], start=1):
            rate = f"{step['tokens_per_second']:.0f} tokens/s"
            print(
                f"GRPO step {k} ({training['generator']}): {step['seconds']:.1f} s, "
                f"{step['tokens']:.0f} tokens in the loss = {rate}"
            )
        result = {"parameters": size, "generation": generation, "training": training}
        if args.json is not None:
            args.json.write_text(json.dumps(result, indent=2))
            print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
