"""Build a tiny random chat model (tokenizer + Qwen2 weights) for tests, in a few seconds.

The tokenizer is a byte-level BPE trained on the project's own prompts and scripted replies
(:func:`prompt_corpus`), with every digit a token of its own, so prompts are short and prices are
read digit by digit. The model is a randomly initialised Qwen2ForCausalLM: its outputs are
gibberish, but it exercises the full load/template/pad/generate/decode path of every back-end
(:mod:`agents.testing.pretrain` then teaches it to copy prices, for the learning leagues).

Usage: python -m agents.testing.tiny_model OUT_DIR
"""

from __future__ import annotations

import argparse
import functools
from pathlib import Path

from agents.engine import play_vs_pool
from agents.finetune import chat_examples, conversations
from agents.llm import LLMAgentConfig
from agents.prompts import PROMPT_STYLES
from arena.catalog import default_catalog
from arena.config import get_preset
from arena.scenarios import make_scenarios

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

CORPUS_SELLERS = ("scripted:prober", "scripted:satisficer", "scripted:time")
CORPUS_BUYERS = ("scripted:time", "scripted:tit-for-tat", "scripted:hardliner")
CORPUS_PRESETS = ("in-distribution", "multi-product")


@functools.cache
def prompt_corpus(seed: int, episodes: int = 24) -> tuple[str, ...]:
    """Deterministic tokenizer training text: the project's own prompts as ChatML.

    Scripted sellers and buyers play ``episodes`` episodes of each of ``CORPUS_PRESETS`` on the
    packaged catalogue, and every seat's chat is rendered as an LLM agent would see it, in each
    prompt style the market allows, with the replies sent. A tokenizer trained on this knows the
    prompt vocabulary, so the full seller prompt is a few hundred tokens instead of ~1,700.
    """
    texts = []
    for preset in CORPUS_PRESETS:
        market = get_preset(preset)
        scenarios = make_scenarios(market, default_catalog(), seed, episodes)
        records = []
        for k, seller in enumerate(CORPUS_SELLERS):
            records += play_vs_pool(market, scenarios[k :: len(CORPUS_SELLERS)], seller,
                                    list(CORPUS_BUYERS))[0]  # fmt: skip
        for style in PROMPT_STYLES:
            if style == "compact" and market.num_products > 1:
                continue
            examples = chat_examples(records, market, agent=LLMAgentConfig(prompt=style))
            for _, chat in conversations(examples):
                texts.append("".join(f"{IM_START}{r}\n{c}{IM_END}\n" for r, c in chat))
    return tuple(texts)


def build_tokenizer(seed: int, vocab_size: int, max_positions: int = MAX_POSITIONS):
    # -> transformers.PreTrainedTokenizerFast
    """Train a byte-level BPE on :func:`prompt_corpus` and wrap it for transformers."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if vocab_size < 256 + len(SPECIAL_TOKENS):
        raise ValueError(
            f"vocab_size={vocab_size} is too small: a byte-level BPE needs at least "
            f"{256 + len(SPECIAL_TOKENS)} (256 bytes + special tokens)"
        )
    tokenizer = Tokenizer(models.BPE())
    # Digits are single tokens, so a price is copied digit by digit whatever its value (a merged
    # "19.99" would be one opaque token, learnt per product instead of read).
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(prompt_corpus(seed), trainer)
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
    vocab_size: int = 1024,
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
    parser.add_argument("--vocab-size", type=int, default=1024)
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
