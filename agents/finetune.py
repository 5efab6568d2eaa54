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

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from agents.backends.base import Completion
from agents.backends.hf_backend import load_tokenizer
from agents.base import EpisodeContext, View
from agents.driver import Episode, Replay, Transcript
from agents.llm import LLMAgent, LLMAgentConfig
from agents.specs import AgentSpec
from arena.config import MarketConfig, get_preset
from arena.records import EpisodeRecord

Chat = tuple[tuple[str, str], ...]
ROLES = ("seller", "buyer")


@dataclass(frozen=True)
class ChatExample:
    """One agent turn: the chat the agent was shown and the reply it sent."""

    role: str
    messages: Chat
    reply: str


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
    ) -> None:
        self.replay = Replay(transcript)
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
        request = self.agent.request(view)
        if self.agent.role in self.roles:
            self.examples.append(ChatExample(self.agent.role, request.messages, text))
        self.agent.receive(Completion(text))
        return text


def chat_examples(
    records: Iterable[EpisodeRecord],
    config: MarketConfig | None = None,
    roles: Sequence[str] = ROLES,
    persona: str = "",
    history: int = -1,
) -> list[ChatExample]:
    """Every turn of ``roles`` in ``records`` as (prompt chat, reply), in play order.

    ``config`` is the market the records were played in; None looks up ``record.preset``.
    Invalid turns are kept (a buyer's rejected attempt is a turn too); filter on the record's
    ``TurnRecord.valid`` beforehand if only good play should be imitated.
    """
    unknown = sorted(set(roles) - set(ROLES))
    if unknown:
        raise ValueError(f"roles {unknown} are unknown; use 'seller' and/or 'buyer'")
    agent_config = LLMAgentConfig(persona=persona, history=history)
    examples: list[ChatExample] = []
    for record in records:
        name = f"episode {record.scenario.index}"
        if not record.result.turns:
            raise ValueError(f"{name} has no turns; play it with keep_turns=True")
        market_config = config if config is not None else get_preset(record.preset)
        transcript = Transcript(record.result.turns, name)
        seats = [
            Transcriber(transcript, agent_config, roles, examples) for _ in market_config.agents
        ]
        Episode(market_config, record.scenario, seats).advance()
        transcript.check_finished()
    return examples


@dataclass
class FitReport:
    """What ``fit_on_transcripts`` did."""

    out_dir: Path
    examples: int
    steps: int
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, object]:
        return {
            "out_dir": str(self.out_dir),
            "examples": self.examples,
            "steps": self.steps,
            "first_loss": self.losses[0] if self.losses else None,
            "last_loss": self.losses[-1] if self.losses else None,
            "seconds": self.seconds,
        }


def tokenize_example(
    tokenizer, example: ChatExample, max_length: int
) -> tuple[list[int], int, int]:
    """(token ids, index of the first reply token, tokens cut) under the model's chat template.

    The prompt is cut from the left when prompt + reply exceed ``max_length``: the reply is what
    is learnt, and the latest context matters most to it. The number cut is returned so training
    can keep every token at its true position (the model later reads the whole prompt).
    """
    prompt = tokenizer.apply_chat_template(
        [{"role": r, "content": c} for r, c in example.messages],
        add_generation_prompt=True,
        tokenize=False,
    )
    full = tokenizer.apply_chat_template(
        [{"role": r, "content": c} for r, c in (*example.messages, ("assistant", example.reply))],
        tokenize=False,
    )
    if not full.startswith(prompt):
        raise ValueError(
            "the chat template does not render the prompt as a prefix of the full chat; "
            "fit_on_transcripts needs a prefix-stable template (ChatML-like)"
        )
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    reply_ids = tokenizer(full[len(prompt) :], add_special_tokens=False)["input_ids"]
    if len(reply_ids) >= max_length:
        raise ValueError(f"a {len(reply_ids)}-token reply does not fit max_length={max_length}")
    cut = max(0, len(prompt_ids) + len(reply_ids) - max_length)
    prompt_ids = prompt_ids[cut:]
    return list(prompt_ids) + list(reply_ids), len(prompt_ids), cut


def fit_on_transcripts(
    model_dir: str | Path,
    records: Iterable[EpisodeRecord],
    out_dir: str | Path,
    steps: int = 300,
    lr: float = 3e-3,
    seed: int = 0,
    *,
    config: MarketConfig | None = None,
    roles: Sequence[str] = ROLES,
    batch_size: int = 8,
    max_length: int = 2048,
    history: int = -1,
) -> FitReport:
    """Fit the causal LM in ``model_dir`` on the turns of ``roles`` in ``records``; save it.

    Plain supervised next-token training (AdamW, constant ``lr``) with the loss on reply tokens
    only. Batches are drawn with a generator seeded by ``seed`` and the torch generator is seeded
    inside ``fork_rng``, so a fit is reproducible and leaves global RNG state alone. The model
    and tokenizer are written to ``out_dir``, ready for ``hf:<out_dir>``.
    """
    import torch
    from transformers import AutoModelForCausalLM

    if steps < 1 or batch_size < 1:
        raise ValueError(f"steps={steps} and batch_size={batch_size} must both be >= 1")
    if not lr > 0:
        raise ValueError(f"lr={lr} must be > 0")
    started = time.perf_counter()
    examples = chat_examples(records, config, roles, history=history)
    if not examples:
        raise ValueError(f"no turns of roles {list(roles)} in the records; nothing to fit")
    tokenizer = load_tokenizer(model_dir)
    encoded = [tokenize_example(tokenizer, e, max_length) for e in examples]
    pad = tokenizer.pad_token_id
    rng = np.random.default_rng(seed)
    losses: list[float] = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
        for _ in range(steps):
            picks = rng.choice(len(encoded), size=min(batch_size, len(encoded)), replace=False)
            batch = [encoded[int(i)] for i in picks]
            width = max(len(tokens) for tokens, _, _ in batch)
            ids = torch.full((len(batch), width), pad, dtype=torch.long)
            labels = torch.full((len(batch), width), -100, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            positions = torch.zeros((len(batch), width), dtype=torch.long)
            for row, (tokens, start, cut) in enumerate(batch):
                ids[row, : len(tokens)] = torch.tensor(tokens)
                labels[row, start : len(tokens)] = torch.tensor(tokens[start:])
                mask[row, : len(tokens)] = 1
                positions[row] = torch.arange(cut, cut + width)
            loss = model(
                input_ids=ids, attention_mask=mask, position_ids=positions, labels=labels
            ).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(float(loss.detach()))
    model.eval()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    report = FitReport(out, len(examples), steps, losses, time.perf_counter() - started)
    (out / "fit_report.json").write_text(json.dumps(report.to_dict(), indent=2))
    return report
