"""Build a tiny random chat model (tokenizer + Qwen2 weights) for tests, in a few seconds.

The tokenizer is a byte-level BPE trained on generated negotiation transcripts in the arena's text
protocol (Thought/Target/Talk/Action lines with dollar prices), so prompts and answers tokenize
into realistic pieces. The model is a randomly initialised Qwen2ForCausalLM: its outputs are
gibberish, but it exercises the full load/template/pad/generate/decode path of every back-end.

Usage: python -m agents.testing.tiny_model OUT_DIR
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

BOS_TOKEN = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
PAD_TOKEN = "<|pad|>"
SPECIAL_TOKENS = (BOS_TOKEN, IM_START, IM_END, PAD_TOKEN)
MAX_POSITIONS = 2048

# ChatML: what Qwen-style models use; the assistant turn ends with <|im_end|> (our eos).
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

ITEMS = ("bicycle", "desk lamp", "guitar", "used laptop", "camera", "sofa", "kettle", "bookshelf")
SELLER_TALK = (
    "This {item} is in great shape, I can do ${price}.",
    "Best I can offer is ${price}, it is a fair price.",
    "Other buyers are interested, ${price} and it is yours.",
    "I can't go lower than ${price}.",
)
BUYER_TALK = (
    "Would you take ${price} for the {item}?",
    "My budget is tight, how about ${price}?",
    "I like it, but ${price} is my limit.",
    "Deal at ${price} if you can ship today.",
)
THOUGHTS = (
    "The offer is close to my limit, I should push a little.",
    "Buyer {target} seems eager; hold the price.",
    "I have few messages left, I should close soon.",
    "This is below my budget, accept it.",
)


def _price(rng: np.random.Generator, low: float, high: float) -> str:
    return f"{rng.uniform(low, high):.2f}"


def negotiation_turn(rng: np.random.Generator, role: str, item: str, n_buyers: int) -> str:
    """One protocol-formatted answer (Section 4.1 text protocol) with random prices."""
    price = _price(rng, 5.0, 500.0)
    target = int(rng.integers(1, n_buyers + 1))
    thought = THOUGHTS[int(rng.integers(len(THOUGHTS)))].format(target=target)
    if role == "seller":
        talk = SELLER_TALK[int(rng.integers(len(SELLER_TALK)))].format(item=item, price=price)
        action = ("[SELL] $" + price, "[DEAL] $" + price, "[QUIT]")[int(rng.integers(3))]
        return f"Thought: {thought}\nTarget: {target}\nTalk: {talk}\nAction: {action}"
    talk = BUYER_TALK[int(rng.integers(len(BUYER_TALK)))].format(item=item, price=price)
    action = ("[BUY] $" + price, "[DEAL]", "[QUIT]")[int(rng.integers(3))]
    return f"Thought: {thought}\nTalk: {talk}\nAction: {action}"


def negotiation_dialogue(rng: np.random.Generator) -> str:
    """A ChatML transcript: system brief, observation, and a protocol answer, a few rounds."""
    item = ITEMS[int(rng.integers(len(ITEMS)))]
    n_buyers = int(rng.integers(1, 5))
    role = "seller" if rng.random() < 0.5 else "buyer"
    secret = "cost" if role == "seller" else "budget"
    parts = [
        f"{IM_START}system\nYou are the {role} of a {item}. "
        f"Your private {secret} is ${_price(rng, 5.0, 500.0)}.{IM_END}\n"
    ]
    for _ in range(int(rng.integers(1, 4))):
        parts.append(
            f"{IM_START}user\nMessages left: {int(rng.integers(1, 30))}. "
            f"Last offer: ${_price(rng, 5.0, 500.0)}.{IM_END}\n"
        )
        parts.append(
            f"{IM_START}assistant\n{negotiation_turn(rng, role, item, n_buyers)}{IM_END}\n"
        )
    return "".join(parts)


def negotiation_corpus(seed: int, n_dialogues: int = 400) -> list[str]:
    """Deterministic training text for the tokenizer."""
    rng = np.random.default_rng(seed)
    return [negotiation_dialogue(rng) for _ in range(n_dialogues)]


def build_tokenizer(seed: int, vocab_size: int, max_positions: int = MAX_POSITIONS):
    # -> transformers.PreTrainedTokenizerFast
    """Train a byte-level BPE on the negotiation corpus and wrap it for transformers."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if vocab_size < 256 + len(SPECIAL_TOKENS):
        raise ValueError(
            f"vocab_size={vocab_size} is too small: a byte-level BPE needs at least "
            f"{256 + len(SPECIAL_TOKENS)} (256 bytes + special tokens)"
        )
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(negotiation_corpus(seed), trainer)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=BOS_TOKEN,
        eos_token=IM_END,
        pad_token=PAD_TOKEN,
        model_max_length=max_positions,
    )
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def build_tiny_model(
    out_dir: str | Path,
    seed: int = 0,
    vocab_size: int = 512,
    hidden: int = 64,
    layers: int = 2,
    heads: int = 4,
    max_positions: int = MAX_POSITIONS,
) -> Path:
    """Write a tokenizer and a random Qwen2ForCausalLM to out_dir; returns the folder.

    vLLM's CPU attention needs a head size (hidden / heads) of at least 32: use heads=2 with the
    default hidden size for a model both the hf and vllm back-ends run. ``max_positions`` is the
    context length (RoPE: a random model works at any length; multi-turn runs need more than 2,048).
    """
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    if hidden % heads != 0:
        raise ValueError(f"hidden={hidden} must be divisible by heads={heads}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(seed, vocab_size, max_positions)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):  # seed the weights without touching global RNG
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Build a tiny random chat model for tests.")
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--vocab-size", type=int, default=512)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--max-positions", type=int, default=MAX_POSITIONS)
    args = parser.parse_args(argv)
    path = build_tiny_model(
        args.out_dir,
        args.seed,
        args.vocab_size,
        args.hidden,
        args.layers,
        args.heads,
        args.max_positions,
    )
    print(path)


if __name__ == "__main__":
    main()
