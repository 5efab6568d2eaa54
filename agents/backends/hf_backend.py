"""Local transformers back-end: chat template, a batched decoding loop, per-request seeds.

Reproducibility rule: a request's text depends only on (model, prompt, sampling config), never on
which other requests share its batch. The decoding loop is written here (not `model.generate`)
so that every row keeps its own sampling settings and its own random stream:

  * Prefill runs one prompt at a time, unpadded: a prompt's key/value cache and first-token
    logits are exactly what it gets alone. On CPU this costs nothing: prefill is compute-bound
    (one 1,700-token prompt already fills the matrix kernels), and a padded batch would need a
    full attention mask, measured 2.5x slower per row than the unmasked causal kernel.
  * The caches are then left-padded into one static cache and decoded together, one token per
    step, with an attention mask that hides the padding and per-row position ids; finished rows
    leave the batch. Padding changes a row's logits only in the last float bits (attention sums
    over a longer, masked key axis); that has flipped no token in the tests, though an exact
    near-tie between two tokens could in principle resolve differently.
  * Each step a greedy row (temperature 0) takes the argmax; a sampling row draws one uniform
    number from its own numpy generator, seeded with the request's seed (or, when it has none,
    from the back-end's generator: unseeded means "not reproducible"), and picks its token by
    inverse CDF over its temperature- and top-p-adjusted distribution. The global torch RNG is
    never used.
A row stops at any stop token (the model's eos ids, the tokenizer's eos, the chat template's
end-of-turn token) or at its own max_tokens. The padded cache assumes full attention in every
layer (sliding-window layers are rejected). This back-end is meant for small models and tests;
vLLM is the throughput path.
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agents.backends.base import (
    BackendStats,
    ChatRequest,
    Completion,
    StatsRecorder,
    non_default_query,
    parse_optional_int,
)

DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("auto", "float32", "float16", "bfloat16")
# tokenizer_config classes meaning "a plain tokenizer.json": load them as exactly that, because
# AutoTokenizer maps by model_type (e.g. qwen2 -> Qwen2Tokenizer) and may re-tokenize differently.
PLAIN_FAST_TOKENIZER_CLASSES = frozenset({"PreTrainedTokenizerFast", "TokenizersBackend"})
# Tokens that close an assistant turn in common chat templates (ChatML, Llama 3, Gemma, Phi).
END_OF_TURN_TOKENS = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>")


@dataclass(frozen=True)
class HFConfig:
    """Back-end-level settings for a local transformers model."""

    device: str = field(
        default="auto", metadata={"help": "cpu, cuda, or auto (cuda when available)", "parse": str}
    )
    dtype: str = field(
        default="auto",
        metadata={
            "help": "auto (float32 on cpu, bfloat16 on cuda), float32, float16, bfloat16",
            "parse": str,
        },
    )
    batch_size: int = field(
        default=8, metadata={"help": "most prompts decoded together", "parse": int}
    )
    threads: int | None = field(
        default=None,
        metadata={
            "help": "torch CPU threads (torch.set_num_threads, process-wide); unset leaves "
            "torch's setting alone",
            "parse": parse_optional_int,
        },
    )

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise ValueError(f"device={self.device!r} is invalid: use one of {', '.join(DEVICES)}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype={self.dtype!r} is invalid: use one of {', '.join(DTYPES)}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size={self.batch_size} is invalid: use an integer >= 1")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads={self.threads} is invalid: use an integer >= 1 or unset")


def load_tokenizer(path: str | Path) -> Any:
    """Load a tokenizer for chat generation, left-padded, with a pad token.

    Folders whose tokenizer_config names a plain fast tokenizer (like our tiny test model) are
    loaded as PreTrainedTokenizerFast so tokenization round-trips exactly; anything else goes
    through AutoTokenizer.
    """
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    folder = Path(path)
    config_file = folder / "tokenizer_config.json"
    tokenizer_class = None
    if config_file.is_file():
        tokenizer_class = json.loads(config_file.read_text()).get("tokenizer_class")
    if tokenizer_class in PLAIN_FAST_TOKENIZER_CLASSES and (folder / "tokenizer.json").is_file():
        tokenizer = PreTrainedTokenizerFast.from_pretrained(str(folder))
    else:
        tokenizer = AutoTokenizer.from_pretrained(str(path))
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise ValueError(f"tokenizer at {path} has neither a pad nor an eos token; add one")
        tokenizer.pad_token = tokenizer.eos_token
    if tokenizer.chat_template is None:
        raise ValueError(f"tokenizer at {path} has no chat_template; chat models need one")
    return tokenizer


def stop_token_ids(generation_eos: int | list[int] | None, tokenizer: Any) -> frozenset[int]:
    """Ids that end a reply: the model's eos id(s), the tokenizer's eos, end-of-turn tokens."""
    ids = generation_eos if isinstance(generation_eos, list) else [generation_eos]
    ids = [*ids, tokenizer.eos_token_id]
    added = tokenizer.get_added_vocab()
    ids += [added[token] for token in END_OF_TURN_TOKENS if token in added]
    stops = frozenset(int(i) for i in ids if i is not None)
    if not stops:
        raise ValueError("the model and tokenizer name no eos or end-of-turn token; add one")
    return stops


def next_tokens(logits: Any, temperature: Any, top_p: Any, uniform: Any) -> Any:
    """One token per row: argmax where temperature is 0, else an inverse-CDF draw.

    `logits` is (rows, vocab); `temperature`, `top_p` and `uniform` (numbers in [0, 1), one per
    row) are (rows,) float tensors. A sampling row keeps the smallest set of most likely tokens
    whose mass reaches top_p (at least one), renormalised; `uniform` picks the token whose
    cumulative-mass interval contains it, so equal uniforms give equal tokens.
    """
    import torch

    logits = logits.float()
    greedy = logits.argmax(dim=-1)
    sampling = temperature > 0
    if not bool(sampling.any()):
        return greedy
    scaled = logits / torch.where(sampling, temperature, 1.0).unsqueeze(-1)
    probs, order = torch.sort(scaled.softmax(dim=-1), dim=-1, descending=True, stable=True)
    before = probs.cumsum(dim=-1) - probs  # mass of the more likely tokens
    probs = probs * (before < top_p.unsqueeze(-1))
    cumulative = probs.cumsum(dim=-1)
    target = (uniform * cumulative[:, -1]).unsqueeze(-1)
    picked = torch.searchsorted(cumulative, target, right=True).clamp(max=probs.shape[-1] - 1)
    drawn = order.gather(-1, picked).squeeze(-1)
    return torch.where(sampling, drawn, greedy)


def batch_cache(caches: Sequence[Any], lengths: Sequence[int], size: int, config: Any) -> Any:
    """One StaticCache of `size` positions holding every row's prefill cache, left-padded.

    A static cache is written in place; transformers' DynamicCache concatenates the whole cache
    at every step, which measured 5x slower per decode step on 16 rows of 1,700 tokens.
    """
    import torch
    from transformers import StaticCache

    width = max(lengths)
    cache = StaticCache(config=config, max_cache_len=size)
    for index, layer in enumerate(cache.layers):
        if layer.is_sliding:
            raise ValueError(
                f"layer {index} uses sliding-window attention; the hf back-end pads caches for "
                "full attention only: use the vllm back-end for this model"
            )
        keys, values = [], []
        for row, length in zip(caches, lengths, strict=True):
            pad = (0, 0, width - length, 0)  # left-pad the sequence axis (dim -2)
            keys.append(torch.nn.functional.pad(row.layers[index].keys, pad))
            values.append(torch.nn.functional.pad(row.layers[index].values, pad))
        keys_batch, values_batch = torch.cat(keys), torch.cat(values)
        positions = torch.arange(width, device=keys_batch.device)
        layer.update(keys_batch, values_batch, cache_kwargs={"cache_position": positions})
    return cache


def keep_rows(cache: Any, rows: Any) -> None:
    """Drop finished rows from a StaticCache (its layers have no batch_select_indices)."""
    for layer in cache.layers:
        layer.keys = layer.keys[rows]
        layer.values = layer.values[rows]
        layer.batch_size = len(rows)


def resolve_device_dtype(device: str, dtype: str, name: str = "device") -> tuple[str, str]:
    """Turn "auto" into a concrete device and dtype name (bfloat16 on CUDA, float32 on CPU).

    ``name`` is the setting to blame in the error (the back-end's ``device`` parameter, or a
    league's ``league.learner.train.device``).
    """
    import torch

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    elif device == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{name}=cuda but torch sees no CUDA GPU; use cpu or auto")
    if dtype == "auto":
        dtype = "bfloat16" if device == "cuda" else "float32"
    return device, dtype


class HFBackend:
    """A transformers causal LM answering chat requests in batches (see the module docstring)."""

    def __init__(self, name: str, config: HFConfig = HFConfig()) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        self.name = name
        self.config = config
        self.key = f"hf:{name}" + non_default_query(config)
        if config.threads is not None:
            torch.set_num_threads(config.threads)
        self.device, self.dtype = resolve_device_dtype(config.device, config.dtype)
        self.tokenizer = load_tokenizer(name)
        self.model = AutoModelForCausalLM.from_pretrained(name, dtype=getattr(torch, self.dtype))
        self.model.to(self.device)
        self.model.eval()
        self.stop_ids = stop_token_ids(self.model.generation_config.eos_token_id, self.tokenizer)
        # transformers 5 renamed the forward argument past_key_values to cache.
        parameters = inspect.signature(self.model.forward).parameters
        self._cache_arg = "cache" if "cache" in parameters else "past_key_values"
        self._recorder = StatsRecorder()
        # Seeds for unseeded sampling: fresh entropy on purpose (see module docstring).
        self._rng = np.random.default_rng()

    @property
    def stats(self) -> BackendStats:
        return self._recorder.stats

    def __repr__(self) -> str:
        return f"HFBackend(key={self.key!r}, device={self.device!r}, dtype={self.dtype!r})"

    def generate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        """Complete all requests; prompts that do not fit the context come back as errors."""
        if self.model is None:
            raise RuntimeError(f"{self.key} is closed")
        start = time.perf_counter()
        prompts = [self._prompt_ids(request) for request in requests]
        completions: list[Completion | None] = [None] * len(requests)
        context = getattr(self.model.config, "max_position_embeddings", None)
        runnable: list[int] = []
        for index, (request, ids) in enumerate(zip(requests, prompts, strict=True)):
            needed = len(ids) + request.sampling.max_tokens
            if context is not None and needed > context:
                completions[index] = Completion(
                    text="",
                    tokens_in=len(ids),
                    error=f"prompt of {len(ids)} tokens + max_tokens "
                    f"{request.sampling.max_tokens} exceeds the model context of {context}",
                )
            else:
                runnable.append(index)
        size = self.config.batch_size
        for begin in range(0, len(runnable), size):
            indices = runnable[begin : begin + size]
            rows = self._decode_batch([prompts[i] for i in indices], [requests[i] for i in indices])
            for index, row in zip(indices, rows, strict=True):
                text = self.tokenizer.decode(row, skip_special_tokens=True)
                completions[index] = Completion(
                    text=text, tokens_in=len(prompts[index]), tokens_out=len(row)
                )
        done = [c for c in completions if c is not None]
        assert len(done) == len(requests)
        self._recorder.record(done, time.perf_counter() - start)
        return done

    def close(self) -> None:
        """Drop the model so its memory can be freed."""
        import gc

        import torch

        self.model = None
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def _prompt_ids(self, request: ChatRequest) -> list[int]:
        text = self.tokenizer.apply_chat_template(
            request.as_openai_messages(), add_generation_prompt=True, tokenize=False
        )
        # The chat template already writes any BOS/special tokens the model expects.
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _decode_batch(
        self, prompts: list[list[int]], requests: list[ChatRequest]
    ) -> list[list[int]]:
        """The new tokens of every prompt, each ending at its first stop token or max_tokens."""
        import torch

        device = self.device
        sampling = [request.sampling for request in requests]
        rngs = [
            np.random.default_rng(s.seed if s.seed is not None else self._rng.integers(2**63))
            for s in sampling
        ]
        lengths = [len(ids) for ids in prompts]
        width = max(lengths)
        most = max(s.max_tokens for s in sampling)
        size = width + most - 1  # a row's last token is never fed back to the model
        with torch.inference_mode():
            caches, first_logits = [], []
            for ids in prompts:
                output = self.model(
                    input_ids=torch.tensor([ids], device=device), use_cache=True, logits_to_keep=1
                )
                caches.append(getattr(output, self._cache_arg))
                first_logits.append(output.logits[:, -1])
            cache = batch_cache(caches, lengths, size, self.model.config)
            del caches
            logits = torch.cat(first_logits)
            mask = torch.zeros(len(prompts), size, dtype=torch.long, device=device)
            for row, length in enumerate(lengths):
                mask[row, width - length : width] = 1
            positions = torch.tensor(lengths, device=device)
            live = list(range(len(prompts)))  # request rows still in the batch, in batch order
            generated: list[list[int]] = [[] for _ in prompts]
            for step in range(most):
                tokens = next_tokens(
                    logits,
                    torch.tensor([sampling[r].temperature for r in live], device=device),
                    torch.tensor([sampling[r].top_p for r in live], device=device),
                    torch.tensor(
                        [rngs[r].random() if sampling[r].temperature > 0 else 0.0 for r in live],
                        device=device,
                    ),
                )
                keep = []
                for place, (row, token) in enumerate(zip(live, tokens.tolist(), strict=True)):
                    generated[row].append(token)
                    finished = token in self.stop_ids
                    if not finished and len(generated[row]) < sampling[row].max_tokens:
                        keep.append(place)
                if not keep:
                    break
                if len(keep) < len(live):
                    chosen = torch.tensor(keep, device=device)
                    keep_rows(cache, chosen)
                    mask, positions, tokens = mask[chosen], positions[chosen], tokens[chosen]
                    live = [live[place] for place in keep]
                mask[:, width + step] = 1
                output = self.model(
                    input_ids=tokens.unsqueeze(-1),
                    attention_mask=mask,
                    position_ids=positions.unsqueeze(-1),
                    use_cache=True,
                    **{self._cache_arg: cache},
                )
                positions = positions + 1
                logits = output.logits[:, -1]
        return generated
