"""Multi-turn rollouts for GRPO: one negotiation episode becomes one GRPO completion.

A learner seat (the seller, or a buyer slot) is played by the model being trained. To the episode
driver it is one more batched responder (:class:`Learner`, see :mod:`agents.base`): its batcher
is the policy generator instead of a model back-end, and besides answering it keeps the seat's
whole episode as one token stream (:mod:`leagues.streams`). Opponents are scripted agents
(answered at once) or LLM agents batched per back-end; the batched engine
(:func:`agents.engine.play_matches`) runs every episode of a batch in lockstep, so each round one
``policy.generate`` call answers all learner turns (seeded from the rollout seed and the round).

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

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agents.backends.base import Completion
from agents.base import EpisodeContext, Reply, View
from agents.driver import Match
from agents.engine import play_matches
from agents.llm import LLMAgent, agent_config
from agents.specs import parse_spec
from arena import metrics
from arena.config import MarketConfig
from arena.game import Market
from arena.records import EpisodeRecord
from arena.scenarios import Scenario
from arena.seats import SELLER, buyer_index, seat_slot
from leagues.branch import Branch
from leagues.generators import Context, Generate, Sample
from leagues.group_rewards import flat_groups
from leagues.learner_config import BUYER_CREDIT
from leagues.side_train import EXPLORING_STARTS
from leagues.streams import ChatFormat, Stream

LEARNER = "learner"
"""Seat marker: this seat is played by the model being trained."""


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
    """Seat whose stream is this row's completion: ``seller`` or ``buyer_<i>``."""
    credit: str = "seat"
    """Whose reward scores the row: ``seat`` (the trained seat's) or ``side`` (the mean over
    every buyer seat, whoever fills it; ``learner.buyer_credit``)."""
    shared: int = 0
    """How many of the episode's first learner replies the group's episodes share (tree
    rollouts, ``learner.shared_replies``): drawn alike and trained on by none."""
    explore: str = "none"
    """An exploring start at the group's first free bid after the branch, and which replies are
    trained then (``learner.exploring_starts``: none, episode or move; :mod:`leagues.branch`)."""

    def __post_init__(self) -> None:
        if len(self.buyers) != self.scenario.num_buyers:
            raise ValueError(
                f"row {self.key!r}: {len(self.buyers)} buyer seats for a scenario with "
                f"{self.scenario.num_buyers} buyers"
            )
        if self.seat(self.trained) != LEARNER:
            raise ValueError(f"row {self.key!r}: trained seat {self.trained} is not a learner seat")
        if isinstance(self.shared, bool) or not isinstance(self.shared, int) or self.shared < 0:
            raise ValueError(f"row {self.key!r}: shared replies must be >= 0, got {self.shared!r}")
        if self.explore not in EXPLORING_STARTS:
            raise ValueError(
                f"row {self.key!r}: explore must be one of {', '.join(EXPLORING_STARTS)}, got "
                f"{self.explore!r}"
            )
        side_on_seller = self.credit == "side" and self.trained == SELLER
        if self.credit not in BUYER_CREDIT or side_on_seller:
            raise ValueError(
                f"row {self.key!r}: credit {self.credit!r} is not seat, or side on a buyer seat"
            )

    @property
    def players(self) -> tuple[str, ...]:
        return (self.seller, *self.buyers)

    def seat(self, seat: str) -> str:
        """The spec playing ``seat`` (``seller`` or ``buyer_<i>``)."""
        try:
            slot = seat_slot(seat)
        except ValueError:
            slot = -1
        if not 0 <= slot <= len(self.buyers):
            raise ValueError(f"no seat {seat!r} in a market with {len(self.buyers)} buyers")
        return self.players[slot]

    @property
    def seating(self) -> tuple[Any, ...]:
        """Entries with equal seatings can share one episode (same scenario, same seats; the
        trained seat aside). Not an :class:`arena.records.EpisodeKey`: learner seats have no
        spec before the episode is played."""
        sc = self.scenario
        return (sc.seed, sc.index, self.seller, self.buyers)


@dataclass(frozen=True)
class Rollout:
    """A finished episode with the token stream of every learner seat."""

    record: EpisodeRecord
    streams: dict[str, Stream]

    def reward(self, seat: str, credit: str = "seat") -> float | None:
        """The verifiable reward of ``seat``, or with ``credit = "side"`` the mean over the
        buyer seats (the side's reward, as a buyer checkpoint in every seat is rated); None
        when the episode errored (no signal)."""
        res = self.record.result
        if res.outcome == "error":
            return None
        if seat == SELLER:
            return res.seller_reward
        if credit == "side":
            return sum(res.buyer_rewards) / len(res.buyer_rewards)
        return res.buyer_rewards[buyer_index(seat)]


@dataclass
class Policy:
    """The learner as the rollout sees it: a name, a chat format and a batched generator."""

    spec: str
    """The learner's name in episode records."""
    chat: ChatFormat
    generate: Generate
    max_new_tokens: int
    max_episode_tokens: int


class PolicyBatcher:
    """The learner seats' batcher: one ``policy.generate`` call per round answers every learner
    turn of every episode in flight, seeded from the rollout seed and the call's round."""

    def __init__(self, policy: Policy, seed: int) -> None:
        self.policy = policy
        self.seed = seed
        self.key = f"learner:{policy.spec}"
        self.rounds = 0
        self.streams = 0

    def new_stream(self) -> int:
        """A key for a new learner stream, unique within the rollout."""
        self.streams += 1
        return self.streams

    def generate(self, contexts: Sequence[Context]) -> list[Sample]:
        """One reply per context. Contexts with the same share and tokens (a tree-rollout
        group's shared reply) are sampled once and the reply copied: exactly one reply, where
        rows of a padded batch would differ in the last bits of their logits."""
        state = np.random.SeedSequence([self.seed, self.rounds]).generate_state(1)[0]
        self.rounds += 1
        first: dict[tuple[int, tuple[int, ...]], int] = {}
        unique: list[Context] = []
        source = []
        for context in contexts:
            if context.share is None:
                source.append(len(unique))
                unique.append(context)
                continue
            key = (context.share, tuple(context.ids))
            if key not in first:
                first[key] = len(unique)
                unique.append(context)
            source.append(first[key])
        replies = self.policy.generate(unique, int(state) & 0x7FFFFFFF)
        if len(replies) != len(unique):
            raise RuntimeError(
                f"the generator returned {len(replies)} replies for {len(unique)} prompts"
            )
        return [replies[k] for k in source]


class Learner:
    """A learner seat: an :class:`LLMAgent` keeps its conversation (prompts, history) as in
    evaluation; its replies are sampled by the policy, and its tokens go on its stream."""

    def __init__(self, policy: Policy, batcher: PolicyBatcher, branch: Branch) -> None:
        self.policy = policy
        self.batcher = batcher
        self.branch = branch
        self.shared = False
        """Whether the reply being sampled is one of the group's shared replies."""
        self.held = False
        """Whether the reply being sampled is the episode's exploring start."""
        self.spec = policy.spec
        self.stream = Stream()
        self.key = 0
        self.agent: LLMAgent | None = None
        self.context: EpisodeContext | None = None

    def reset(self, context: EpisodeContext) -> None:
        role = "seller" if context.slot == 0 else "buyer"
        spec = parse_spec(self.spec)
        self.agent = LLMAgent(spec, role, None, agent_config(spec), {})
        self.agent.reset(context)
        self.context = context
        self.stream = Stream()
        self.key = self.batcher.new_stream()

    def request(self, view: View) -> Context | Reply:
        """This turn's prompt (or the glue since the last reply) on the stream, which the
        batcher continues; an error reply when the episode would outgrow
        ``max_episode_tokens`` (it ends as an error and carries no gradient)."""
        assert self.agent is not None
        request = self.agent.request(view)
        messages = request.messages
        stream, chat = self.stream, self.policy.chat
        if not stream.replies:
            stream.prompt_ids = chat.prompt_ids(messages)
            addition: list[int] = []
        else:
            addition = chat.glue_ids(messages, stream.completion_ids[-1])
        needed = len(stream.context) + len(addition) + self.policy.max_new_tokens
        if needed > self.policy.max_episode_tokens:
            return Reply("", error=f"the episode would need {needed} tokens, more than "
                         f"max_episode_tokens={self.policy.max_episode_tokens}")  # fmt: skip
        stream.add(addition, None, trained=False)
        share = self.branch.next_share()
        self.shared = share is not None
        steer = request.steer if self.shared else self.branch.explore(request.steer)
        self.held = bool(steer and steer.explore)
        context = Context(stream.context, tuple(stream.ends), self.key, steer, share)
        stream.ends.append(len(context.ids))
        return context

    def reply(self, answer: Sample) -> Reply:
        """The sampled reply on the stream, in the agent's history and on to the market."""
        assert self.agent is not None
        ids, logprobs, forced = answer
        tokens_in = len(self.stream.context)
        # Tokens the steer forced are the environment's, not the policy's: no loss on them; nor
        # on a shared reply, every episode of the group made it (its advantages sum to zero);
        # with exploring_starts = "move" only the held reply is trained.
        untrained = self.shared or (self.branch.only_move and not self.held)
        trained = False if untrained else [not f for f in forced] if forced else True
        self.stream.add(ids, logprobs, trained=trained)
        text = self.policy.chat.decode_reply(ids)
        self.stream.replies.append(text)
        message = self.agent.receive(Completion(text, tokens_in, len(ids)))
        return Reply(message, tokens_in, len(ids))

    def finish(self) -> Stream:
        """The stream; a seat that never acted gets its opening prompt and one end-of-turn
        token, masked out (TRL needs a non-empty completion; the seat made no decision)."""
        assert self.agent is not None and self.context is not None
        stream = self.stream
        if not stream.replies and not stream.completion_ids:
            if not stream.prompt_ids:
                context = self.context
                view = Market(context.config, context.scenario).view(context.role)
                self.agent.reset(context)
                stream.prompt_ids = self.policy.chat.prompt_ids(self.agent.request(view).messages)
            stream.add([self.policy.chat.end_token], None, trained=False)
        return stream


def play_rollouts(
    rows: Sequence[GroupRow], config: MarketConfig, policy: Policy, seed: int
) -> list[Rollout]:
    """Play one episode per row, in lockstep, and return them in row order (module docstring)."""
    batcher = PolicyBatcher(policy, seed)
    seats = config.agents
    learners: list[dict[str, Learner]] = []
    matches = []
    groups: dict[tuple[Any, ...], int] = {}
    played: dict[tuple[Any, ...], int] = {}
    for row in rows:
        group = groups.setdefault(row.seating, len(groups))
        episode = played[row.seating] = played.get(row.seating, -1) + 1
        branch = Branch(
            int(np.random.SeedSequence([seed, group, 29]).generate_state(1)[0]),
            row.shared,
            episode if row.explore != "none" else None,
            only_move=row.explore == "move",
        )
        mine = {
            seat: Learner(policy, batcher, branch) for seat in seats if row.seat(seat) == LEARNER
        }
        players = [mine.get(seat, row.seat(seat)) for seat in seats]
        learners.append(mine)
        matches.append(Match(row.scenario, players[0], tuple(players[1:])))
    records, _ = play_matches(config, matches, max_concurrent=max(1, len(matches)))
    return [
        Rollout(record, {seat: learner.finish() for seat, learner in mine.items()})
        for record, mine in zip(records, learners, strict=True)
    ]


def episode_metrics(record: EpisodeRecord) -> dict[str, float | None]:
    """The training metrics of one episode (None where a metric does not apply)."""
    logged = metrics.group(metrics.TRAINING)
    if record.result.outcome == "error":
        return {m.name: None for m in logged}
    return {m.name: m.per_episode(record) for m in logged}


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
        key = row.seating
        k = counts.get((key, row.trained), 0)
        counts[(key, row.trained)] = k + 1
        episodes = seen.setdefault(key, [])
        if k == len(episodes):
            episodes.append(len(to_play))
            to_play.append(row)
        serving.append(episodes[k])
    return to_play, serving


def rollout_batch(
    rows: Sequence[GroupRow],
    config: MarketConfig,
    policy: Policy,
    seed: int,
    spares: Sequence[Scenario] = (),
    rounds: int = 0,
) -> dict[str, list[Any]]:
    """What ``rollout_func`` returns for the dataset entries ``rows`` (one per entry, in order).

    Required by TRL: ``prompt_ids``, ``completion_ids``, ``logprobs``; ``env_mask`` marks the
    learner's own tokens. Every other key reaches the reward function as a keyword argument:
    ``learner_reward`` (the verifiable reward), ``learner_turns`` (the learner's replies: TRL's
    ``completions`` would be the whole decoded stream), ``episode`` (an id shared by the entries
    of one self-play episode), ``resampled`` (the entry's group was replayed) and the training
    metrics of the episode (``arena.metrics``).

    DAPO's dynamic sampling, when ``rounds`` > 0: a group whose rewards are all equal trains
    nothing, so up to ``rounds`` times each such group is played again, all its entries, on the
    next unused scenario of ``spares`` (same seats, same dataset key: TRL still sees one group);
    groups still flat afterwards stay in the batch and are counted by the reward function.
    """
    out = _play_entries(rows, config, policy, seed)
    out["resampled"] = [False] * len(rows)
    unused = list(spares)
    for attempt in range(1, rounds + 1):
        flat = flat_groups([row.key for row in rows], out["learner_reward"])
        fresh = {key: unused.pop(0) for key in flat[: len(unused)]}
        if not fresh:
            break
        chosen = [i for i, row in enumerate(rows) if row.key in fresh]
        again = [dataclasses.replace(rows[i], scenario=fresh[rows[i].key]) for i in chosen]
        replayed = _play_entries(again, config, policy, resample_seed(seed, attempt))
        for j, i in enumerate(chosen):
            for column, values in replayed.items():
                out[column][i] = values[j]
            out["resampled"][i] = True
    return out


def resample_seed(seed: int, attempt: int) -> int:
    """The rollout seed of dynamic sampling's ``attempt``-th replay of a step's flat groups."""
    return int(np.random.SeedSequence([seed, attempt, 23]).generate_state(1)[0]) & 0x7FFFFFFF


def _play_entries(
    rows: Sequence[GroupRow], config: MarketConfig, policy: Policy, seed: int
) -> dict[str, list[Any]]:
    """Play the episodes the entries ``rows`` need and give each entry its columns."""
    to_play, serving = assign_episodes(rows)
    rollouts = play_rollouts(to_play, config, policy, seed)
    names = [m.name for m in metrics.group(metrics.TRAINING)]
    columns = ("prompt_ids", "completion_ids", "logprobs", "env_mask", "learner_reward")
    out: dict[str, list[Any]] = {key: [] for key in (*columns, "learner_turns", "episode", *names)}
    for row, index in zip(rows, serving, strict=True):
        rollout = rollouts[index]
        stream = rollout.streams[row.trained]
        out["prompt_ids"].append(list(stream.prompt_ids))
        out["completion_ids"].append(list(stream.completion_ids))
        out["logprobs"].append(list(stream.logprobs))
        out["env_mask"].append(list(stream.env_mask))
        out["learner_reward"].append(rollout.reward(row.trained, row.credit))
        out["learner_turns"].append("\n\n".join(stream.replies))
        out["episode"].append(f"{seed}:{index}")
        for name, value in episode_metrics(rollout.record).items():
            out[name].append(value)
    return out
