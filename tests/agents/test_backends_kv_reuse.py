"""Conversation KV caches: prompt segments, the extension check, the byte-bounded LRU."""

from __future__ import annotations

import pytest

from agents.backends.kv_reuse import (
    CachedPrompt,
    ConversationCache,
    earlier_prompts,
    segment_ends,
)

SYSTEM = ("system", "S")


def encode(messages: tuple, generation_prompt: str = "<assistant>") -> list[int]:
    """A toy chat template, one token per character: ``<role>content|`` per message and a
    generation prompt, so an earlier prompt is a token prefix of the later ones (as in ChatML)."""
    text = "".join(f"<{role}>{content}|" for role, content in messages) + generation_prompt
    return [ord(ch) for ch in text]


def entry(messages: tuple, adapter: str | None = None, nbytes: int = 10) -> CachedPrompt:
    ids = tuple(encode(messages))
    return CachedPrompt(messages, adapter, ids, (len(ids),), (), nbytes)


def test_earlier_prompts_end_at_each_answered_user_message() -> None:
    messages = (SYSTEM, ("user", "a"), ("assistant", "b"), ("user", "c"), ("assistant", "d"),
                ("user", "e"))  # fmt: skip
    assert earlier_prompts(messages) == [2, 4]
    assert earlier_prompts((SYSTEM, ("user", "a"))) == []
    assert earlier_prompts((("user", "a"), ("user", "b"), ("assistant", "c"), ("user", "d"))) == [2]


def test_segments_end_where_earlier_prompts_end_if_they_are_token_prefixes() -> None:
    def template(messages: tuple) -> list[int]:
        # A template whose generation prompt differs from how an answered turn is rendered:
        # an earlier prompt is not a token prefix of the later one and ends no segment.
        return encode(messages, generation_prompt="<reply>")

    messages = (SYSTEM, ("user", "a"), ("assistant", "b"), ("user", "c"))
    ids = encode(messages)
    assert segment_ends(messages, ids, encode) == [len(encode(messages[:2])), len(ids)]
    assert segment_ends(messages, ids, template) == [len(ids)]  # not a prefix: one segment
    # A cache hit covering the first two messages encodes only later earlier prompts.
    seen: list[int] = []

    def counting(prefix: tuple) -> list[int]:
        seen.append(len(prefix))
        return encode(prefix)

    assert segment_ends(messages, ids, counting, after=2) == [len(ids)]
    assert seen == []


def test_a_cached_prompt_is_continued_only_by_the_same_conversation_grown() -> None:
    first = (SYSTEM, ("user", "a"))
    second = (*first, ("assistant", "b"), ("user", "c"))
    cached = entry(first, adapter="/lora/a")
    assert cached.continued_by(second, encode(second), "/lora/a")
    assert not cached.continued_by(second, encode(second), None)  # other weights, other KV
    assert not cached.continued_by(first, encode(first), "/lora/a")  # nothing new
    edited = ((SYSTEM[0], "T"), *second[1:])
    assert not cached.continued_by(edited, encode(edited), "/lora/a")
    twice = (*first, ("user", "again"))  # a user message, not an answer, follows
    assert not cached.continued_by(twice, encode(twice), "/lora/a")
    other_ids = [7, *encode(second)[1:]]
    assert not cached.continued_by(second, other_ids, "/lora/a")  # tokens disagree


def test_cache_keeps_the_latest_prompt_per_conversation_within_its_budget() -> None:
    cache = ConversationCache(budget=25)
    cache.put("a", entry((SYSTEM,), nbytes=10))
    cache.put("b", entry((SYSTEM,), nbytes=10))
    cache.put("a", entry((SYSTEM, ("user", "x")), nbytes=10))  # replaces a's entry
    assert (len(cache), cache.nbytes) == (2, 20)
    assert cache.get("b") is not None  # b is now the most recently used
    cache.put("c", entry((SYSTEM,), nbytes=10))  # over budget: a, least recently used, goes
    assert cache.get("a") is None and cache.get("b") is not None and cache.get("c") is not None
    assert (cache.nbytes, cache.evictions) == (20, 1)
    cache.put("huge", entry((SYSTEM,), nbytes=26))  # larger than the budget: not kept
    assert cache.get("huge") is None and cache.nbytes == 20
    cache.end(["b", "unknown"])
    assert (len(cache), cache.nbytes) == (1, 10)
    cache.clear()
    assert (len(cache), cache.nbytes) == (0, 0)


def test_a_zero_budget_keeps_nothing_and_a_negative_one_is_refused() -> None:
    cache = ConversationCache(budget=0)
    cache.put("a", entry((SYSTEM,), nbytes=1))
    assert len(cache) == 0
    with pytest.raises(ValueError, match="budget -1"):
        ConversationCache(budget=-1)
