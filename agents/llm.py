"""LLM agents: one chat history per agent, a model back-end named by the spec, optional narration.

An agent's life in one episode:

- ``reset(context)`` forgets the previous episode and fixes the sampling settings: a spec's own
  ``temperature`` wins, else the market's ``seller_temperature`` / ``buyer_temperature`` (paper
  Section 9.2: seller 0.7 in evaluation, 1.0 in training; buyer 0.7).
- ``request(view) -> ChatRequest``: the system prompt (built on the first turn from the agent's own
  view, :mod:`agents.prompts`), the past turns, and this turn's observation as the user message.
- ``receive(completion) -> text``: the reply joins the agent's own history and the text goes to
  ``Market.step``. A Thought stays in this history; the other side only ever sees the Talk and
  Action the environment routes to it (sealed channels, Section 3.1).

The episode driver (:mod:`agents.driver`) calls ``request``/``reply`` (``receive`` in the form
the driver applies) so the engine can batch many agents into one back-end call, the agent's
``batcher``; ``act(view)`` does both with one call, for sequential play.

Reasoning models: a leading ``<think>...</think>`` block is left in the text given to
``Market.step``, so the transcript keeps it and the parser strips it before parsing; the agent's
own history drops it, as the chat templates of Qwen3 and DeepSeek-R1 do. ``max_tokens`` bounds a
turn, thinking included; a reply cut inside its think block is a format error.

Narration (``narrate=scripted:<name>``): the scripted agent decides the move (target, product,
action and price); the LLM is shown that move and writes the Thought and Talk; the text sent to the
market is the LLM's Thought and Talk with the scripted Target/Product/Action lines, whatever the
LLM wrote there. When the LLM's reply has no readable Thought or Talk, the scripted agent's own
words stand in, so the regulated prices always hold.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agents.backends import check_model_source, end_conversations, get_backend
from agents.backends.base import (
    SAMPLING_KEYS,
    Backend,
    ChatRequest,
    Completion,
    SamplingConfig,
    sampling_from_params,
)
from agents.base import EpisodeContext, Reply
from agents.prompts import PROMPT_STYLES, narration_note, observation, personas, system_prompt
from agents.scripted import make_scripted
from agents.specs import AgentSpec, SpecError, build_config, parse_spec
from agents.steering import check_steer, steer_for
from arena.game import BuyerView, SellerView
from arena.money import check_ladder
from arena.protocol import (
    BuyerMessage,
    FormatViolation,
    SellerMessage,
    label_line,
    parse_buyer,
    parse_seller,
    render_action,
    render_buyer,
    render_seller,
    split_reasoning,
)

AGENT_KEYS: tuple[str, ...] = (
    "persona", "narrate", "history", "prompt", "steer", "ladder", "budget_hint",
    "list_hint", "round_hint", "share_cue",
)  # fmt: skip
"""Spec parameters that belong to the agent itself (sampling keys are the agent's too)."""

DEFAULT_MAX_TOKENS = 512
"""Token limit of one reply when the spec sets no ``max_tokens``: room for a protocol message
with a long Thought. Reasoning models need more (``max_tokens=4096``)."""

UNSEEDED = ("none", "")
"""``seed=none`` asks for unseeded sampling (not reproducible from the scenario's seed)."""


@dataclass(frozen=True)
class LLMAgentConfig:
    """Agent-level spec parameters of an LLM agent (the rest configure sampling and back-end)."""

    persona: str = field(
        default="", metadata={"help": "Persona fragment: cooperative, hostile or deceptive."}
    )
    narrate: str = field(
        default="",
        metadata={"help": "scripted:<name>: that agent decides the moves, the LLM writes words."},
    )
    history: int = field(
        default=-1,
        metadata={"help": "Past exchanges kept in the prompt: -1 all, 0 none, n the last n."},
    )

    prompt: str = field(
        default="full",
        metadata={
            "help": "Prompt style: full (the paper's prompts) or compact (the same protocol in "
            "few tokens, for small models; single-product markets)."
        },
    )

    steer: str = field(
        default="none",
        metadata={
            "help": "Steered decoding: none; deal (a seller's [DEAL] is written at the "
            "standing bid it takes); legal (deal, and the seller's target kept among the "
            "active channels); protocol (legal, and every line's field label, for a buyer "
            "too); ladder (protocol, and a buyer's [BUY] price drawn among its ladder's "
            "rungs and its budget; needs ladder=N); or share (protocol, and a buyer's move one "
            "digit of its Thought: the tenths of its budget it offers, 0 for none, the price "
            "written from it; needs ladder=N); agents.steering. hf back-end only."
        },
    )

    ladder: int = field(
        default=0,
        metadata={
            "help": "A buyer's budget ladder: its system prompt lists offers at 90%, 80%, ... of "
            "its budget, this many tenths down (0: none; at most 9), numbers a small model can "
            "copy; a seller's prompt is unchanged. Single-product markets."
        },
    )
    budget_hint: bool = field(
        default=False,
        metadata={
            "help": "Each of a buyer's turns says whether its budget covers the seller's "
            "standing offer: the comparison of two prices a small model cannot make digit by "
            "digit; the decision stays its own. A seller's turns are unchanged."
        },
    )
    list_hint: bool = field(
        default=False,
        metadata={
            "help": "Each of a buyer's turns says how far the seller's standing offer lies "
            "below list price, in whole percent (or that it is the list price): an anchor at "
            "list told from a concession; the decision stays its own. Sellers unchanged."
        },
    )
    round_hint: bool = field(
        default=False,
        metadata={
            "help": "A buyer's turn says, in words, when the seller's next message to it is "
            "its last (or that it was): the count 'k of K' is digits a small model cannot "
            "compare; the bid stays its own. Sellers unchanged; any market."
        },
    )
    share_cue: bool = field(
        default=False,
        metadata={
            "help": "Under steer=share, a buyer's Thought opens with 'They hold list.' or "
            "'They came down.' (the seller's standing offer at list or below it) before the "
            "share digit is drawn: the cue sits where the bid is chosen. Needs steer=share."
        },
    )

    def __post_init__(self) -> None:
        check_ladder(self.ladder)
        check_steer(self.steer, self.ladder)
        if self.persona and self.persona not in personas():
            raise ValueError(
                f"persona={self.persona!r} is unknown; choose one of {', '.join(personas())}"
            )
        if self.narrate and not self.narrate.startswith("scripted:"):
            raise ValueError(
                f"narrate={self.narrate!r} must name a scripted agent, e.g. narrate=scripted:time"
            )
        if self.share_cue and self.steer != "share":
            raise ValueError(
                f"share_cue=true cues the share digit; it needs steer=share, got {self.steer}"
            )
        if self.history < -1:
            raise ValueError(f"history={self.history} is invalid: use -1 (all), 0 or more")
        if self.prompt not in PROMPT_STYLES:
            raise ValueError(
                f"prompt={self.prompt!r} is unknown; choose one of {', '.join(PROMPT_STYLES)}"
            )


class BackendError(RuntimeError):
    """A back-end failed to answer (after its own retries); raised by ``act`` only."""


def history_reply(text: str) -> str:
    """What a reply leaves in the agent's own history: the text without its think block."""
    return split_reasoning(text)[1].strip()


class Conversation:
    """One agent's chat state: a system prompt, then alternating user and assistant turns."""

    def __init__(self, system: str, history: int = -1) -> None:
        self.system = system
        self.history = history
        self.turns: list[tuple[str, str]] = []

    def messages(self, user: str) -> tuple[tuple[str, str], ...]:
        """The chat to send for a new user message: system, kept past turns, the new message."""
        kept = self.turns if self.history < 0 else self.turns[len(self.turns) - self.history :]
        past = [m for u, a in kept for m in (("user", u), ("assistant", a))]
        return (("system", self.system), *past, ("user", user))

    def add(self, user: str, reply: str) -> None:
        self.turns.append((user, history_reply(reply)))


Move = SellerMessage | BuyerMessage


def decided_move(text: str, view: SellerView | BuyerView, spec: str) -> Move:
    """Parse the narrator's (scripted) message; scripted agents always emit valid text."""
    multi = len(view.products) > 1
    move = parse_seller(text, multi) if isinstance(view, SellerView) else parse_buyer(text, multi)
    if isinstance(move, FormatViolation):
        raise ValueError(f"narrator of {spec!r} emitted an unparseable move ({move.reason})")
    return move


def describe_move(move: Move) -> str:
    """The fixed lines of a narrated move, as the LLM is shown them."""
    lines = []
    if isinstance(move, SellerMessage):
        lines.append(f"Target: {move.buyer + 1}")
    if move.product is not None:
        lines.append(f"Product: {move.product + 1}")
    lines.append(f"Action: {render_action(move.kind, move.price)}")
    return "\n".join(lines)


def reply_words(text: str) -> tuple[str, str]:
    """(Thought, Talk) read leniently from a reply, each on one line; "" when absent."""
    fields: dict[str, list[str]] = {}
    current: str | None = None
    for line in history_reply(text).splitlines():
        opened = label_line(line)
        if opened is not None:
            current, rest = opened
            fields.setdefault(current, []).append(rest)
        elif current is not None:
            fields[current].append(line)

    def one_line(label: str) -> str:
        return " ".join(" ".join(fields.get(label, [])).split()).strip("*_ ")

    return one_line("thought"), one_line("talk")


def narrated_text(move: Move, reply: str) -> str:
    """The LLM's Thought and Talk around the scripted move; scripted words fill any gap."""
    thought, talk = reply_words(reply)
    move = dataclasses.replace(move, thought=thought or move.thought, talk=talk or move.talk)
    return render_seller(move) if isinstance(move, SellerMessage) else render_buyer(move)


def request_seed(context_seed: int, base: int, index: int) -> int:
    """Sampling seed of an agent's ``index``-th request in an episode (reproducible runs)."""
    state = np.random.SeedSequence([context_seed, base, index]).generate_state(1)[0]
    return int(state) & 0x7FFFFFFF


class LLMAgent:
    """A negotiating agent whose messages come from a chat model behind ``backend``."""

    def __init__(
        self,
        spec: AgentSpec,
        role: str,
        backend: Any,
        config: LLMAgentConfig,
        sampling: Mapping[str, str],
        narrator: Any = None,
    ) -> None:
        self.spec = spec.raw
        self.role = role
        self.backend = backend
        self.config = config
        self.narrator = narrator
        self._sampling_params, self.seeded, self.seed_base = parse_sampling(spec, sampling)
        self.sampling = SamplingConfig(max_tokens=DEFAULT_MAX_TOKENS)
        self.context: EpisodeContext | None = None
        self.conversation: Conversation | None = None
        self.conversation_id: str | None = None
        self.requests = 0
        self._pending: tuple[str, Move | None] | None = None
        self.last_completion: Completion | None = None

    def __repr__(self) -> str:
        return f"LLMAgent(spec={self.spec!r}, role={self.role!r}, backend={self.backend.key!r})"

    @property
    def batcher(self) -> Backend:
        """The back-end answers this agent's requests, batched with every agent sharing it."""
        return self.backend

    def reset(self, context: EpisodeContext) -> None:
        """Start a new episode: empty history, sampling defaults from the market config."""
        seller = context.role == "seller"
        if seller != (self.role == "seller"):
            raise ValueError(f"{self.spec!r} was built as {self.role} but is asked to play "
                             f"{context.role}")  # fmt: skip
        market = context.config
        temperature = market.seller_temperature if seller else market.buyer_temperature
        default = SamplingConfig(temperature=temperature, max_tokens=DEFAULT_MAX_TOKENS)
        self.sampling = sampling_from_params(self._sampling_params, default)
        if self.conversation_id is not None:
            # The previous episode is over: its back-end may drop the KV cache it kept for it.
            end_conversations(self.backend, [self.conversation_id])
        self.context = context
        self.conversation = None
        self.conversation_id = None
        self.requests = 0
        self._pending = None
        if self.narrator is not None:
            self.narrator.reset(context)

    def request(self, view: SellerView | BuyerView) -> ChatRequest:
        """The chat request for this turn; pair it with exactly one ``receive``."""
        context = self.context
        if context is None:
            raise RuntimeError(f"{self.spec!r}: call reset(context) before request()")
        if self._pending is not None:
            raise RuntimeError(f"{self.spec!r}: receive() the previous reply first")
        episode = f"{context.scenario.seed}:{context.scenario.index}/{context.role}"
        if self.conversation is None:
            system = system_prompt(
                view,
                context.config.total_turns,
                self.config.persona,
                self.config.prompt,
                self.config.ladder,
            )
            self.conversation = Conversation(system, self.config.history)
            # One id per agent per episode (the live Conversation object's id keeps concurrent
            # episodes of the same scenario apart): back-ends key cached KV by it.
            self.conversation_id = f"{episode}#{id(self.conversation):x}"
        config = self.config
        user = observation(
            view, config.prompt, config.budget_hint, config.list_hint, config.round_hint
        )
        move = None
        if self.narrator is not None:
            move = decided_move(self.narrator.act(view), view, self.spec)
            user = f"{user}\n\n{narration_note(describe_move(move))}"
        seed = request_seed(context.seed, self.seed_base, self.requests) if self.seeded else None
        sampling = dataclasses.replace(self.sampling, seed=seed)
        tag = f"{episode}/{self.requests}"
        self.requests += 1
        self._pending = (user, move)
        return ChatRequest(
            self.conversation.messages(user),
            sampling,
            tag,
            # The adapter of an AdapterView back-end (agents.backends.adapters); None otherwise.
            adapter=getattr(self.backend, "adapter", None),
            conversation=self.conversation_id,
            steer=steer_for(view, config.steer, config.ladder, config.share_cue),
        )

    def receive(self, completion: Completion) -> str:
        """The protocol text for ``Market.step`` from the model's reply to the last request."""
        if self._pending is None or self.conversation is None:
            raise RuntimeError(f"{self.spec!r}: receive() without a pending request()")
        user, move = self._pending
        self._pending = None
        self.last_completion = completion
        if completion.error is not None:
            raise BackendError(f"{self.spec!r} ({self.backend.key}): {completion.error}")
        text = completion.text if move is None else narrated_text(move, completion.text)
        self.conversation.add(user, text)
        return text

    def reply(self, completion: Completion) -> Reply:
        """The driver's form of :meth:`receive`: a failed completion is an error reply (the
        episode ends as errored) instead of an exception."""
        if completion.error is not None:
            self._pending = None
            self.last_completion = completion
            return Reply("", completion.tokens_in, completion.tokens_out, completion.error,
                         completion.retries)  # fmt: skip
        text = self.receive(completion)
        return Reply(text, completion.tokens_in, completion.tokens_out, None, completion.retries)

    def follow(self, view: SellerView | BuyerView, text: str) -> None:
        """Take a recorded reply as this turn's own, without asking the model: the history, the
        request count (hence later sampling seeds) and a narrator move on as if the model had
        written ``text`` (a counterfactual replay's prefix, :mod:`agents.counterfactual`)."""
        self.request(view)
        self.receive(Completion(text))

    def act(self, view: SellerView | BuyerView) -> str:
        """One turn with its own back-end call (sequential play; the engine batches instead)."""
        request = self.request(view)
        (completion,) = self.backend.generate([request])
        return self.receive(completion)


def split_agent_params(
    params: Mapping[str, str],
) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """(agent params, sampling params, back-end params) of an LLM spec."""
    agent = {k: v for k, v in params.items() if k in AGENT_KEYS}
    sampling = {k: v for k, v in params.items() if k in SAMPLING_KEYS}
    backend = {k: v for k, v in params.items() if k not in AGENT_KEYS + SAMPLING_KEYS}
    return agent, sampling, backend


def agent_config(spec: AgentSpec) -> LLMAgentConfig:
    """The agent-level settings (persona, narration, history, prompt style) a spec names."""
    return build_config(LLMAgentConfig, split_agent_params(spec.params)[0], spec.raw)


def parse_sampling(
    spec: AgentSpec, sampling: Mapping[str, str]
) -> tuple[dict[str, str], bool, int]:
    """(sampling params but the seed, whether requests are seeded, the seed base) of a spec."""
    params = {k: v for k, v in sampling.items() if k != "seed"}
    raw_seed = sampling.get("seed")
    seeded = raw_seed is None or raw_seed.strip().lower() not in UNSEEDED
    try:
        seed_base = int(raw_seed) if seeded and raw_seed is not None else 0
        sampling_from_params(params)
    except ValueError as exc:
        raise SpecError(f"{spec.raw!r}: {exc}") from None
    return params, seeded, seed_base


def _llm_parts(
    spec: str | AgentSpec, role: str
) -> tuple[AgentSpec, LLMAgentConfig, Any, dict[str, str], dict[str, str]]:
    """(spec, agent config, narrator, sampling params, back-end params), each checked, and the
    local model folder looked for; no model is loaded."""
    parsed = parse_spec(spec) if isinstance(spec, str) else spec
    if parsed.kind == "scripted":
        raise SpecError(f"{parsed.raw!r} is a scripted agent; use agents.make_agent")
    if role not in ("seller", "buyer"):
        raise ValueError(f"role must be 'seller' or 'buyer', got {role!r}")
    agent_params, sampling, backend_params = split_agent_params(parsed.params)
    config = build_config(LLMAgentConfig, agent_params, parsed.raw)
    narrator = make_scripted(parse_spec(config.narrate), role) if config.narrate else None
    parse_sampling(parsed, sampling)
    if config.steer != "none" and parsed.kind != "hf":
        raise SpecError(
            f"{parsed.raw!r}: steer={config.steer} is applied by the hf back-end only; "
            "drop it or use an hf: spec"
        )
    try:
        check_model_source(parsed.kind, parsed.name, backend_params)
    except ValueError as exc:
        raise SpecError(f"{parsed.raw!r}: {exc}") from None
    return parsed, config, narrator, sampling, backend_params


def check_llm_spec(spec: str | AgentSpec, role: str) -> AgentSpec:
    """Everything :func:`make_llm_agent` checks, without loading a model: the agent, sampling
    and back-end parameters, and that a local model (or adapter) folder exists."""
    return _llm_parts(spec, role)[0]


def make_llm_agent(spec: str | AgentSpec, role: str) -> LLMAgent:
    """Build the LLM agent named by ``spec`` for ``role``; back-ends are shared per model. A
    back-end that fails to start (a model that does not load, a missing library) is a
    :class:`SpecError` naming the spec."""
    parsed, config, narrator, sampling, backend_params = _llm_parts(spec, role)
    try:
        backend = get_backend(parsed.kind, parsed.name, backend_params)
    except Exception as exc:
        raise SpecError(
            f"{parsed.raw!r}: the {parsed.kind} back-end did not start: {type(exc).__name__}: {exc}"
        ) from exc
    return LLMAgent(parsed, role, backend, config, sampling, narrator)
