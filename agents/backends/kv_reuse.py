"""Conversation KV caches kept between turns, for back-ends that prefill prompts themselves (hf).

An agent's prompt at turn k is its prompt at turn k-1 plus its reply and the new observation.
Recomputing the whole prompt every turn makes a turn's cost grow with the history (1,700-token
seller prompts growing by ~600 tokens a turn with the tiny model). Keeping each conversation's
prompt KV cache lets a turn prefill only its new tokens.

Exactness: reuse must never change a result. Prefilling a prompt in one pass and in two pieces
gives keys and values that differ in the last float bits (matrix kernels block differently for
different row counts). So the prompt is always prefilled in the same segments, with or without a
cache: a segment ends wherever one of the conversation's earlier prompts ended (``segment_ends``).
A cache hit skips the segments already computed; the tokens, segments and arithmetic are the
same, so the logits are bit-identical. Only prefill KV is kept (never KV written while decoding a
padded batch), so a cache entry does not depend on which requests shared a batch.

``ConversationCache`` holds one entry per conversation id, least recently used first out, within a
byte budget; ``end`` drops finished conversations at once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

Messages = tuple[tuple[str, str], ...]


def earlier_prompts(messages: Messages) -> list[int]:
    """Message counts of the conversation's earlier prompts: each prefix that ends with a user
    message answered by an assistant message (the request of an earlier turn)."""
    return [
        i + 1
        for i in range(len(messages) - 1)
        if messages[i][0] == "user" and messages[i + 1][0] == "assistant"
    ]


def segment_ends(
    messages: Messages,
    ids: Sequence[int],
    encode: Callable[[Messages], list[int]],
    after: int = 0,
) -> list[int]:
    """Where the prefill segments of prompt ``ids`` end: the token lengths of the earlier
    prompts (``encode(prefix)``) that are token prefixes of ``ids``, then ``len(ids)``.

    Only earlier prompts of more than ``after`` messages are encoded (a cache hit already knows
    the ends up to its own prompt). A chat template that rewrites old turns (some strip earlier
    reasoning) makes earlier prompts non-prefixes: they are skipped, costing reuse, never
    exactness.
    """
    ends: list[int] = []
    for count in earlier_prompts(messages):
        if count <= after:
            continue
        prefix = encode(messages[:count])
        size = len(prefix)
        if (not ends or size > ends[-1]) and size < len(ids) and list(ids[:size]) == prefix:
            ends.append(size)
    return [*ends, len(ids)]


@dataclass(frozen=True)
class CachedPrompt:
    """A prompt's prefill KV cache and what is needed to prove a later prompt extends it."""

    messages: Messages
    adapter: str | None
    ids: tuple[int, ...]
    ends: tuple[int, ...]
    """Segment ends of this prompt; the last is ``len(ids)``."""
    layers: tuple[tuple[Any, Any], ...]
    """Per layer (keys, values), each (1, kv heads, len(ids), head dim); never modified."""
    nbytes: int

    def continued_by(self, messages: Messages, ids: Sequence[int], adapter: str | None) -> bool:
        """Whether a new prompt is this one plus more turns (same adapter, same tokens first)."""
        count = len(self.messages)
        return (
            adapter == self.adapter
            and len(messages) > count
            and messages[count][0] == "assistant"
            and messages[:count] == self.messages
            and len(ids) > len(self.ids)
            and tuple(ids[: len(self.ids)]) == self.ids
        )


def kv_nbytes(layers: Iterable[tuple[Any, Any]]) -> int:
    """Bytes held by per-layer (keys, values) tensors."""
    return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in layers)


class Sized(Protocol):
    nbytes: int


Entry = TypeVar("Entry", bound=Sized)


class ConversationCache(Generic[Entry]):
    """Conversation id -> its latest prompt's KV cache; LRU within ``budget`` bytes.

    ``budget`` 0 keeps nothing (every prompt is prefilled from its first token). An entry larger
    than the whole budget is not kept. Thread-safe. Entries are :class:`CachedPrompt` for the hf
    back-end; any object with ``nbytes`` works (the GRPO learner keys its streams' caches here).
    """

    def __init__(self, budget: int) -> None:
        if budget < 0:
            raise ValueError(f"cache budget {budget} is invalid: use bytes >= 0")
        self.budget = budget
        self.nbytes = 0
        self.evictions = 0
        self._entries: OrderedDict[Any, Entry] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, conversation: Any) -> Entry | None:
        with self._lock:
            entry = self._entries.get(conversation)
            if entry is not None:
                self._entries.move_to_end(conversation)
            return entry

    def put(self, conversation: Any, entry: Entry) -> None:
        """Keep ``entry`` as the conversation's latest prompt, evicting the least recently used
        conversations while over budget."""
        with self._lock:
            self._drop(conversation)
            if entry.nbytes > self.budget:
                return
            self._entries[conversation] = entry
            self.nbytes += entry.nbytes
            while self.nbytes > self.budget:
                oldest = next(iter(self._entries))
                self._drop(oldest)
                self.evictions += 1

    def end(self, conversations: Iterable[Any]) -> None:
        """Forget finished conversations."""
        with self._lock:
            for conversation in conversations:
                self._drop(conversation)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.nbytes = 0

    def _drop(self, conversation: Any) -> None:
        entry = self._entries.pop(conversation, None)
        if entry is not None:
            self.nbytes -= entry.nbytes
