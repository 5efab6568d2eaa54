"""Copy pretraining: teach a fresh tiny model to copy prices out of its prompt.

A real pretrained language model can repeat a number it has read; the project's tiny model, built
from random weights, cannot, and learning it from negotiation transcripts alone is slow: fitted on
a few hundred scripted episodes (long prompts, a handful of prices each) it memorises the training
catalogue's prices instead, and on held-out products it writes plausible but wrong numbers (every
episode a violation). Copying does emerge within about a thousand steps on short synthetic
sequences, and then carries over to the real prompts (docs/training.md has the measurements):

    system:    Product: <filler words>. List price $L. Your cost is $C.
    user:      Buyer 1: bids $B1 / Buyer 2: bids $B2 / ...   [+ "Take buyer k."]
    assistant: Action: [SELL] $L           or    Action: [DEAL] $Bk

Prices have one to four integer digits, so neither their length nor their digits can be guessed;
the loss is on the reply only. This is the tiny model's stand-in for pretraining, not part of the
negotiation: it never sees a market, a rule or a reward.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agents.backends.hf_attention import register as register_attention
from agents.backends.hf_backend import load_tokenizer

FILLER = [
    "the",
    "a",
    "buyer",
    "seller",
    "price",
    "list",
    "cost",
    "bid",
    "offer",
    "deal",
    "turn",
    "left",
    "active",
    "message",
    "product",
    "new",
    "great",
    "used",
    "compact",
    "premium",
    "set",
    "of",
    "with",
    "for",
    "and",
]


@dataclass(frozen=True)
class PretrainConfig:
    """How :func:`pretrain_copying` trains."""

    steps: int = field(default=1000, metadata={"help": "Optimizer steps (0: no pretraining)."})
    batch_size: int = field(default=32, metadata={"help": "Sequences per step."})
    learning_rate: float = field(default=1e-3, metadata={"help": "AdamW learning rate."})
    seed: int = field(default=0, metadata={"help": "Seeds the sequences and the weights' updates."})

    def __post_init__(self) -> None:
        if self.steps < 0 or self.batch_size < 1 or not self.learning_rate > 0:
            raise ValueError(
                f"steps={self.steps} must be >= 0, batch_size={self.batch_size} >= 1 and "
                f"learning_rate={self.learning_rate} > 0"
            )


def random_price(rng: np.random.Generator) -> str:
    """``$1,234.56`` with one to four integer digits, each length equally likely."""
    digits = int(rng.integers(1, 5))
    whole = int(rng.integers(10 ** (digits - 1), 10**digits))
    return f"${whole:,}.{int(rng.integers(0, 100)):02d}"


def copy_example(rng: np.random.Generator) -> tuple[tuple[tuple[str, str], ...], str]:
    """One synthetic (chat, reply): the reply repeats the list price or a named buyer's bid."""
    list_price, cost = random_price(rng), random_price(rng)
    bids = [random_price(rng) for _ in range(int(rng.integers(1, 4)))]
    filler = " ".join(rng.choice(FILLER, size=int(rng.integers(0, 12))))
    system = f"Product: {filler}. List price {list_price}. Your cost is {cost}."
    user = "\n".join(f"Buyer {i + 1}: bids {bid}" for i, bid in enumerate(bids))
    if rng.random() < 0.5:
        reply = f"Action: [SELL] {list_price}"
    else:
        k = int(rng.integers(len(bids)))
        user += f"\nTake buyer {k + 1}."
        reply = f"Action: [DEAL] {bids[k]}"
    return (("system", system), ("user", user)), reply


def encode_example(tokenizer: Any, chat: tuple[tuple[str, str], ...], reply: str) -> list[int]:
    """Token ids of the chat, its generation prompt, the reply and its end-of-turn token."""
    prompt = tokenizer.apply_chat_template(
        [{"role": r, "content": c} for r, c in chat], add_generation_prompt=True, tokenize=False
    )
    full = tokenizer.apply_chat_template(
        [{"role": r, "content": c} for r, c in (*chat, ("assistant", reply))], tokenize=False
    )
    return tokenizer(prompt, add_special_tokens=False)["input_ids"], tokenizer(
        full[len(prompt) :], add_special_tokens=False
    )["input_ids"]


def copy_accuracy(model: Any, tokenizer: Any, examples: int = 64, seed: int = 12345) -> float:
    """Share of fresh examples whose greedy reply is exactly right (the price copied)."""
    import torch

    rng = np.random.default_rng(seed)
    hits = 0
    with torch.no_grad():
        for _ in range(examples):
            chat, reply = copy_example(rng)
            prompt, _ = encode_example(tokenizer, chat, reply)
            out = model.generate(
                torch.tensor([prompt]),
                max_new_tokens=24,
                do_sample=False,
                eos_token_id=tokenizer.eos_token_id,
                pad_token_id=tokenizer.pad_token_id,
            )
            text = tokenizer.decode(out[0, len(prompt) :], skip_special_tokens=True)
            hits += text.strip() == reply
    return hits / examples


def pretrain_copying(
    model_dir: Path, out_dir: Path, config: PretrainConfig, log: Callable[[str], None] | None = None
) -> float:
    """Pretrain the model in ``model_dir`` on copy examples and save it to ``out_dir``; returns
    its copy accuracy on fresh examples. Reproducible from ``config.seed``; the global torch
    generator is left alone."""
    import torch
    from transformers import AutoModelForCausalLM

    started = time.perf_counter()
    tokenizer = load_tokenizer(model_dir)
    rng = np.random.default_rng(config.seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        # each padded row's span as one causal flash call (agents.backends.hf_attention)
        model = AutoModelForCausalLM.from_pretrained(
            str(model_dir), dtype=torch.float32, attn_implementation=register_attention()
        )
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate)
        for step in range(config.steps):
            batch = [
                encode_example(tokenizer, *copy_example(rng)) for _ in range(config.batch_size)
            ]
            width = max(len(p) + len(r) for p, r in batch)
            ids = torch.full((len(batch), width), tokenizer.pad_token_id, dtype=torch.long)
            labels = torch.full((len(batch), width), -100, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, (prompt, reply) in enumerate(batch):
                ids[row, : len(prompt) + len(reply)] = torch.tensor(prompt + reply)
                labels[row, len(prompt) : len(prompt) + len(reply)] = torch.tensor(reply)
                mask[row, : len(prompt) + len(reply)] = 1
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            if log is not None and (step + 1) % 250 == 0:
                value = float(loss.detach())
                log(f"copy pretraining step {step + 1}/{config.steps}: loss {value:.3f}")
        model.eval()
        accuracy = copy_accuracy(model, tokenizer)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    if log is not None:
        log(f"copy pretraining: {config.steps} steps in {time.perf_counter() - started:.0f} s, "
            f"copy accuracy {accuracy:.2f}")  # fmt: skip
    return accuracy
