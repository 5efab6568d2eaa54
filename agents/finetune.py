"""Supervised fitting of a chat model on negotiation transcripts (plain next-token training).

A stored episode keeps every message as sent, but not the prompts the agents saw. ``chat_examples``
rebuilds them by replaying the episode through the episode driver: every seat is played by a
:class:`agents.driver.Replay` of the recorded messages, watched by an
:class:`agents.llm.LLMAgent` that builds the seat's chat (system prompt, its own past turns, this
turn's observation) exactly as it would in play; the message actually sent is the target reply.

``fit_on_transcripts`` trains a causal LM on those examples with the loss on the assistant tokens
only (the prompt is context, not target). It is deliberately small: CPU-friendly, a few hundred
steps, used to teach a tiny test model the output format and reused by the league code to warm up
a model on scripted play. Real fine-tuning of large models belongs to the training stack (trl).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agents import steering
from agents.backends.base import Completion
from agents.backends.hf_attention import register as register_attention
from agents.backends.hf_backend import load_tokenizer
from agents.base import EpisodeContext, View
from agents.driver import Episode, Replay, Transcript
from agents.llm import LLMAgent, LLMAgentConfig
from agents.specs import AgentSpec
from arena.config import MarketConfig, get_preset
from arena.game import SellerView
from arena.money import format_price
from arena.protocol import (
    FormatViolation,
    Kind,
    parse_buyer,
    parse_seller,
    render_buyer,
    render_seller,
)
from arena.records import EpisodeRecord
from arena.seats import ROLES
from arena.views import BuyerView

Chat = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ChatExample:
    """One agent turn: the chat the agent was shown and the reply it sent."""

    role: str
    messages: Chat
    reply: str
    episode: int = 0
    """The episode's position in the records it was rebuilt from."""
    seat: str = ""


TALK_STYLES = ("scripted", "short", "share")


def short_talk(text: str, view: View) -> str:
    """``text`` with its Talk replaced by one short sentence naming the move ("My price is
    $19.99.", "I can pay $7.10.", "Deal.", "Goodbye."); a text that does not parse is kept.

    Fitting a small model on these spends its capacity on the moves rather than on copying a
    scripted agent's product-title small talk, which it garbles and then loses the format."""
    multi = len(view.products) > 1
    seller = isinstance(view, SellerView)
    move = parse_seller(text, multi) if seller else parse_buyer(text, multi)
    if isinstance(move, FormatViolation):
        return text
    price = "" if move.price is None else format_price(move.price)
    talk = {
        Kind.SELL: f"My price is {price}.",
        Kind.BUY: f"I can pay {price}.",
        Kind.DEAL: "Deal.",
        Kind.QUIT: "Goodbye.",
    }[move.kind]
    move = dataclasses.replace(move, talk=talk)
    return render_seller(move) if seller else render_buyer(move)  # type: ignore[arg-type]


def share_thought(text: str, view: View, rungs: int, cue: bool = False) -> str:
    """``text`` with its short Talk (:func:`short_talk`) and, for a buyer's move after its
    regulated opening, the Thought a ``steer=share`` model writes for it: ``Offer 70% of my
    budget.`` for a bid on that rung (the nearest rung's digit for a bid off the ladder),
    ``Offer 0% of my budget.`` for a DEAL or QUIT (:func:`agents.steering.share_thought`, the
    text the steer writes), after the steer's cue with ``cue`` (:func:`agents.steering.share_cue`);
    a text that does not parse is kept."""
    text = short_talk(text, view)
    if not isinstance(view, BuyerView) or (view.opening and view.regulated_opening is not None):
        return text
    move = parse_buyer(text, len(view.products) > 1)
    if isinstance(move, FormatViolation):
        return text
    digit = "0"
    if move.kind is Kind.BUY and move.price is not None:
        digit = steering.share_digit(move.price, view.valuations[move.product or 0], rungs)
    opens = steering.share_cue(view) if cue else ""
    thought = steering.share_thought(digit, opens)
    return render_buyer(dataclasses.replace(move, thought=thought))


class Transcriber:
    """An immediate responder for one seat: it re-sends the seat's recorded messages and keeps
    the chat an LLM agent in that seat would have been sent, as training examples."""

    SPEC = AgentSpec("replay", "transcript", {}, "replay:transcript")

    def __init__(
        self,
        transcript: Transcript,
        config: LLMAgentConfig,
        roles: Sequence[str],
        examples: list[ChatExample],
        episode: int = 0,
        talk: str = "scripted",
    ) -> None:
        self.replay = Replay(transcript)
        self.episode = episode
        self.talk = talk
        self.spec = self.replay.spec
        self.config = config
        self.roles = roles
        self.examples = examples
        """Where the examples go, shared by the seats of an episode so they stay in play order."""
        self.agent: LLMAgent | None = None

    def reset(self, context: EpisodeContext) -> None:
        self.replay.reset(context)
        role = "seller" if context.slot == 0 else "buyer"
        self.agent = LLMAgent(self.SPEC, role, None, self.config, {})
        self.agent.reset(context)

    def act(self, view: View) -> str:
        assert self.agent is not None
        text = self.replay.act(view)
        if self.talk == "short":
            text = short_talk(text, view)
        elif self.talk == "share":
            text = share_thought(text, view, self.config.ladder, self.config.share_cue)
        request = self.agent.request(view)
        if self.agent.role in self.roles:
            seat = self.agent.context.role if self.agent.context is not None else ""
            self.examples.append(
                ChatExample(self.agent.role, request.messages, text, self.episode, seat)
            )
        self.agent.receive(Completion(text))
        return text


def chat_examples(
    records: Iterable[EpisodeRecord],
    config: MarketConfig | None = None,
    roles: Sequence[str] = ROLES,
    agent: LLMAgentConfig = LLMAgentConfig(),
    talk: str = "scripted",
) -> list[ChatExample]:
    """Every turn of ``roles`` in ``records`` as (prompt chat, reply), in play order.

    ``config`` is the market the records were played in; None looks up ``record.preset``.
    ``agent`` is how the LLM agent in the seat builds its chat (prompt style, persona, history).
    ``talk = "short"`` replays every message with :func:`short_talk` words: the other seats then
    see those words too, and the moves (and so the episode) are unchanged.
    Invalid turns are kept (a buyer's rejected attempt is a turn too); filter on the record's
    ``TurnRecord.valid`` beforehand if only good play should be imitated.
    """
    unknown = sorted(set(roles) - set(ROLES))
    if unknown:
        raise ValueError(f"roles {unknown} are unknown; use 'seller' and/or 'buyer'")
    if talk not in TALK_STYLES:
        raise ValueError(f"talk={talk!r} is unknown; use one of {', '.join(TALK_STYLES)}")
    examples: list[ChatExample] = []
    for number, record in enumerate(records):
        name = f"episode {record.scenario.index}"
        if not record.result.turns:
            raise ValueError(f"{name} has no turns; play it with keep_turns=True")
        market_config = config if config is not None else get_preset(record.preset)
        transcript = Transcript(record.result.turns, name)
        seats = [
            Transcriber(transcript, agent, roles, examples, number, talk)
            for _ in market_config.agents
        ]
        Episode(market_config, record.scenario, seats).advance()
        transcript.check_finished()
    return examples


@dataclass
class FitReport:
    """What ``fit_on_transcripts`` did."""

    out_dir: Path
    chats: int
    steps: int
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, object]:
        return {
            "out_dir": str(self.out_dir),
            "chats": self.chats,
            "steps": self.steps,
            "first_loss": self.losses[0] if self.losses else None,
            "last_loss": self.losses[-1] if self.losses else None,
            "seconds": self.seconds,
        }


def conversations(examples: Sequence[ChatExample]) -> list[tuple[str, Chat]]:
    """The examples as chats to fit, each ending in a reply: a seat's turns of one episode are
    one chat when every turn's prompt extends the previous turn's chat (an agent that keeps its
    whole history), so the shared prefix is read once and the model learns each reply in the
    context it had in play; otherwise every turn is a chat of its own."""
    chats: list[tuple[str, Chat]] = []
    open_chat: dict[tuple[int, str], int] = {}
    for example in examples:
        full = (*example.messages, ("assistant", example.reply))
        key = (example.episode, example.seat)
        at = open_chat.get(key)
        if at is not None and example.messages[: len(chats[at][1])] == chats[at][1]:
            chats[at] = (example.role, full)
            continue
        open_chat[key] = len(chats)
        chats.append((example.role, full))
    return chats


def encode_chat(tokenizer: Any, chat: Chat, max_length: int) -> tuple[list[int], list[int]]:
    """(token ids, labels) of a chat under the model's chat template: labels are the ids on the
    assistant replies (their end-of-turn token included) and -100 elsewhere.

    The chat is rendered one message at a time and each new piece encoded on its own, as the
    rollouts lay out an episode's token stream, so a fitted reply reads exactly like a sampled one.
    A chat longer than ``max_length`` is an error: cutting it would fit the model on prompts it
    never sees in play.
    """
    ids: list[int] = []
    labels: list[int] = []
    rendered = ""
    for end in range(1, len(chat) + 1):
        prompt_next = end < len(chat) and chat[end][0] == "assistant"
        text = tokenizer.apply_chat_template(
            [{"role": r, "content": c} for r, c in chat[:end]],
            add_generation_prompt=prompt_next,
            tokenize=False,
        )
        if not text.startswith(rendered):
            raise ValueError(
                "the chat template does not render a chat as a prefix of its continuation; "
                "fitting needs a prefix-stable template (ChatML-like)"
            )
        piece = tokenizer(text[len(rendered) :], add_special_tokens=False)["input_ids"]
        rendered = text
        ids += piece
        labels += piece if chat[end - 1][0] == "assistant" else [-100] * len(piece)
    if len(ids) > max_length:
        raise ValueError(
            f"a {len(ids)}-token chat does not fit max_length={max_length}; use a model with a "
            "longer context, or agents that keep less history (history=n)"
        )
    return ids, labels


@dataclass(frozen=True)
class FitConfig:
    """How :func:`fit_on_transcripts` trains."""

    steps: int = field(default=300, metadata={"help": "Optimizer steps."})
    learning_rate: float = field(default=1e-3, metadata={"help": "AdamW learning rate."})
    batch_size: int = field(default=8, metadata={"help": "Chats per step."})
    warmup_steps: int = field(
        default=0, metadata={"help": "Steps of linear learning-rate warm-up, then constant."}
    )
    seed: int = field(default=0, metadata={"help": "Seeds the batches and the torch generator."})
    max_length: int = field(
        default=0, metadata={"help": "Longest chat in tokens; 0: the model's context."}
    )

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch_size < 1:
            raise ValueError(
                f"steps={self.steps} and batch_size={self.batch_size} must both be >= 1"
            )
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate={self.learning_rate} must be > 0")
        if self.warmup_steps < 0 or self.max_length < 0:
            raise ValueError("warmup_steps and max_length must be >= 0")


def fit_on_transcripts(
    model_dir: str | Path,
    records: Iterable[EpisodeRecord],
    out_dir: str | Path,
    fit: FitConfig = FitConfig(),
    *,
    config: MarketConfig | None = None,
    roles: Sequence[str] = ROLES,
    agent: LLMAgentConfig = LLMAgentConfig(),
    talk: str = "scripted",
    log: Callable[[str], None] | None = None,
) -> FitReport:
    """Fit the causal LM in ``model_dir`` on the turns of ``roles`` in ``records``; save it.

    Plain supervised next-token training (AdamW, ``fit.learning_rate`` after a linear warm-up,
    gradients clipped at norm 1) with the loss on the replies only, over the chats of
    :func:`conversations`: the prompts are those an LLM agent configured as ``agent`` builds in
    play. Batches are drawn with a generator seeded by ``fit.seed`` and the torch generator is
    seeded inside ``fork_rng``, so a fit is reproducible and leaves global RNG state alone. The
    model and tokenizer are written to ``out_dir``, ready for ``hf:<out_dir>``; ``log`` hears the
    loss every 50 steps.
    """
    import torch
    from transformers import AutoModelForCausalLM

    started = time.perf_counter()
    chats = conversations(chat_examples(records, config, roles, agent, talk))
    if not chats:
        raise ValueError(f"no turns of roles {list(roles)} in the records; nothing to fit")
    tokenizer = load_tokenizer(model_dir)
    rng = np.random.default_rng(fit.seed)
    losses: list[float] = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(fit.seed)
        # each padded row's span as one causal flash call (agents.backends.hf_attention)
        model = AutoModelForCausalLM.from_pretrained(
            str(model_dir), dtype=torch.float32, attn_implementation=register_attention()
        )
        limit = fit.max_length or int(getattr(model.config, "max_position_embeddings", 2048))
        encoded = [encode_chat(tokenizer, chat, limit) for _, chat in chats]
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=fit.learning_rate)
        warmup = max(1, fit.warmup_steps)
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda step: min(1.0, (step + 1) / warmup)
        )
        for step in range(fit.steps):
            picks = rng.choice(len(encoded), size=min(fit.batch_size, len(encoded)), replace=False)
            batch = [encoded[int(i)] for i in picks]
            width = max(len(tokens) for tokens, _ in batch)
            ids = torch.full((len(batch), width), tokenizer.pad_token_id, dtype=torch.long)
            labels = torch.full((len(batch), width), -100, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, (tokens, targets) in enumerate(batch):
                ids[row, : len(tokens)] = torch.tensor(tokens)
                labels[row, : len(tokens)] = torch.tensor(targets)
                mask[row, : len(tokens)] = 1
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            losses.append(float(loss.detach()))
            if log is not None and (step + 1) % 50 == 0:
                log(f"fit step {step + 1}/{fit.steps}: loss {losses[-1]:.3f}")
    model.eval()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    report = FitReport(out, len(chats), fit.steps, losses, time.perf_counter() - started)
    (out / "fit_report.json").write_text(json.dumps(report.to_dict(), indent=2))
    return report
