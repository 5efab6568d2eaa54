"""Local transformers back-end: chat template, left-padded batched generation, seeded sampling.

Reproducibility rule: a request's text depends only on (model, prompt, sampling config), never on
which other requests share its batch.
  * Greedy requests (temperature == 0) are batched with left padding; greedy decoding with a
    correct attention mask gives the same tokens as one-at-a-time generation.
  * Seeded sampling requests are generated one at a time, each under `torch.manual_seed(seed)`
    inside `torch.random.fork_rng`, so the global torch RNG is left untouched.
  * Unseeded sampling requests are batched by identical sampling config and seeded from the
    back-end's own generator (fresh entropy: unseeded means "not reproducible").
This back-end is meant for small models and tests; vLLM is the throughput path.
"""

from __future__ import annotations

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
    SamplingConfig,
    StatsRecorder,
    non_default_query,
)

DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("auto", "float32", "float16", "bfloat16")
# tokenizer_config classes meaning "a plain tokenizer.json": load them as exactly that, because
# AutoTokenizer maps by model_type (e.g. qwen2 -> Qwen2Tokenizer) and may re-tokenize differently.
PLAIN_FAST_TOKENIZER_CLASSES = frozenset({"PreTrainedTokenizerFast", "TokenizersBackend"})


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
        default=8, metadata={"help": "most prompts per generate() call", "parse": int}
    )

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise ValueError(f"device={self.device!r} is invalid: use one of {', '.join(DEVICES)}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype={self.dtype!r} is invalid: use one of {', '.join(DTYPES)}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size={self.batch_size} is invalid: use an integer >= 1")


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


def group_requests(requests: Sequence[ChatRequest], batch_size: int) -> list[list[int]]:
    """Indices of requests generated together (see the module docstring for the rule)."""
    groups: dict[SamplingConfig, list[int]] = {}
    singles: list[list[int]] = []
    for index, request in enumerate(requests):
        sampling = request.sampling
        if sampling.temperature == 0:
            # Greedy: top_p and seed do not change the output, only the length limit does.
            key = SamplingConfig(temperature=0.0, max_tokens=sampling.max_tokens)
            groups.setdefault(key, []).append(index)
        elif sampling.seed is not None:
            singles.append([index])
        else:
            groups.setdefault(sampling, []).append(index)
    batches = [
        indices[start : start + batch_size]
        for indices in groups.values()
        for start in range(0, len(indices), batch_size)
    ]
    return batches + singles


def resolve_device_dtype(config: HFConfig) -> tuple[str, str]:
    """Turn "auto" into a concrete device and dtype name."""
    import torch

    device = config.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    elif device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device=cuda but torch sees no CUDA GPU; use device=cpu or auto")
    dtype = config.dtype
    if dtype == "auto":
        dtype = "bfloat16" if device == "cuda" else "float32"
    return device, dtype


class HFBackend:
    """A transformers causal LM answering chat requests in left-padded batches."""

    def __init__(self, name: str, config: HFConfig = HFConfig()) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        self.name = name
        self.config = config
        self.key = f"hf:{name}" + non_default_query(config)
        self.device, self.dtype = resolve_device_dtype(config)
        self.tokenizer = load_tokenizer(name)
        self.model = AutoModelForCausalLM.from_pretrained(name, dtype=getattr(torch, self.dtype))
        self.model.to(self.device)
        self.model.eval()
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
        for group in group_requests([requests[i] for i in runnable], self.config.batch_size):
            indices = [runnable[i] for i in group]
            texts_and_counts = self._generate_batch(
                [prompts[i] for i in indices], requests[indices[0]].sampling
            )
            for index, (text, tokens_out) in zip(indices, texts_and_counts, strict=True):
                completions[index] = Completion(
                    text=text, tokens_in=len(prompts[index]), tokens_out=tokens_out
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

    def _generate_batch(
        self, prompts: list[list[int]], sampling: SamplingConfig
    ) -> list[tuple[str, int]]:
        """Generate for prompts sharing one sampling config; returns (text, new tokens) each."""
        import torch

        if self.model is None:
            raise RuntimeError(f"{self.key} is closed")
        batch = self.tokenizer.pad({"input_ids": prompts}, return_tensors="pt")
        batch = {name: tensor.to(self.device) for name, tensor in batch.items()}
        kwargs: dict[str, Any] = {
            "max_new_tokens": sampling.max_tokens,
            "pad_token_id": self.tokenizer.pad_token_id,
        }
        if sampling.temperature == 0:
            kwargs["do_sample"] = False
        else:
            # top_k=0 switches off any top-k default shipped in the model's generation_config.
            kwargs.update(
                do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p, top_k=0
            )
        seed = sampling.seed if sampling.seed is not None else int(self._rng.integers(2**31))
        devices = [torch.device(self.device).index or 0] if self.device == "cuda" else []
        with torch.random.fork_rng(devices=devices), torch.inference_mode():
            torch.manual_seed(seed)
            output = self.model.generate(**batch, **kwargs)
        new_tokens = output[:, batch["input_ids"].shape[1] :].tolist()
        return [self._decode(row) for row in new_tokens]

    def _decode(self, row: list[int]) -> tuple[str, int]:
        """Text of the new tokens up to and including the first stop token, and their count."""
        stops = self._stop_ids()
        length = next((i + 1 for i, token in enumerate(row) if token in stops), len(row))
        text = self.tokenizer.decode(row[:length], skip_special_tokens=True)
        return text, length

    def _stop_ids(self) -> set[int]:
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        ids = eos if isinstance(eos, list) else [eos]
        return {int(i) for i in ids if i is not None}
