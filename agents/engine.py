"""The batched engine: many episodes in flight, one batcher call per back-end per round.

:func:`play_matches` keeps up to ``max_concurrent`` :class:`agents.driver.Episode` objects
running. Three names, one for each way of saying what to play, and nothing else plays episodes:

- :func:`play_matches`: the matches (a scenario and a player per seat) given;
- :func:`play_vs_pool`: a seller on every scenario against buyers drawn from a pool (the
  evaluation shape; the matches are built with :func:`agents.driver.buyer_lineup`);
- :func:`drive_episodes`: episodes the caller builds, e.g. counterfactual replays that start
  after their recorded prefix, or a human's seat.

Each episode is advanced as soon as it starts and after every reply: immediate responders
(scripted agents) answer at once, so an all-scripted match is played to the end the moment it
starts and the loop never batches anything: that is the fast path, with no separate code. A
batched responder (an LLM agent, the GRPO learner) leaves its request waiting; each round the
waiting requests are grouped by batcher key (every agent naming the same model shares one
back-end, see ``agents.backends.get_backend``) and each group is answered by one
``batcher.generate`` call, whose answers go back to their episodes.

Episodes progress independently: one waiting on a buyer re-sample does not hold back another
already at its seller's turn; they share the next batch. Sampling seeds come from the scenario's
``episode_seed``, the agent slot and the agent's request count (``agents.llm``), so a run is
reproducible whatever the batch composition.

A malformed reply is an outcome: it goes to ``Market.step`` as text (a seller format error is a
violation, a buyer's is re-sampled by the game). A back-end failure (``Completion.error``) ends
that episode as errored through ``Market.fail`` and the run goes on; ``on_episode`` is called as
each episode finishes, so nothing finished is lost if a later batch raises.

Agents named by spec are built once per (spec, role, slot) and reused by later episodes (every
episode resets them), so scripted play builds a handful of agents for a whole tournament.
"""

from __future__ import annotations

import dataclasses
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents import make_agent
from agents.base import Reply
from agents.driver import Episode, Match, Player, Responder, buyer_lineup
from arena.config import MarketConfig
from arena.records import EpisodeRecord
from arena.scenarios import Scenario

OnEpisode = Callable[[EpisodeRecord], None]


@dataclass
class AgentUsage:
    """Model usage of one agent spec over a run."""

    requests: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    retries: int = 0
    errors: int = 0

    def add(self, reply: Reply) -> None:
        self.requests += 1
        self.tokens_in += reply.tokens_in
        self.tokens_out += reply.tokens_out
        self.retries += reply.retries
        self.errors += reply.error is not None


@dataclass
class BatchUsage:
    """How one back-end was called: batches, requests, and how well they were shared."""

    batches: int = 0
    requests: int = 0
    largest_batch: int = 0
    mixed_batches: int = 0
    """Batches that carried requests of more than one agent spec (a shared model)."""
    seconds: float = 0.0


@dataclass
class RunStats:
    """What a run cost: tokens per agent spec, calls per back-end, errors and wall time."""

    episodes: int = 0
    errored_episodes: int = 0
    wall_seconds: float = 0.0
    per_agent: dict[str, AgentUsage] = field(default_factory=dict)
    per_backend: dict[str, BatchUsage] = field(default_factory=dict)

    @property
    def requests(self) -> int:
        return sum(u.requests for u in self.per_agent.values())

    @property
    def retries(self) -> int:
        return sum(u.retries for u in self.per_agent.values())

    @property
    def errors(self) -> int:
        return sum(u.errors for u in self.per_agent.values())

    @property
    def tokens_in(self) -> int:
        return sum(u.tokens_in for u in self.per_agent.values())

    @property
    def tokens_out(self) -> int:
        return sum(u.tokens_out for u in self.per_agent.values())

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready totals plus the per-agent and per-back-end breakdowns."""
        return {
            "episodes": self.episodes,
            "errored_episodes": self.errored_episodes,
            "wall_seconds": self.wall_seconds,
            "episodes_per_second": self.episodes / self.wall_seconds if self.wall_seconds else 0.0,
            "requests": self.requests,
            "retries": self.retries,
            "errors": self.errors,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "per_agent": {k: dataclasses.asdict(v) for k, v in self.per_agent.items()},
            "per_backend": {k: dataclasses.asdict(v) for k, v in self.per_backend.items()},
        }


class AgentPool:
    """Agents built from specs, kept per (spec, role, slot) and handed out to one episode at a
    time: an episode resets its agents, so a finished episode's agents serve the next one."""

    def __init__(self) -> None:
        self._free: dict[tuple[str, int], list[Responder]] = defaultdict(list)

    def take(self, player: Player, slot: int) -> Responder:
        if not isinstance(player, str):
            return player
        free = self._free[(player, slot)]
        return free.pop() if free else make_agent(player, "seller" if slot == 0 else "buyer")

    def give_back(self, players: Sequence[Player], responders: Sequence[Responder]) -> None:
        for slot, (player, responder) in enumerate(zip(players, responders, strict=True)):
            if isinstance(player, str):
                self._free[(player, slot)].append(responder)


def play_matches(
    config: MarketConfig,
    matches: Sequence[Match],
    max_concurrent: int = 64,
    on_episode: OnEpisode | None = None,
    keep_turns: bool = True,
) -> tuple[list[EpisodeRecord], RunStats]:
    """Play every match; records come back in match order, ``on_episode`` sees them as they
    finish. See the module docstring for the batching."""
    pool = AgentPool()

    def start(order: int) -> Episode:
        match = matches[order]
        players = [pool.take(p, slot) for slot, p in enumerate(match.players)]
        return Episode(config, match.scenario, players, keep_turns)

    def release(order: int, episode: Episode) -> None:
        pool.give_back(matches[order].players, episode.responders)

    return drive_episodes(len(matches), start, max_concurrent, on_episode, release)


def drive_episodes(
    count: int,
    start: Callable[[int], Episode],
    max_concurrent: int = 64,
    on_episode: OnEpisode | None = None,
    release: Callable[[int, Episode], None] | None = None,
) -> tuple[list[EpisodeRecord], RunStats]:
    """Play ``count`` episodes to their end, ``start(order)`` building each when a place is
    free (it may already have played some turns: a counterfactual replay starts after its
    recorded prefix); ``release(order, episode)`` is called as each finishes. Records come back
    in order; see the module docstring for the batching."""
    if max_concurrent < 1:
        raise ValueError(f"max_concurrent={max_concurrent} is invalid: use an integer >= 1")
    stats = RunStats()
    began = time.perf_counter()
    queue = deque(range(count))
    finished: dict[int, EpisodeRecord] = {}
    running: list[tuple[int, Episode, Any]] = []

    def step(order: int, episode: Episode) -> None:
        """Advance one episode: finished, or waiting with its request."""
        request = episode.advance()
        if request is not None:
            running.append((order, episode, request))
            return
        record = episode.record()
        if release is not None:
            release(order, episode)
        finished[order] = record
        stats.episodes += 1
        stats.errored_episodes += record.result.outcome == "error"
        if on_episode is not None:
            on_episode(record)

    while queue or running:
        while queue and len(running) < max_concurrent:
            order = queue.popleft()
            step(order, start(order))
        groups: dict[str, list[tuple[int, Episode, Any]]] = {}
        for item in sorted(running, key=lambda item: item[0]):
            waiting = item[1].waiting
            assert waiting is not None
            groups.setdefault(waiting.batcher.key, []).append(item)
        running.clear()
        for key, group in groups.items():
            _answer(key, group, stats)
            for order, episode, _ in group:
                step(order, episode)
    stats.wall_seconds = time.perf_counter() - began
    return [finished[i] for i in range(count)], stats


def _answer(key: str, group: list[tuple[int, Episode, Any]], stats: RunStats) -> None:
    """One ``generate`` call for every waiting request of one batcher; each answer is delivered
    to its episode (the caller advances them)."""
    responders = [episode.waiting for _, episode, _ in group]
    batcher = responders[0].batcher  # type: ignore[union-attr]
    began = time.perf_counter()
    answers = batcher.generate([request for _, _, request in group])
    if len(answers) != len(group):
        raise RuntimeError(f"back-end {key} returned {len(answers)} answers for {len(group)} "
                           "requests")  # fmt: skip
    usage = stats.per_backend.setdefault(key, BatchUsage())
    usage.batches += 1
    usage.requests += len(group)
    usage.largest_batch = max(usage.largest_batch, len(group))
    usage.mixed_batches += len({r.spec for r in responders if r is not None}) > 1
    usage.seconds += time.perf_counter() - began
    for (_, episode, _), responder, answer in zip(group, responders, answers, strict=True):
        assert responder is not None
        stats.per_agent.setdefault(responder.spec, AgentUsage()).add(episode.deliver(answer))


def play_vs_pool(
    config: MarketConfig,
    scenarios: Iterable[Scenario],
    seller: Player,
    buyer_pool: Sequence[str],
    max_concurrent: int = 64,
    on_episode: OnEpisode | None = None,
    keep_turns: bool = True,
) -> tuple[list[EpisodeRecord], RunStats]:
    """Play ``seller`` against buyers drawn from ``buyer_pool`` (:func:`buyer_lineup`) on every
    scenario; records in scenario order."""
    if max_concurrent < 1:
        raise ValueError(f"max_concurrent={max_concurrent} is invalid: use an integer >= 1")
    if not buyer_pool:
        raise ValueError("buyer_pool is empty; give at least one buyer spec")
    matches = [Match(sc, seller, buyer_lineup(sc, buyer_pool)) for sc in scenarios]
    return play_matches(config, matches, max_concurrent, on_episode, keep_turns)
