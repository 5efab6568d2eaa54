"""Run a tournament: every seller against every buyer entry on one scenario list, stored as it goes.

The parent process plans the work, hands out chunks of episodes and writes each finished chunk
to the store in one transaction; workers play chunks and encode their episodes into rows, so the
writer only runs SQL. Executors:

* ``workers=1``: everything in this process, no pool;
* ``local``: a ``concurrent.futures.ProcessPoolExecutor`` of ``workers`` processes;
* ``ray`` (``pip install 'bargain-arena[ray]'``): scripted chunks as Ray tasks, LLM chunks on
  model-holding actors, ``workers`` per model, each loading its model once
  (:mod:`tournaments.ray_pool`; a lost worker's chunk is played again elsewhere). Ray joins the
  cluster named by ``ray_address`` or the ``RAY_ADDRESS`` variable, else starts a local instance
  of ``workers`` CPUs. On a cluster whose nodes have the project installed::

      RAY_ADDRESS=ray://head:10001 arena tournament run league.toml --db runs/league.db \\
          --executor ray

An episode already in the store is skipped, so a killed run resumes where it stopped. Episodes
are identified by their :class:`arena.records.EpisodeKey` (players and scenario): when two
pairings give the same lineup on a scenario (a pool can draw the same specs as a fixed entry),
the episode is played once and counted for both. One run writes a database at a time: a second
run on the same file stops at once, naming the first (:mod:`tournaments.lock`); ``arena ratings``
and ``arena report`` read it meanwhile.

A chunk is played by the batched engine (:func:`agents.engine.play_matches`): scripted agents
answer at once, and the requests of LLM agents are batched per back-end across the chunk's
episodes (at most ``chunk_size`` episodes in flight), so a chunk of LLM episodes costs about as many
model calls as one episode has turns. The ``arena tournament run`` command calls
:func:`run_tournament`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.progress import Progress
from rich.table import Table
from rich.text import Text

from agents.driver import Match, buyer_lineup
from agents.engine import play_matches
from agents.lifetime import die_with_parent
from agents.specs import is_scripted
from arena.catalog import load_catalog, split_catalog
from arena.config import MarketConfig
from arena.records import EpisodeKey, EpisodeRecord
from arena.scenarios import Scenario, make_scenarios
from arena.settings import defaults
from tournaments.config import TournamentConfig, pool_label
from tournaments.lock import writer_lock
from tournaments.ray_actors import group_jobs, require_ray
from tournaments.ray_pool import ActorPool, PoolRun
from tournaments.rows import EncodedEpisode, encode_episode
from tournaments.schema import usage_rows
from tournaments.store import Store

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class Played:
    """What a worker sends back for one episode: the summary figures, and its rows to store
    (None when the run stores nothing)."""

    key: EpisodeKey
    seller_reward: float
    outcome: str
    encoded: EncodedEpisode | None


@dataclass(frozen=True)
class PairingSummary:
    seller: str
    buyers: str
    """The buyer entry's label: a spec, or a pool's specs joined with "|"."""
    episodes: int
    mean_seller_reward: float
    deal_rate: float


@dataclass(frozen=True)
class TournamentSummary:
    name: str
    db_path: str | None
    played: int
    """Episodes played by this run."""
    skipped: int
    """Episodes found in the store and not played again."""
    pairings: tuple[PairingSummary, ...]
    notes: tuple[str, ...] = ()
    """What the executor reports: actors per model, lost workers and the chunks played again."""
    model_loads: Mapping[str, int] = dataclasses.field(default_factory=dict)
    """Ray executor: models loaded per back-end key, summed over its actors."""

    def table(self) -> Table:
        """The per-pairing summary as a rich table; names are shown verbatim, never as markup."""
        table = Table(
            title=Text(f"{self.name}: {self.played} played, {self.skipped} already stored"),
            caption=Text("; ".join(self.notes)) if self.notes else None,
        )
        table.add_column("seller")
        table.add_column("buyers")
        table.add_column("episodes", justify="right")
        table.add_column("mean seller reward", justify="right")
        table.add_column("deal rate", justify="right")
        for p in self.pairings:
            table.add_row(
                Text(p.seller),
                Text(p.buyers),
                str(p.episodes),
                f"{p.mean_seller_reward:.4f}",
                f"{p.deal_rate:.1%}",
            )
        return table


def play_chunk(
    jobs: Sequence[Match], market: MarketConfig, keep_turns: bool, encode: bool
) -> list[Played]:
    """Play ``jobs`` (in a worker) with the batched engine, ``len(jobs)`` episodes in flight.
    Module-level so process pools and Ray can ship it. Turns are recorded in play whenever a
    model answers, so their tokens reach ``episode_usage``; ``keep_turns=False`` then only
    leaves the messages out of the store."""
    models = any(not (isinstance(p, str) and is_scripted(p)) for job in jobs for p in job.players)
    records, _ = play_matches(
        market, jobs, max_concurrent=len(jobs), keep_turns=keep_turns or models
    )
    return [
        Played(
            r.key,
            r.result.seller_reward,
            r.result.outcome,
            _encode(r, keep_turns) if encode else None,
        )
        for r in records
    ]


def _encode(record: EpisodeRecord, keep_turns: bool) -> EncodedEpisode:
    """The record's rows; without ``keep_turns``, its usage rows but no turn rows."""
    if keep_turns or not record.result.turns:
        return encode_episode(record)
    bare = dataclasses.replace(record, result=dataclasses.replace(record.result, turns=()))
    return encode_episode(bare)._replace(usage=usage_rows(record))


def plan(
    config: TournamentConfig, scenarios: Sequence[Scenario], done: set[EpisodeKey]
) -> tuple[list[Match], int]:
    """The episodes still to play, each key once, pairing by pairing; and how many are stored."""
    market = config.market_config()
    jobs: dict[EpisodeKey, Match] = {}
    skipped: set[EpisodeKey] = set()
    for seller in config.sellers:
        for pool in config.buyers:
            for scenario in scenarios:
                job = Match(scenario, seller, buyer_lineup(scenario, pool))
                key = job.key(market)
                if key in done:
                    skipped.add(key)
                else:
                    jobs.setdefault(key, job)
    return list(jobs.values()), len(skipped)


def even_chunks(jobs: Sequence[Match], most: int, workers: int = 1) -> list[list[Match]]:
    """``jobs`` in order, cut into chunks of at most ``most`` episodes (a chunk's round of
    model requests is one batch), as many chunks as a multiple of ``workers`` and sizes that
    differ by at most one, so every worker process gets the same share: fixed chunks would
    leave one worker playing a remainder, or a third chunk, while the other waits."""
    if not jobs:
        return []
    per_worker = math.ceil(len(jobs) / workers)
    count = min(len(jobs), workers * math.ceil(per_worker / most))
    size, larger = divmod(len(jobs), count)
    bounds = [i * size + min(i, larger) for i in range(count + 1)]
    return [list(jobs[a:b]) for a, b in itertools.pairwise(bounds)]


def run_tournament(
    config: TournamentConfig,
    db_path: str | Path | Store | None,
    workers: int = 1,
    executor: str = "local",
    progress: bool = True,
    chunk_size: int = 32,
    ray_address: str | None = None,
    actor_pool: ActorPool | None = None,
) -> TournamentSummary:
    """Play every seller against every buyer entry on ``config.episodes`` scenarios.

    Episodes go to the store at ``db_path`` (a path, or a :class:`Store` the caller keeps open) as
    chunks finish (``None``: play without storing, e.g. to time the store). Resumable: what is
    stored is skipped. ``chunk_size`` is the most episodes a task plays at once; the episodes still
    to play (for the ray executor, those of each model group) are cut into equal chunks, a multiple
    of ``workers`` (:func:`even_chunks`). Given a path, the run holds the database's writer lock
    (:mod:`tournaments.lock`): :class:`tournaments.lock.DatabaseInUse` at once when another run
    holds it. ``actor_pool``: the ray executor's actors, kept by the caller across runs (a league's
    rounds); without it the run opens its own pool (and Ray) and closes it.
    """
    if actor_pool is not None and executor != "ray":
        raise ValueError(f"an actor pool is the ray executor's, got executor {executor!r}")
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    if executor == "ray":
        require_ray()
    market = config.market_config()
    with contextlib.ExitStack() as stack:
        store = None if isinstance(db_path, str | Path) else db_path
        if isinstance(db_path, str | Path):
            # The lock first: a second run on the file stops before any work (tournaments.lock).
            stack.enter_context(writer_lock(db_path, f"tournament {config.name}"))
        catalog = split_catalog(load_catalog(config.catalog), config.split)
        scenarios = make_scenarios(market, catalog, config.seed, config.episodes)
        if isinstance(db_path, str | Path):
            store = stack.enter_context(Store.open(db_path))
        outcomes: dict[EpisodeKey, tuple[float, str]] = {}
        tournament_id = -1
        if store is not None:
            tournament_id = store.tournament_id(
                config.name, config.to_dict(), defaults(TournamentConfig)
            )
            for spec in config.sellers:
                store.register_agent(spec, "seller")
            for spec in sorted({s for pool in config.buyers for s in pool}):
                store.register_agent(spec, "buyer")
            outcomes = store.outcomes(tournament_id)
        jobs, skipped = plan(config, scenarios, set(outcomes))

        def write(results: list[Played]) -> None:
            for p in results:
                outcomes[p.key] = (p.seller_reward, p.outcome)
            if store is not None:
                store.add_episodes(tournament_id, [p.encoded for p in results])

        task = partial(
            play_chunk, market=market, keep_turns=config.keep_turns, encode=store is not None
        )
        bar = _progress_bar(progress, len(jobs) + skipped, skipped, config.name)
        notes: list[str] = []

        def note(text: str) -> None:
            notes.append(text)
            bar.note(text)

        pool = PoolRun()
        if executor == "ray":
            if actor_pool is None:  # this run's own actors (and Ray, when not running)
                actor_pool = stack.enter_context(ActorPool.open(ray_address, workers))
            # Scripted chunks as Ray tasks, LLM chunks on the actors holding their model: each
            # group in equal chunks, a multiple of its actors (workers per model).
            groups = {
                group: even_chunks(matches, chunk_size, workers)
                for group, matches in group_jobs(jobs).items()
            }
            finished = actor_pool.play(task, groups, note, pool)
        else:
            finished = _run_local(task, even_chunks(jobs, chunk_size, workers), workers)
        # Closed on the way out, so a failed run's pool is shut down before the lock is freed.
        stack.callback(finished.close)
        with bar as advance:
            for results in finished:
                write(results)
                advance(len(results))
    return TournamentSummary(
        name=config.name,
        db_path=None if store is None else str(store.path),
        played=len(jobs),
        skipped=skipped,
        pairings=_summaries(config, scenarios, outcomes),
        notes=(*pool.notes(), *notes),
        model_loads=pool.model_loads,
    )


ChunkTask = Callable[[Sequence[Match]], list[Played]]


def _run_local(task: ChunkTask, chunks: list[list[Match]], workers: int) -> Iterator[list[Played]]:
    """Chunk results as they complete: in this process (workers=1) or from a process pool."""
    if workers == 1 or len(chunks) <= 1:
        for chunk in chunks:
            yield task(chunk)
        return
    # Workers die with this process, even when it is SIGKILLed (no clean-up code runs then).
    pool = ProcessPoolExecutor(
        max_workers=min(workers, len(chunks)),
        initializer=die_with_parent,
        initargs=(os.getpid(),),
    )
    try:
        pending = {pool.submit(task, chunk) for chunk in chunks}
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                yield future.result()
    finally:
        # On an error or Ctrl-C, drop the queued chunks instead of playing them to the end.
        pool.shutdown(wait=True, cancel_futures=True)


class _NoProgress:
    def __enter__(self) -> Callable[[int], None]:
        return lambda n: None

    def __exit__(self, *exc: object) -> None:
        return None

    def note(self, text: str) -> None:
        return None


class _RichProgress:
    def __init__(self, total: int, done: int, name: str) -> None:
        # No auto-refresh thread: the process pool forks after the bar starts, and forking a
        # process that runs threads can deadlock the child. The bar refreshes per chunk.
        self.progress = Progress(auto_refresh=False)
        self.name = name
        self.task = self.progress.add_task(escape(name), total=total, completed=done)

    def __enter__(self) -> Callable[[int], None]:
        self.progress.start()
        return self.advance

    def advance(self, n: int) -> None:
        self.progress.advance(self.task, n)
        self.progress.refresh()

    def note(self, text: str) -> None:
        """What happened (a lost worker, a chunk played again): a line above the bar, and the
        bar's description."""
        self.progress.console.print(Text(f"{self.name}: {text}"))
        self.progress.update(self.task, description=escape(f"{self.name} ({text})"))
        self.progress.refresh()

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()


def _progress_bar(enabled: bool, total: int, done: int, name: str) -> Any:
    return _RichProgress(total, done, name) if enabled else _NoProgress()


def _summaries(
    config: TournamentConfig,
    scenarios: Sequence[Scenario],
    outcomes: dict[EpisodeKey, tuple[float, str]],
) -> tuple[PairingSummary, ...]:
    """Mean seller reward and deal rate of every pairing, over its scenarios."""
    rows = []
    market = config.market_config()
    for seller in config.sellers:
        for pool in config.buyers:
            results = [
                outcomes[EpisodeKey.of(market, seller, buyer_lineup(sc, pool), sc)]
                for sc in scenarios
            ]
            n = len(results)
            rows.append(
                PairingSummary(
                    seller=seller,
                    buyers=pool_label(pool),
                    episodes=n,
                    mean_seller_reward=math.fsum(r for r, _ in results) / n,
                    deal_rate=sum(outcome == "deal" for _, outcome in results) / n,
                )
            )
    return tuple(rows)
