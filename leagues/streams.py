"""A learner seat's episode as one token stream, laid out exactly as the chat template lays out
the conversation:

    prompt      = template(system, first observation) + generation prompt
    completion  = reply_1 + glue_1 + reply_2 + glue_2 + ... + reply_k

``reply_t`` are the tokens the learner sampled (``env_mask`` 1, with their sampling logprobs);
``glue_t`` is what the template puts between the end of reply ``t`` and the generation prompt of
turn ``t + 1``: the end-of-turn marker, the next observation as a user message (which carries the
other agents' moves), and the assistant header (``env_mask`` 0, logprob 0). Only the learner's own
tokens are trained. The conversation itself comes from :class:`agents.llm.LLMAgent` (system
prompt, observations, kept history), so a checkpoint evaluated later as an ``hf:`` or ``vllm:``
agent sees exactly the prompts it was trained on. The one difference: a history replays a past
reply with outer whitespace stripped, where the stream keeps the sampled tokens as they were.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

REPLY_SENTINEL = "<<arena-learner-reply-5b1f>>"
"""Stands in for a reply when rendering the chat template, to find the text around replies."""


@dataclass
class Stream:
    """One learner seat's episode as token lists of equal length (completion side)."""

    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)
    """The learner's turns as decoded text, in order."""
    ends: list[int] = field(default_factory=list)
    """Length of the context each turn's reply was sampled from (its prompt), in order."""

    @property
    def context(self) -> list[int]:
        return self.prompt_ids + self.completion_ids

    def add(
        self, ids: Sequence[int], logprobs: Sequence[float] | None, trained: bool | Sequence[bool]
    ) -> None:
        """Append tokens; ``trained`` for all of them, or per token (False: no loss on it)."""
        marks = [trained] * len(ids) if isinstance(trained, bool) else list(trained)
        if len(marks) != len(ids):
            raise ValueError(f"{len(marks)} trained marks for {len(ids)} tokens")
        self.completion_ids.extend(ids)
        self.logprobs.extend(logprobs if logprobs is not None else [0.0] * len(ids))
        self.env_mask.extend(int(mark) for mark in marks)


class ChatFormat:
    """Token-level chat formatting for a learner: prompts and the glue between replies."""

    def __init__(self, tokenizer: Any, source: str = "the model") -> None:
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(
                f"the tokenizer of {source} has no chat template; a learner needs one to lay out "
                "its turns (use an instruct/chat model, or add a chat_template to its "
                "tokenizer_config.json)"
            )
        self.tokenizer = tokenizer

    def render(self, messages: Sequence[tuple[str, str]], add_generation_prompt: bool) -> str:
        chat = [{"role": role, "content": content} for role, content in messages]
        return self.tokenizer.apply_chat_template(
            chat, add_generation_prompt=add_generation_prompt, tokenize=False
        )

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; the template already wrote any special tokens it needs."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(self, messages: Sequence[tuple[str, str]]) -> list[int]:
        """The first prompt: the rendered conversation and the generation prompt."""
        return self.encode(self.render(messages, add_generation_prompt=True))

    def glue_ids(self, messages: Sequence[tuple[str, str]], last_token: int | None) -> list[int]:
        """Tokens after the last assistant reply of ``messages`` up to the generation prompt.

        The reply is replaced by a sentinel and the conversation rendered; what follows the
        sentinel is the glue. When the reply already ended with the token that opens the glue
        (its end-of-turn marker, e.g. ``<|im_end|>``), that part is not repeated.
        """
        chat = list(messages)
        last = max((i for i, (role, _) in enumerate(chat) if role == "assistant"), default=None)
        if last is None:
            raise ValueError("glue_ids needs a conversation with a past assistant reply")
        chat[last] = ("assistant", REPLY_SENTINEL)
        text = self.render(chat, add_generation_prompt=True)
        if text.count(REPLY_SENTINEL) != 1:
            raise ValueError("the chat template dropped or repeated a past assistant reply")
        tail = text.split(REPLY_SENTINEL, 1)[1]
        if last_token is not None:
            ended = self.tokenizer.decode([last_token], skip_special_tokens=False)
            if ended and tail.startswith(ended):
                tail = tail[len(ended) :]
        return self.encode(tail)

    def decode_reply(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    @property
    def end_token(self) -> int:
        """The token that closes an empty turn: the tokenizer's eos, else its pad token."""
        eos = self.tokenizer.eos_token_id
        return eos if eos is not None else self.tokenizer.pad_token_id
