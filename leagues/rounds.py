"""Playing a league's evaluation rounds: in the league's process, or beside its training.

A round is one evaluation tournament (:func:`leagues.plan.eval_tournament`). :func:`play_round`
plays it into a store and returns what the league logs about it.

``overlap_evaluation`` (:class:`leagues.config.LeagueConfig`): :class:`Beside` plays generation
``g``'s round in one background process while the league's process trains generation ``g + 1``.
Training is one process (``cpu_threads = 1`` on two cores holds one core), so a round played in
between left the other core idle for all of training; beside it, the round costs the wall only
where it outlasts the training. It is valid only where generation ``g + 1``'s training reads no
evaluation result (:func:`can_overlap`): the ``uniform`` meta-solver draws opponents from the
registered population alone, while PFSP, Nash and the other solvers read the payoff table and so
wait for the round. Nothing stored changes: an evaluation episode is seeded by its own key
wherever it is played, and the ratings of generation ``g`` are fitted on the rounds of
generations ``<= g`` only (:func:`leagues.state.league_records`), whenever they are computed.

The background process is spawned (not forked: the league's process runs torch, whose threads a
fork would copy half-way), dies with the league's process (:mod:`agents.lifetime`), opens its
own writer connection to the database (SQLite serialises its commits with the league's training
rows under the busy timeout) and plays rounds one after another, in the order submitted.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from agents.backends import close_backends, open_backends
from agents.lifetime import die_with_parent
from leagues.config import LeagueConfig
from tournaments.config import TournamentConfig
from tournaments.ray_pool import ActorPool
from tournaments.runner import run_tournament
from tournaments.store import Store

T = TypeVar("T")

EVAL_CHUNK = 64
"""Most evaluation episodes a task holds in flight (LLM requests batched across them), or
``eval_batch_size`` when larger; a task's episodes are committed together."""


def can_overlap(config: LeagueConfig, generation: int) -> bool:
    """Whether generation ``generation``'s round may play while the next generation trains:
    ``overlap_evaluation`` is on, a next generation exists, and its side's meta-solver reads no
    payoffs (``uniform``; self-play draws no opponents)."""
    if not config.overlap_evaluation or generation >= config.generations:
        return False
    side = config.learner.side_of(generation + 1)
    return side == "self-play" or config.learner.opponents_for(side) == "uniform"


def play_round(
    tournament: TournamentConfig,
    store: Store,
    config: LeagueConfig,
    labels: Mapping[str, str],
    workers: int,
    actor_pool: ActorPool | None = None,
) -> list[str]:
    """Play (or finish) an evaluation round into ``store`` on ``workers`` workers; the lines the
    league logs: the executor's notes, each back-end's model loads, the episodes played and the
    round's wall time (where a league's evaluation time goes, read from its log)."""
    started = time.perf_counter()
    for spec in tournament.sellers:
        store.register_agent(spec, "seller", labels.get(spec))
    for spec in sorted({s for pool in tournament.buyers for s in pool}):
        store.register_agent(spec, "buyer", labels.get(spec))
    try:
        # A task at most one back-end batch, so each round of a chunk is one generate call;
        # the runner shares the episodes equally between the workers.
        chunk = max(EVAL_CHUNK, config.learner.eval_batch_size)
        summary = run_tournament(
            tournament, store, workers=workers, progress=False, chunk_size=chunk,
            executor=config.executor, actor_pool=actor_pool,
        )  # fmt: skip
        lines = [f"{tournament.name}: {note}" for note in summary.notes]
        for backend in open_backends():
            # Checkpoints are adapters over the base model: one load serves all of them.
            adapters = len(getattr(backend, "adapters", ()))
            stats = backend.stats
            lines.append(
                f"{tournament.name}: {backend.key}: {stats.model_loads} model load(s), "
                f"{adapters} adapter(s), {stats.requests} requests"
            )
    finally:
        close_backends()
    lines.append(
        f"{tournament.name}: {summary.played} episodes played in"
        f" {time.perf_counter() - started:.0f} s ({summary.skipped} found already stored)"
    )
    return lines


class Beside:
    """One background process that plays rounds into the league's database, in order."""

    def __init__(self, config: LeagueConfig, db_path: Path) -> None:
        self.config = config
        self.db_path = db_path
        self.workers = max(1, config.workers - 1)  # the league's process trains on the rest
        self.pool = ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_start,
            initargs=(os.getpid(), config.cpu_threads),
        )
        self.submitted: list[Future[Any]] = []

    def submit(self, tournament: TournamentConfig, labels: Mapping[str, str]) -> Future[list[str]]:
        """Queue a round; its future gives :func:`play_round`'s lines (or raises its error)."""
        return self.call(
            _play_beside, tournament, str(self.db_path), self.config, dict(labels), self.workers
        )

    def call(self, fn: Callable[..., T], *args: object) -> Future[T]:
        """Queue ``fn(*args)`` in the background process, in order; :meth:`close` knows it."""
        future = self.pool.submit(fn, *args)
        self.submitted.append(future)
        return future

    def close(self) -> None:
        """Stop the process: at once while a call is still queued or in play (an error or
        Ctrl-C in the league's process), else let it exit by itself (a league that finished).
        What a round stored is kept; a resumed league plays the rest."""
        if all(future.done() for future in self.submitted):
            self.pool.shutdown(wait=True)
            return
        terminate = getattr(self.pool, "terminate_workers", None)  # Python >= 3.14
        if terminate is not None:
            terminate()
        else:  # before 3.14 the executor's processes are reachable only by its private field
            for process in list(getattr(self.pool, "_processes", {}).values()):
                process.terminate()
        self.pool.shutdown(wait=True, cancel_futures=True)


def _start(parent_pid: int, cpu_threads: int) -> None:
    """The background process's set-up: die with the league, torch's threads as configured."""
    die_with_parent(parent_pid)
    if cpu_threads:
        import torch

        torch.set_num_threads(cpu_threads)


def _play_beside(
    tournament: TournamentConfig,
    db_path: str,
    config: LeagueConfig,
    labels: dict[str, str],
    workers: int,
) -> list[str]:
    """:func:`play_round` in the background process, on its own connection."""
    with Store.open(db_path) as store:
        return play_round(tournament, store, config, labels, workers)
