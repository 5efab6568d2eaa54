"""The batched rollout engine: many episodes in flight, one back-end call per model per step.

Each round the engine

1. tops the set of running episodes up to ``max_concurrent``;
2. advances every running episode: scripted agents answer at once, until the episode ends or an
   LLM agent has to wait for a model reply (its ``ChatRequest`` is collected);
3. groups the collected requests by back-end key (every agent naming the same model shares one
   back-end, see ``agents.backends.get_backend``) and sends each group as one ``generate`` batch;
4. hands every reply back to its agent and applies the text with ``Market.step(text, tokens_in,
   tokens_out)``, so each turn records its token counts.

Episodes progress independently: one waiting on a buyer re-sample does not hold back another
that is already at its seller's turn; they simply share the next batch. Sampling seeds come from
the scenario's ``episode_seed``, the agent slot and the agent's request count (``agents.llm``), so a
run is reproducible whatever the batch composition.

A malformed reply is an outcome: it goes to ``Market.step`` as text (a seller format error is a
violation, a buyer's is re-sampled by the game). A back-end failure (``Completion.error``) ends
that episode as errored through ``Market.fail`` and the run goes on; ``on_episode`` is called as
each episode finishes, so nothing finished is lost if a later batch raises.
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents import make_agent
from agents.backends.base import ChatRequest, Completion
from agents.base import EpisodeContext, agent_seed
from agents.llm import LLMAgent
from agents.specs import is_scripted
from arena.config import MarketConfig
from arena.game import Market
from arena.records import ENV_VERSION, EpisodeRecord
from arena.scenarios import Scenario
from tournaments.match import buyer_lineup, play_many


@dataclass
class AgentUsage:
    """Model usage of one agent spec over a run."""

    requests: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    retries: int = 0
    errors: int = 0

    def add(self, completion: Completion) -> None:
        self.requests += 1
        self.tokens_in += completion.tokens_in
        self.tokens_out += completion.tokens_out
        self.retries += completion.retries
        self.errors += completion.error is not None


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


class _Episode:
    """One running episode: its market, its freshly built agents, and who waits for a model."""

    def __init__(self, order: int, config: MarketConfig, scenario: Scenario, seller_spec: str,
                 lineup: tuple[str, ...], keep_turns: bool) -> None:  # fmt: skip
        self.order = order
        self.config = config
        self.scenario = scenario
        self.lineup = lineup
        self.market = Market(config, scenario, keep_turns=keep_turns)
        # Fresh agents per episode: episodes run at once, so agents cannot be shared by slot.
        self.agents = [make_agent(seller_spec, "seller")]
        self.agents += [make_agent(spec, "buyer") for spec in lineup]
        for slot, agent in enumerate(self.agents):
            role = "seller" if slot == 0 else f"buyer_{slot}"
            agent.reset(EpisodeContext(role, slot, config, scenario, agent_seed(scenario, slot)))
        self.waiting: LLMAgent | None = None

    def _actor(self) -> tuple[Any, Any]:
        market = self.market
        if market.current == "seller":
            return self.agents[0], market.seller_view()
        return self.agents[market.buyer + 1], market.buyer_view(market.buyer)

    def advance(self) -> ChatRequest | None:
        """Play immediate agents until the episode ends (None) or an LLM agent must wait."""
        while not self.market.done:
            agent, view = self._actor()
            if isinstance(agent, LLMAgent):
                self.waiting = agent
                return agent.request(view)
            self.market.step(agent.act(view))
        return None

    def deliver(self, completion: Completion) -> None:
        """Apply the model's reply, or end the episode as errored when the back-end failed."""
        agent = self.waiting
        assert agent is not None
        self.waiting = None
        if completion.error is not None:
            self.market.fail(f"{agent.spec} ({self.market.current}): {completion.error}")
            return
        text = agent.receive(completion)
        self.market.step(text, completion.tokens_in, completion.tokens_out)

    def record(self) -> EpisodeRecord:
        return EpisodeRecord(
            env_version=ENV_VERSION,
            preset=self.config.name,
            scenario=self.scenario,
            seller=self.agents[0].spec,
            buyers=tuple(a.spec for a in self.agents[1:]),
            result=self.market.result(),
        )


def _all_scripted(specs: Iterable[str]) -> bool:
    return all(is_scripted(spec) for spec in specs)


def run_episodes(
    config: MarketConfig,
    scenarios: Iterable[Scenario],
    seller_spec: str,
    buyer_pool: Sequence[str],
    max_concurrent: int = 64,
    on_episode: Callable[[EpisodeRecord], None] | None = None,
    keep_turns: bool = True,
) -> tuple[list[EpisodeRecord], RunStats]:
    """Play ``seller_spec`` against buyers drawn from ``buyer_pool`` on every scenario.

    Records come back in scenario order; ``on_episode`` sees them in finishing order. The buyer of
    each slot is ``tournaments.match.buyer_lineup(scenario, buyer_pool)``, as in ``play_many``,
    so scripted-only runs (delegated to ``play_many``) and batched runs give the same records.
    """
    if max_concurrent < 1:
        raise ValueError(f"max_concurrent={max_concurrent} is invalid: use an integer >= 1")
    if not buyer_pool:
        raise ValueError("buyer_pool is empty; give at least one buyer spec")
    scenarios = list(scenarios)
    if _all_scripted([seller_spec, *buyer_pool]):
        stats = RunStats()
        start = time.perf_counter()
        records = play_many(config, scenarios, seller_spec, buyer_pool, keep_turns, on_episode)
        stats.episodes = len(records)
        stats.wall_seconds = time.perf_counter() - start
        return records, stats
    jobs = [(seller_spec, buyer_lineup(sc, buyer_pool), sc) for sc in scenarios]
    return run_jobs(config, jobs, max_concurrent, on_episode, keep_turns)


def run_jobs(
    config: MarketConfig,
    jobs: Sequence[tuple[str, tuple[str, ...], Scenario]],
    max_concurrent: int = 64,
    on_episode: Callable[[EpisodeRecord], None] | None = None,
    keep_turns: bool = True,
) -> tuple[list[EpisodeRecord], RunStats]:
    """Play explicit (seller spec, buyer lineup, scenario) jobs with batched model calls.

    The tournament runner uses this form: its jobs carry lineups already drawn from pools.
    """
    if max_concurrent < 1:
        raise ValueError(f"max_concurrent={max_concurrent} is invalid: use an integer >= 1")
    stats = RunStats()
    start = time.perf_counter()
    queue = deque(enumerate(jobs))
    running: list[_Episode] = []
    finished: dict[int, EpisodeRecord] = {}

    def finish(episode: _Episode) -> None:
        record = episode.record()
        finished[episode.order] = record
        stats.episodes += 1
        stats.errored_episodes += record.result.outcome == "error"
        if on_episode is not None:
            on_episode(record)

    while queue or running:
        while queue and len(running) < max_concurrent:
            order, (seller_spec, lineup, scenario) = queue.popleft()
            running.append(_Episode(order, config, scenario, seller_spec, lineup, keep_turns))
        waiting: list[tuple[_Episode, ChatRequest]] = []
        still: list[_Episode] = []
        for episode in running:
            request = episode.advance()
            if request is None:
                finish(episode)
            else:
                waiting.append((episode, request))
                still.append(episode)
        running = still
        groups: dict[str, list[tuple[_Episode, ChatRequest]]] = {}
        for episode, request in waiting:
            assert episode.waiting is not None
            groups.setdefault(episode.waiting.backend.key, []).append((episode, request))
        for key, group in groups.items():
            _send_batch(key, group, stats)
    stats.wall_seconds = time.perf_counter() - start
    return [finished[i] for i in range(len(jobs))], stats


def _send_batch(key: str, group: list[tuple[_Episode, ChatRequest]], stats: RunStats) -> None:
    """One ``generate`` call for every request of one back-end; replies go back to episodes."""
    agents: list[LLMAgent] = []
    for episode, _ in group:
        assert episode.waiting is not None
        agents.append(episode.waiting)
    began = time.perf_counter()
    completions = agents[0].backend.generate([request for _, request in group])
    if len(completions) != len(group):
        raise RuntimeError(
            f"back-end {key} returned {len(completions)} completions for {len(group)} requests"
        )
    usage = stats.per_backend.setdefault(key, BatchUsage())
    usage.batches += 1
    usage.requests += len(group)
    usage.largest_batch = max(usage.largest_batch, len(group))
    usage.mixed_batches += len({agent.spec for agent in agents}) > 1
    usage.seconds += time.perf_counter() - began
    for (episode, _), agent, completion in zip(group, agents, completions, strict=True):
        stats.per_agent.setdefault(agent.spec, AgentUsage()).add(completion)
        episode.deliver(completion)
