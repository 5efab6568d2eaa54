"""Multi-turn rollouts for GRPO: one negotiation episode becomes one GRPO completion.

A learner seat (the seller, or a buyer slot) is played by the model being trained. Its whole
episode is one token stream, kept exactly as the chat template lays out a conversation:

    prompt      = template(system, first observation) + generation prompt
    completion  = reply_1 + glue_1 + reply_2 + glue_2 + ... + reply_k

``reply_t`` are the tokens the learner sampled (``env_mask`` 1, with their sampling logprobs);
``glue_t`` is what the template puts between the end of reply ``t`` and the generation prompt
of turn ``t + 1``: the end-of-turn marker, the next observation as a user message (which carries
the other agents' moves), and the assistant header (``env_mask`` 0, logprob 0). Only the learner's
own tokens are trained. The conversation itself comes from :class:`agents.llm.LLMAgent` (system
prompt, observations, kept history), so a checkpoint evaluated later as an ``hf:`` or ``vllm:``
agent sees exactly the prompts it was trained on. The one difference: a history replays a past
reply with outer whitespace stripped, where the stream keeps the sampled tokens as they were.

Opponents are scripted agents (answered at once) or LLM agents whose requests are batched per
back-end, as in :mod:`agents.engine`. Many episodes run in lockstep: each round advances every
episode to its next model turn, then one batched generation answers all learner turns.

TRL's ``rollout_func`` only receives the dataset's ``prompt`` column, so every dataset row's
prompt is a unique key (:attr:`GroupRow.key`) that names the row's scenario and seats; the real
chat prompt is built here, once the opponents' openings are known. TRL repeats each row
``group_size`` times; entries with the same scenario and seats form one GRPO group, and the
scripted opponents are deterministic given the scenario and the history, so a group differs only
by the learner's own samples.

Self-play (one model in every seat): rows name the scenario and the *trained* seat. Entries of the
same scenario and seats but different trained seats share episodes: episode ``k`` of a scenario
serves the ``k``-th entry of each seat's group. The seller streams and the buyer streams land in
different GRPO groups, so each role's advantage is measured against that role's own baseline:
SPIRAL's role-conditioned advantage estimation, expressed as GRPO groups.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agents import make_agent
from agents.backends.base import ChatRequest, Completion
from agents.base import EpisodeContext, agent_seed
from agents.llm import LLMAgent, LLMAgentConfig
from agents.specs import parse_spec
from arena import metrics
from arena.config import MarketConfig
from arena.game import Market
from arena.records import ENV_VERSION, EpisodeRecord
from arena.scenarios import Scenario

LEARNER = "learner"
"""Seat marker: this seat is played by the model being trained."""

REPLY_SENTINEL = "<<arena-learner-reply-5b1f>>"
"""Stands in for a reply when rendering the chat template, to find the text around replies."""

Generate = Callable[[list[list[int]], int], list[tuple[list[int], list[float]]]]
"""(token streams, seed) -> one (new token ids, their sampling logprobs) per stream."""


@dataclass(frozen=True)
class GroupRow:
    """One training-dataset row: a GRPO group's scenario, every seat, and the trained seat."""

    key: str
    """The dataset prompt: unique per row (TRL passes only this to ``rollout_func``)."""
    scenario: Scenario
    seller: str
    """Seller spec, or ``LEARNER``."""
    buyers: tuple[str, ...]
    """Buyer spec per slot, or ``LEARNER``."""
    trained: str
    """Agent name whose stream is this row's completion: ``seller`` or ``buyer_<i>``."""

    def __post_init__(self) -> None:
        if len(self.buyers) != self.scenario.num_buyers:
            raise ValueError(
                f"row {self.key!r}: {len(self.buyers)} buyer seats for a scenario with "
                f"{self.scenario.num_buyers} buyers"
            )
        if self.seat(self.trained) != LEARNER:
            raise ValueError(f"row {self.key!r}: trained seat {self.trained} is not a learner seat")

    def seat(self, agent: str) -> str:
        """The spec playing ``agent`` (``seller`` or ``buyer_<i>``)."""
        if agent == "seller":
            return self.seller
        index = int(agent.removeprefix("buyer_")) - 1
        if not agent.startswith("buyer_") or not 0 <= index < len(self.buyers):
            raise ValueError(f"no seat {agent!r} in a market with {len(self.buyers)} buyers")
        return self.buyers[index]

    @property
    def episode_key(self) -> tuple[Any, ...]:
        """Entries with equal keys can share one episode (same scenario, same seats)."""
        sc = self.scenario
        return (sc.seed, sc.index, self.seller, self.buyers)


@dataclass
class Stream:
    """One learner seat's episode as token lists of equal length (completion side)."""

    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)
    """The learner's turns as decoded text, in order."""

    @property
    def context(self) -> list[int]:
        return self.prompt_ids + self.completion_ids

    def add(self, ids: Sequence[int], logprobs: Sequence[float] | None, trained: bool) -> None:
        self.completion_ids.extend(ids)
        self.logprobs.extend(logprobs if logprobs is not None else [0.0] * len(ids))
        self.env_mask.extend([int(trained)] * len(ids))


@dataclass(frozen=True)
class Rollout:
    """A finished episode with the token stream of every learner seat."""

    record: EpisodeRecord
    streams: dict[str, Stream]

    def reward(self, agent: str) -> float | None:
        """The verifiable reward of seat ``agent``; None when the episode errored (no signal)."""
        res = self.record.result
        if res.outcome == "error":
            return None
        if agent == "seller":
            return res.seller_reward
        return res.buyer_rewards[int(agent.removeprefix("buyer_")) - 1]


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


@dataclass
class Policy:
    """The learner as the rollout sees it: a name, a chat format and a batched generator."""

    spec: str
    """The learner's name in episode records."""
    chat: ChatFormat
    generate: Generate
    max_new_tokens: int
    max_episode_tokens: int


class _PolicyBackend:
    """Stands behind the learner's LLMAgent: the rollout generates, so this is never called."""

    key = "learner"

    def generate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        raise RuntimeError("a learner seat is generated by the rollout, not by a back-end")

    def close(self) -> None:
        return None


def learner_agent(policy: Policy, role: str) -> LLMAgent:
    """The LLM agent that keeps a learner seat's conversation (prompts, history) in an episode."""
    return LLMAgent(parse_spec(policy.spec), role, _PolicyBackend(), LLMAgentConfig(), {})


class _Episode:
    """One episode in flight: its market, its agents, the learner streams."""

    def __init__(self, row: GroupRow, config: MarketConfig, policy: Policy) -> None:
        self.row = row
        self.config = config
        self.policy = policy
        self.market = Market(config, row.scenario)
        self.names = config.agents
        self.agents: dict[str, Any] = {}
        self.streams: dict[str, Stream] = {}
        for slot, name in enumerate(self.names):
            role = "seller" if slot == 0 else "buyer"
            spec = row.seat(name)
            if spec == LEARNER:
                agent = learner_agent(policy, role)
                self.streams[name] = Stream()
            else:
                agent = make_agent(spec, role)
            ctx = EpisodeContext(name, slot, config, row.scenario, agent_seed(row.scenario, slot))
            agent.reset(ctx)
            self.agents[name] = agent
        self.pending: tuple[str, ChatRequest] | None = None

    def _view(self) -> Any:
        market = self.market
        return (
            market.seller_view() if market.current == "seller" else market.buyer_view(market.buyer)
        )

    def advance(self) -> tuple[str, str, ChatRequest] | None:
        """Play immediate agents until the episode ends (None) or a model must answer:
        ("learner" | "llm", agent name, request)."""
        while not self.market.done:
            name = self.market.current
            agent = self.agents[name]
            view = self._view()
            if name in self.streams or isinstance(agent, LLMAgent):
                request = agent.request(view)
                self.pending = (name, request)
                if name in self.streams and not self._extend(name, request):
                    return None
                return ("learner" if name in self.streams else "llm", name, request)
            self.market.step(agent.act(view))
        return None

    def _extend(self, name: str, request: ChatRequest) -> bool:
        """Put this turn's prompt (or the glue since the last reply) on the seat's stream;
        False when the episode would outgrow ``max_episode_tokens`` (it ends as an error)."""
        stream = self.streams[name]
        chat = self.policy.chat
        if not stream.replies:
            stream.prompt_ids = chat.prompt_ids(request.messages)
            addition = []
        else:
            addition = chat.glue_ids(request.messages, stream.completion_ids[-1])
        needed = len(stream.context) + len(addition) + self.policy.max_new_tokens
        if needed > self.policy.max_episode_tokens:
            self.market.fail(
                f"{name}'s episode would need {needed} tokens, more than max_episode_tokens="
                f"{self.policy.max_episode_tokens}"
            )
            self.pending = None
            return False
        stream.add(addition, None, trained=False)
        return True

    def learner_reply(self, ids: list[int], logprobs: list[float]) -> None:
        """Apply the learner's sampled reply to its stream, its agent and the market."""
        assert self.pending is not None
        name, _ = self.pending
        self.pending = None
        stream = self.streams[name]
        tokens_in = len(stream.context)
        stream.add(ids, logprobs, trained=True)
        text = self.policy.chat.decode_reply(ids)
        stream.replies.append(text)
        message = self.agents[name].receive(Completion(text, tokens_in, len(ids)))
        self.market.step(message, tokens_in, len(ids))

    def llm_reply(self, completion: Completion) -> None:
        """Apply an LLM opponent's reply; a back-end failure ends the episode as errored."""
        assert self.pending is not None
        name, _ = self.pending
        self.pending = None
        if completion.error is not None:
            self.market.fail(f"{self.agents[name].spec} ({name}): {completion.error}")
            return
        text = self.agents[name].receive(completion)
        self.market.step(text, completion.tokens_in, completion.tokens_out)

    def finish(self) -> Rollout:
        """The record and the streams; a seat that never acted gets a one-token stream."""
        for name, stream in self.streams.items():
            if not stream.replies and not stream.completion_ids:
                self._empty_stream(name, stream)
        record = EpisodeRecord(
            env_version=ENV_VERSION,
            preset=self.config.name,
            scenario=self.row.scenario,
            seller=self._label("seller"),
            buyers=tuple(self._label(n) for n in self.names[1:]),
            result=self.market.result(),
        )
        return Rollout(record, self.streams)

    def _label(self, name: str) -> str:
        spec = self.row.seat(name)
        return self.policy.spec if spec == LEARNER else spec

    def _empty_stream(self, name: str, stream: Stream) -> None:
        """TRL needs a non-empty completion: the seat's first prompt and an end-of-turn token,
        masked out (the seat made no decision, and its reward carries no signal of its own)."""
        if not stream.prompt_ids:
            index = int(name.removeprefix("buyer_")) - 1 if name != "seller" else 0
            view = self.market.seller_view() if name == "seller" else self.market.buyer_view(index)
            stream.prompt_ids = self.policy.chat.prompt_ids(
                self.agents[name].request(view).messages
            )
        tokenizer = self.policy.chat.tokenizer
        end = (
            tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.pad_token_id
        )
        stream.add([end], None, trained=False)


def play_rollouts(
    rows: Sequence[GroupRow], config: MarketConfig, policy: Policy, seed: int
) -> list[Rollout]:
    """Play one episode per row, in lockstep, and return them in row order.

    Every round: advance each episode to its next model turn; answer all learner turns with one
    ``policy.generate`` call (seeded from ``seed`` and the round), and all LLM-opponent turns
    with one call per back-end.
    """
    episodes = [_Episode(row, config, policy) for row in rows]
    live = list(range(len(episodes)))
    round_index = 0
    while live:
        learner_turns: list[int] = []
        llm_turns: dict[str, list[int]] = {}
        still = []
        for i in live:
            pending = episodes[i].advance()
            if pending is None:
                continue
            still.append(i)
            kind, name, _ = pending
            if kind == "learner":
                learner_turns.append(i)
            else:
                llm_turns.setdefault(episodes[i].agents[name].backend.key, []).append(i)
        live = still
        if learner_turns:
            contexts = [episodes[i].streams[episodes[i].pending[0]].context for i in learner_turns]
            replies = policy.generate(contexts, _round_seed(seed, round_index))
            if len(replies) != len(contexts):
                raise RuntimeError(
                    f"the generator returned {len(replies)} replies for {len(contexts)} prompts"
                )
            for i, (ids, logprobs) in zip(learner_turns, replies, strict=True):
                episodes[i].learner_reply(ids, logprobs)
        for indices in llm_turns.values():
            first = episodes[indices[0]]
            backend = first.agents[first.pending[0]].backend
            requests = [episodes[i].pending[1] for i in indices]
            completions = backend.generate(requests)
            for i, completion in zip(indices, completions, strict=True):
                episodes[i].llm_reply(completion)
        round_index += 1
    return [episode.finish() for episode in episodes]


def _round_seed(seed: int, round_index: int) -> int:
    state = np.random.SeedSequence([seed, round_index]).generate_state(1)[0]
    return int(state) & 0x7FFFFFFF


METRIC_NAMES = (
    "deal_rate",
    "surplus_extraction_ratio",
    "distinct_buyers_engaged",
    "deal_on_top_buyer_rate",
    "sell_below_cost_error_rate",
)
"""Section 4.1 metrics besides the reward, as logged per training step."""


def episode_metrics(record: EpisodeRecord) -> dict[str, float | None]:
    """The Section 4.1 metrics of one episode (None where a metric does not apply)."""
    if record.result.outcome == "error":
        return dict.fromkeys(METRIC_NAMES)
    return {
        "deal_rate": metrics.episode_deal(record),
        "surplus_extraction_ratio": metrics.episode_surplus_extraction_ratio(record),
        "distinct_buyers_engaged": metrics.episode_distinct_buyers_engaged(record),
        "deal_on_top_buyer_rate": metrics.episode_deal_on_top_buyer(record),
        "sell_below_cost_error_rate": metrics.episode_sold_below_cost(record),
    }


def assign_episodes(rows: Sequence[GroupRow]) -> tuple[list[GroupRow], list[int]]:
    """Which episode serves each entry: (one row per episode to play, episode index per entry).

    Entries with the same scenario and seats share episodes: the ``k``-th entry of each trained
    seat is served by the ``k``-th episode (self-play); otherwise every entry is its own episode.
    """
    to_play: list[GroupRow] = []
    serving: list[int] = []
    seen: dict[tuple[Any, ...], list[int]] = {}
    counts: dict[tuple[tuple[Any, ...], str], int] = {}
    for row in rows:
        key = row.episode_key
        k = counts.get((key, row.trained), 0)
        counts[(key, row.trained)] = k + 1
        episodes = seen.setdefault(key, [])
        if k == len(episodes):
            episodes.append(len(to_play))
            to_play.append(row)
        serving.append(episodes[k])
    return to_play, serving


def rollout_batch(
    rows: Sequence[GroupRow], config: MarketConfig, policy: Policy, seed: int
) -> dict[str, list[Any]]:
    """What ``rollout_func`` returns for the dataset entries ``rows`` (one per entry, in order).

    Required by TRL: ``prompt_ids``, ``completion_ids``, ``logprobs``; ``env_mask`` marks the
    learner's own tokens. Every other key reaches the reward function as a keyword argument:
    ``learner_reward`` (the verifiable reward), ``learner_turns`` (the learner's replies: TRL's
    ``completions`` would be the whole decoded stream), ``episode`` (an id shared by the entries
    of one self-play episode) and the Section 4.1 metrics of the episode.
    """
    to_play, serving = assign_episodes(rows)
    rollouts = play_rollouts(to_play, config, policy, seed)
    out: dict[str, list[Any]] = {
        key: []
        for key in (
            "prompt_ids",
            "completion_ids",
            "logprobs",
            "env_mask",
            "learner_reward",
            "learner_turns",
            "episode",
            *METRIC_NAMES,
        )
    }
    for row, index in zip(rows, serving, strict=True):
        rollout = rollouts[index]
        stream = rollout.streams[row.trained]
        out["prompt_ids"].append(list(stream.prompt_ids))
        out["completion_ids"].append(list(stream.completion_ids))
        out["logprobs"].append(list(stream.logprobs))
        out["env_mask"].append(list(stream.env_mask))
        out["learner_reward"].append(rollout.reward(row.trained))
        out["learner_turns"].append("\n\n".join(stream.replies))
        out["episode"].append(f"{seed}:{index}")
        for name, value in episode_metrics(rollout.record).items():
            out[name].append(value)
    return out


def batch_means(
    episodes: Sequence[str], values: dict[str, Sequence[float | None]]
) -> dict[str, float]:
    """Per-metric means over distinct episodes, skipping None; metrics with no value left out."""
    first: dict[str, int] = {}
    for position, episode in enumerate(episodes):
        first.setdefault(episode, position)
    means = {}
    for name, column in values.items():
        xs = [column[p] for p in first.values() if column[p] is not None]
        if xs:
            means[name] = math.fsum(xs) / len(xs)
    return means


def learner_reward(
    prompts: list[Any],
    completions: list[Any],
    learner_reward: list[float | None],
    episode: list[str],
    log_metric: Callable[[str, float], None] | None = None,
    **metrics_columns: Any,
) -> list[float | None]:
    """TRL reward function: the learner's verifiable reward, carried by the rollout.

    Logs the Section 4.1 metrics of the batch's distinct episodes through TRL's ``log_metric``.
    """
    if log_metric is not None:
        columns = {name: metrics_columns[name] for name in METRIC_NAMES if name in metrics_columns}
        for name, value in batch_means(episode, columns).items():
            log_metric(name, value)
    return list(learner_reward)


@contextlib.contextmanager
def eval_mode(model: Any) -> Iterator[Any]:
    """The model in eval mode for generation, back in train mode afterwards."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        if was_training:
            model.train()


class HFGenerator:
    """Sampling with the model's own ``generate`` (CPU, or GPU without vLLM), in chunks."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        temperature: float,
        top_p: float,
        max_new_tokens: int,
        chunk: int,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.temperature = temperature
        self.top_p = top_p
        self.max_new_tokens = max_new_tokens
        self.chunk = chunk
        self.stop_ids = stop_token_ids(model, tokenizer)

    def __call__(self, streams: list[list[int]], seed: int) -> list[tuple[list[int], list[float]]]:
        out: list[tuple[list[int], list[float]]] = []
        for start in range(0, len(streams), self.chunk):
            out.extend(self._generate(streams[start : start + self.chunk], seed + start))
        return out

    def _generate(self, streams: list[list[int]], seed: int) -> list[tuple[list[int], list[float]]]:
        import torch

        pad = self.tokenizer.pad_token_id
        if pad is None:
            pad = self.tokenizer.eos_token_id
        width = max(len(s) for s in streams)
        device = self.model.device
        input_ids = torch.tensor([[pad] * (width - len(s)) + s for s in streams], device=device)
        attention = torch.tensor(
            [[0] * (width - len(s)) + [1] * len(s) for s in streams], device=device
        )
        devices = [device.index or 0] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices), torch.no_grad():
            torch.manual_seed(seed)
            output = self.model.generate(
                input_ids=input_ids,
                attention_mask=attention,
                do_sample=True,
                temperature=self.temperature,
                top_p=self.top_p,
                top_k=0,
                max_new_tokens=self.max_new_tokens,
                pad_token_id=pad,
                eos_token_id=sorted(self.stop_ids),
                return_dict_in_generate=True,
                output_scores=True,
            )
        new = output.sequences[:, width:]
        steps = torch.stack(output.scores, dim=1).float().log_softmax(dim=-1)
        chosen = steps.gather(-1, new.unsqueeze(-1)).squeeze(-1)
        results = []
        for row, logps in zip(new.tolist(), chosen.tolist(), strict=True):
            length = next((i + 1 for i, t in enumerate(row) if t in self.stop_ids), len(row))
            results.append((row[:length], logps[:length]))
        return results


def stop_token_ids(model: Any, tokenizer: Any) -> set[int]:
    """Tokens that end a turn: the generation config's eos ids, else the tokenizer's eos."""
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos is None:
        eos = tokenizer.eos_token_id
    ids = eos if isinstance(eos, list) else [eos]
    stops = {int(i) for i in ids if i is not None}
    if not stops:
        raise ValueError("the model has no eos token: a learner cannot end its turns")
    return stops


class VLLMGenerator:
    """Sampling through TRL's vLLM integration (colocate or server mode), with vLLM logprobs.

    ``trainer.vllm_generation`` samples with the trainer's temperature, top_p and
    ``max_completion_length`` (set to the per-turn limit), and keeps its weights in sync with the
    model being trained (TRL syncs before each ``rollout_func`` call).
    """

    def __init__(self, trainer: Any, stop_ids: set[int]) -> None:
        self.trainer = trainer
        self.stop_ids = stop_ids

    def __call__(self, streams: list[list[int]], seed: int) -> list[tuple[list[int], list[float]]]:
        generation = self.trainer.vllm_generation
        _, completion_ids, logprobs, _ = generation.generate(
            prompts=streams, images=None, num_generations=1
        )
        if logprobs is None:
            logprobs = [[[0.0]] * len(ids) for ids in completion_ids]
        results = []
        for ids, logps in zip(completion_ids, logprobs, strict=True):
            flat = [float("nan") if lp is None or lp[0] is None else float(lp[0]) for lp in logps]
            length = next((i + 1 for i, t in enumerate(ids) if t in self.stop_ids), len(ids))
            results.append((list(ids[:length]), flat[:length]))
        return results
