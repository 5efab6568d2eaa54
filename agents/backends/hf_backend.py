"""Local transformers back-end: chat template, a batched decoding loop, per-request seeds.

Reproducibility rule: a request's text depends only on (model, prompt, sampling config), never on
which other requests share its batch. The decoding loop is the project's own (``hf_decode``, also
used by the GRPO learner's sampler; not `model.generate`) so that every row keeps its own sampling
settings and its own random stream:

  * Prefill runs one prompt at a time, unpadded: a prompt's key/value cache and first-token
    logits are exactly what it gets alone. On CPU this costs nothing: prefill is compute-bound
    (one 1,700-token prompt already fills the matrix kernels), and a padded batch would need a
    full attention mask, measured 2.5x slower per row than the unmasked causal kernel.
  * A request with a conversation id continues its conversation's cached prompt KV when its
    prompt extends it, prefilling only the new turn (``agents.backends.kv_reuse``: prompts are
    always prefilled in the same segments, so reuse changes no bit of any result).
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

LoRA adapters (``hf:<base>?lora=<folder>``, see ``agents.backends.adapters``) are loaded into one
PEFT model over the single copy of the base weights. A call's requests are decoded in batches of
one adapter each (the base model counting as one), with that adapter switched on in every LoRA
layer: PEFT's mixed-adapter batches (``adapter_names``) walk the whole module tree and split every
LoRA layer's input on each forward, about a third of a tiny model's evaluation time
(docs/performance.md). A row's arithmetic is the same either way. No merged copy is written.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agents.backends.adapters import resolve_adapter
from agents.backends.base import (
    DTYPES,
    BackendStats,
    ChatRequest,
    Completion,
    StatsRecorder,
    non_default_query,
)
from agents.backends.hf_attention import register as register_attention
from agents.backends.hf_decode import (
    RowSampling,
    cache_arg,
    cache_from_layers,
    cache_layers,
    decode,
    prefill,
)
from agents.backends.kv_reuse import (
    CachedPrompt,
    ConversationCache,
    Messages,
    kv_nbytes,
    segment_ends,
)
from agents.steering import token_steer
from arena.settings import about

DEVICES = ("auto", "cpu", "cuda")
# tokenizer_config classes meaning "a plain tokenizer.json": load them as exactly that, because
# AutoTokenizer maps by model_type (e.g. qwen2 -> Qwen2Tokenizer) and may re-tokenize differently.
PLAIN_FAST_TOKENIZER_CLASSES = frozenset({"PreTrainedTokenizerFast", "TokenizersBackend"})
# Tokens that close an assistant turn in common chat templates (ChatML, Llama 3, Gemma, Phi).
END_OF_TURN_TOKENS = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>")
BASE_ADAPTER = "__base__"  # PEFT's name for "no adapter" in a mixed-adapter batch
MIB = 2**20


@dataclass(frozen=True)
class HFConfig:
    """Back-end-level settings for a local transformers model."""

    device: str = field(default="auto", metadata=about("cpu, cuda, or auto (cuda when available)"))
    dtype: str = field(
        default="auto",
        metadata=about("auto (float32 on cpu, bfloat16 on cuda), float32, float16, bfloat16"),
    )
    batch_size: int = field(default=8, metadata=about("most prompts decoded together"))
    threads: int | None = field(
        default=None,
        metadata=about(
            "torch CPU threads (torch.set_num_threads, process-wide); unset leaves "
            "torch's setting alone"
        ),
    )
    kv_cache_mib: int = field(
        default=1024,
        metadata=about(
            "MiB of conversations' prompt KV caches kept between turns, so a turn "
            "prefills only its new tokens (least recently used dropped first); 0 turns reuse off"
        ),
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
        if self.kv_cache_mib < 0:
            raise ValueError(f"kv_cache_mib={self.kv_cache_mib} is invalid: use MiB >= 0")


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


def reply_end_token(tokenizer: Any, stops: frozenset[int]) -> int:
    """The token a forced ending closes a reply with (:mod:`agents.steering`): the chat
    template's end-of-turn token, else the tokenizer's eos, else the smallest stop id."""
    added = tokenizer.get_added_vocab()
    for token in END_OF_TURN_TOKENS:
        if token in added and added[token] in stops:
            return int(added[token])
    eos = tokenizer.eos_token_id
    return int(eos) if eos is not None and eos in stops else min(stops)


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
        self._recorder = StatsRecorder()
        # On CPU, prefill segments after cached tokens use unmasked flash kernels (hf_attention).
        attention = {"attn_implementation": register_attention()} if self.device == "cpu" else {}
        base = AutoModelForCausalLM.from_pretrained(
            name, dtype=getattr(torch, self.dtype), **attention
        )
        base.to(self.device)
        base.eval()
        self._recorder.loaded()
        self.base_model: Any = base
        # The model every forward goes through: the base, or the PEFT model wrapping it (in
        # place) once an adapter is added; then each call names its rows' adapters.
        self.model: Any = base
        self.adapters: dict[str, str] = {}
        """Adapter folder (absolute) -> its PEFT adapter name."""
        self._active = BASE_ADAPTER  # the adapter every LoRA layer applies (_activate)
        self._spellings: dict[str, str] = {}  # request.adapter as given -> absolute folder
        self.stop_ids = stop_token_ids(base.generation_config.eos_token_id, self.tokenizer)
        self.end_token = reply_end_token(self.tokenizer, self.stop_ids)
        self._cache_arg = cache_arg(base)
        budget = config.kv_cache_mib * MIB
        self.kv_cache: ConversationCache[CachedPrompt] = ConversationCache(budget)
        self._lock = threading.RLock()
        # Seeds for unseeded sampling: fresh entropy on purpose (see module docstring).
        self._rng = np.random.default_rng()

    @property
    def stats(self) -> BackendStats:
        return self._recorder.stats

    def __repr__(self) -> str:
        return f"HFBackend(key={self.key!r}, device={self.device!r}, dtype={self.dtype!r})"

    def add_adapter(self, adapter: str) -> None:
        """Load a PEFT LoRA adapter over the base weights, once per folder."""
        folder = resolve_adapter(adapter)
        with self._lock:
            if self.model is None:
                raise RuntimeError(f"{self.key} is closed")
            if folder in self.adapters:
                return
            from peft import PeftModel

            name = f"adapter_{len(self.adapters)}"
            try:
                if self.adapters:
                    self.model.load_adapter(folder, adapter_name=name, torch_device=self.device)
                else:
                    self.model = PeftModel.from_pretrained(
                        self.base_model, folder, adapter_name=name, torch_device=self.device
                    )
            except (ValueError, RuntimeError, KeyError, OSError) as exc:
                raise ValueError(
                    f"lora={folder}: PEFT cannot load it over {self.name}: {exc}"
                ) from exc
            self.model.eval()
            self.adapters[folder] = name
            self._active = ""  # unknown after a load: the next _activate sets every layer

    def end_conversations(self, conversations: Sequence[str]) -> None:
        """Drop the cached KV of finished conversations."""
        self.kv_cache.end(conversations)

    def generate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        """Complete all requests; prompts that do not fit the context, or that name an adapter
        that cannot be loaded, come back as errors."""
        with self._lock:
            if self.model is None:
                raise RuntimeError(f"{self.key} is closed")
            start = time.perf_counter()
            completions: list[Completion | None] = [None] * len(requests)
            prompts = [self.encode(request.messages) for request in requests]
            context = getattr(self.base_model.config, "max_position_embeddings", None)
            runnable: list[int] = []
            for index, (request, ids) in enumerate(zip(requests, prompts, strict=True)):
                problem = self._problem(request, len(ids), context)
                if problem is not None:
                    completions[index] = Completion(text="", tokens_in=len(ids), error=problem)
                else:
                    runnable.append(index)
            size = self.config.batch_size
            by_adapter: dict[str, list[int]] = {}
            for index in runnable:
                by_adapter.setdefault(self._adapter_name(requests[index]), []).append(index)
            batches = [
                (adapter, indices[begin : begin + size])
                for adapter, indices in by_adapter.items()
                for begin in range(0, len(indices), size)
            ]
            for adapter, indices in batches:
                self._activate(adapter)
                rows = self._decode_batch(
                    [prompts[i] for i in indices], [requests[i] for i in indices]
                )
                for index, (row, reused) in zip(indices, rows, strict=True):
                    completions[index] = Completion(
                        text=self.tokenizer.decode(row, skip_special_tokens=True),
                        tokens_in=len(prompts[index]),
                        tokens_out=len(row),
                        tokens_cached=reused,
                    )
            done = [c for c in completions if c is not None]
            assert len(done) == len(requests)
            self._recorder.record(done, time.perf_counter() - start)
            return done

    def close(self) -> None:
        """Drop the model and the cached conversations so their memory can be freed."""
        import gc

        import torch

        with self._lock:
            self.model = None
            self.base_model = None
            self.kv_cache.clear()
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def encode(self, messages: Messages) -> list[int]:
        """Token ids of a chat prompt, ending with the assistant generation prompt."""
        text = self.tokenizer.apply_chat_template(
            [{"role": role, "content": content} for role, content in messages],
            add_generation_prompt=True,
            tokenize=False,
        )
        # The chat template already writes any BOS/special tokens the model expects.
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _problem(self, request: ChatRequest, length: int, context: int | None) -> str | None:
        """Why a request cannot run (context overflow, an adapter that fails to load), or None."""
        needed = length + request.sampling.max_tokens
        if context is not None and needed > context:
            return (
                f"prompt of {length} tokens + max_tokens {request.sampling.max_tokens} "
                f"exceeds the model context of {context}"
            )
        if request.adapter is not None and request.adapter not in self.adapters:
            try:
                self.add_adapter(request.adapter)
            except ValueError as exc:
                return str(exc)
            # Another spelling of a loaded folder (relative, a symlink): remember what it names.
            self._spellings[request.adapter] = resolve_adapter(request.adapter)
        return None

    def _adapter_name(self, request: ChatRequest) -> str:
        """The PEFT name of the request's adapter (loaded by ``_problem``), or BASE_ADAPTER."""
        if request.adapter is None:
            return BASE_ADAPTER
        return self.adapters[self._spellings.get(request.adapter, request.adapter)]

    def _activate(self, name: str) -> None:
        """Make the model apply adapter ``name`` alone (BASE_ADAPTER: none), frozen: PEFT's own
        switches, which walk the module tree once a switch rather than once a forward."""
        if name == self._active or not self.adapters:
            return
        if name == BASE_ADAPTER:
            self.model.base_model.disable_adapter_layers()
        else:
            self.model.base_model.enable_adapter_layers()
            self.model.set_adapter(name, inference_mode=True)
        self._active = name

    def _prefill(self, ids: list[int], request: ChatRequest) -> tuple[Any, Any, int]:
        """(prompt KV cache, last-position logits, prompt tokens reused from the conversation
        cache), prefilling segment by segment (``agents.backends.kv_reuse``)."""
        messages, conversation = request.messages, request.conversation
        keep = conversation is not None and self.kv_cache.budget > 0
        entry = self.kv_cache.get(conversation) if keep else None
        past: Any = None
        done = 0
        if entry is not None and entry.continued_by(messages, ids, request.adapter):
            later = segment_ends(messages, ids, self.encode, after=len(entry.messages))
            ends = [*entry.ends, *(end for end in later if end > len(entry.ids))]
            past = cache_from_layers(entry.layers, self.base_model.config)
            done = len(entry.ids)
        else:
            ends = segment_ends(messages, ids, self.encode)
        past, logits = prefill(self.model, ids, ends, self._cache_arg, past, done)
        if keep:
            assert conversation is not None
            layers = cache_layers(past)
            self.kv_cache.put(
                conversation,
                CachedPrompt(
                    messages, request.adapter, tuple(ids), tuple(ends), layers, kv_nbytes(layers)
                ),
            )
        return past, logits, done

    def _decode_batch(
        self, prompts: list[list[int]], requests: list[ChatRequest]
    ) -> list[tuple[list[int], int]]:
        """(new tokens, reused prompt tokens) of every prompt; the tokens end at the first stop
        token or at max_tokens."""
        import torch

        sampling = [request.sampling for request in requests]
        rngs = [
            np.random.default_rng(s.seed if s.seed is not None else self._rng.integers(2**63))
            for s in sampling
        ]
        rows = [RowSampling(s.temperature, s.top_p, s.max_tokens) for s in sampling]
        with torch.inference_mode():
            caches, first_logits, reused = [], [], []
            for ids, request in zip(prompts, requests, strict=True):
                cache, logits, cached = self._prefill(ids, request)
                caches.append(cache)
                first_logits.append(logits)
                reused.append(cached)
            generated = decode(
                self.model,
                caches,
                first_logits,
                rows,
                rngs,
                self.stop_ids,
                self._cache_arg,
                steer=token_steer(
                    self.tokenizer, [r.steer for r in requests], self.end_token, self.stop_ids
                ),
            ).tokens
        return list(zip(generated, reused, strict=True))
