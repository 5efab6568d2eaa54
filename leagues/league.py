"""The league loop: PSRO over populations of checkpoints (OpenSpiel's PSRO, in named steps).

``arena league run CONFIG.toml [--db FILE]`` calls :func:`run_league`. Generation 0 (setup)
registers the base model and plays a round-robin of every initial seller (and the base model,
when it will learn to sell) against every initial buyer (and the base model, when it will learn
to buy). Then each generation ``g = 1 .. generations`` runs the PSRO steps, each recorded as a
finished stage in ``league_generations`` (:mod:`leagues.state`) with the generation's typed plan
(:class:`leagues.plan.GenerationPlan`):

1. ``sampled`` (update the meta-strategy): the other side's population (initial specs and its
   checkpoints) and the mixture the league's meta-solver (``[league.learner] opponents``,
   :data:`leagues.sampling.META_SOLVERS`) makes of the stored payoff table
   (:mod:`leagues.metagame`).
2. ``trained`` (train a best response): GRPO for ``steps_per_generation`` steps from the parent
   adapter (the side's latest checkpoint; none for the first), each scenario of the generation's
   training slice against one opponent drawn from the mixture (:mod:`leagues.plan`), per-step
   metrics into ``training_steps`` (:mod:`leagues.trainer`).
3. ``registered``: the adapter registered in the store's ``agents`` table as
   ``hf:<base>?lora=<adapter>`` (``vllm:`` with ``use_vllm``) with its lineage: parent, side (the
   role), generation, step and the league's config hash. No merged copy is written: every
   checkpoint is served over the one base model (:func:`leagues.plan.model_spec`).
4. ``evaluated`` (grow the meta-game): a tournament of the checkpoint against every member of
   the other side on the held-out evaluation scenarios, through the tournament runner
   (:func:`tournaments.runner.run_tournament`); storing its episodes updates the payoff table.
5. ``rated``: Bradley-Terry ratings with bootstrap intervals over the league's episodes of
   generations ``<= g``, anchored on the first scripted agent of each side so curves across
   generations compare (:func:`tournaments.leaderboard.leaderboard`), stored per generation in
   ``league_ratings``.

With ``overlap_evaluation``, steps 4 and 5 of generation ``g`` run after step 3 of generation
``g + 1``: its rounds play in a background process while ``g + 1`` trains, wherever ``g + 1``'s
meta-solver reads no payoffs (:mod:`leagues.rounds`); the stored results are the same.

``side = "both"`` alternates: odd generations train the seller lineage against the buyer
population, even ones the buyer lineage against the seller population, each side continuing its
own adapter. A side with a ``learner.start`` checkpoint trains on that checkpoint's model from
its adapter, which is rated as the side's base. ``side = "self-play"``: one model in every
seat; its seller and buyer streams are trained together with a baseline per role (see
:mod:`leagues.rollout`), and each checkpoint is evaluated as a seller against the initial buyers
and as a buyer against the initial sellers.

Resumable: a killed run restarts at the first unfinished stage; training resumes from its last
trainer checkpoint, evaluation skips stored episodes, and nothing finished is redone. One run
writes a database at a time: a league or tournament run on a file in use stops at once
(:mod:`tournaments.lock`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from arena.seats import ROLES
from leagues.colocate import check_sampler_model
from leagues.config import LeagueConfig
from leagues.folders import claim_folder, league_folder
from leagues.learner_config import start_checkpoint
from leagues.metagame import opponent_mixture, other, population
from leagues.models import base_seed, prepare_base_model
from leagues.plan import (
    GenerationPlan,
    check_splits,
    eval_tournament,
    learner_name,
    model_spec,
    spare_scenarios,
    training_rows,
)
from leagues.remote import start_learner, stop_learner, train_remote
from leagues.report import write_league_report
from leagues.rollout import LEARNER
from leagues.rounds import Beside, can_overlap, play_round
from leagues.state import (
    STAGES,
    finish_stage,
    generation_state,
    generations,
    league_hash,
    league_leaderboard,
    league_records,
    record_step,
    register_league,
    store_ratings,
)
from leagues.summary import LeagueSummary, summarize
from leagues.trainer import TrainJob, check_reporters, resolve_device, train_learner
from tournaments.config import TournamentConfig
from tournaments.lock import writer_lock
from tournaments.ray_pool import ActorPool
from tournaments.store import Store

__all__ = ["LeagueConfig", "LeagueSummary", "run_league"]

Log = Callable[[str], None]


def _stderr(message: str) -> None:
    print(f"[league] {message}", file=sys.stderr, flush=True)


def training_seed(config: LeagueConfig, generation: int) -> int:
    """The seed of a generation's GRPO run (TRL's seed: LoRA init, and rollouts through
    :func:`leagues.trainer.step_seed`), from the league seed and the generation."""
    return int(np.random.SeedSequence([config.seed, generation]).generate_state(1)[0])


@dataclass
class LeagueRun:
    """One ``run_league`` call: the league's settings, store, files, and the PSRO steps."""

    config: LeagueConfig
    store: Store
    folder: Path
    base: Path
    log: Log
    labels: dict[str, str] = field(default_factory=dict)
    actor_pool: ActorPool | None = None
    """``executor = "ray"``: the actors every evaluation round plays on (models loaded once)."""
    learner: Any = None
    """``executor = "ray"``: the learner's own actor (:mod:`leagues.remote`), else None."""
    beside: Beside | None = None
    """``overlap_evaluation``: the process that plays rounds beside training, else None."""
    pending: list[tuple[int, GenerationPlan, list[Future[list[str]]]]] = field(default_factory=list)
    """Generations whose rounds the background process plays: (generation, plan, futures)."""

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def base_spec(self) -> str:
        """The base model's spec: as stored by generation 0 (a league stored by an earlier
        version keeps the spec it rated), else built from the config."""
        _, plan = generation_state(self.store, self.name, 0)
        return plan.base if plan is not None and plan.base else model_spec(self.config, self.base)

    def start(self, role: str) -> tuple[Path, Path | None]:
        """(model folder, adapter or None) the role's lineage starts from: the checkpoint
        ``learner.start`` names for it, else the base model with a fresh adapter."""
        spec = self.config.learner.start.get(role)
        if spec is None:
            return self.base, None
        model, adapter = start_checkpoint(spec, f"league.learner.start.{role}")
        # Absolute, as the league's own checkpoints are: the stored specs name one folder.
        return Path(model).resolve(), None if adapter is None else Path(adapter).resolve()

    def base_of(self, role: str) -> str:
        """The spec rated as the role's ``base``: its start checkpoint, else the base model."""
        if role in self.config.learner.start:
            return model_spec(self.config, *self.start(role))
        return self.base_spec

    def label_all(self) -> None:
        """Short names for logs and reports: the base model(s) and every checkpoint."""
        for role in ROLES:
            self.labels[self.base_of(role)] = "base"
        for _, _, plan in generations(self.store, self.name):
            for spec in plan.checkpoint.values():
                self.labels[spec] = plan.label

    def setup(self) -> None:
        """Generation 0: register the base model, play the initial round-robin, rate."""
        stage, _ = generation_state(self.store, self.name, 0)
        if stage == "rated":
            return
        config = self.config
        roles = config.learner.roles
        for role in roles:
            model, adapter = self.start(role)
            lineage = {"config_hash": league_hash(self.store, self.name),
                       "path": str(adapter or model)}  # fmt: skip
            self.store.register_agent(self.base_of(role), role, "base", generation=0, step=0,
                                      **lineage)  # fmt: skip
        sellers = list(config.sellers) + ([self.base_of("seller")] if "seller" in roles else [])
        buyers = [(b,) for b in config.buyers]
        buyers += [(self.base_of("buyer"),)] if "buyer" in roles else []
        plan = GenerationPlan(label="base", side=config.learner.side, base=self.base_spec)
        if stage == "evaluated":
            self.finish(0, plan)
            return
        self.log("generation 0: initial round-robin")
        self.evaluate(0, plan, [eval_tournament(config, f"{self.name}/gen-000", sellers, buyers)])

    def generation(self, g: int) -> None:
        """Run (or finish) the PSRO steps of generation ``g``, each stage once; its evaluation
        may be left to play beside the next generation's training (:meth:`evaluate`)."""
        side = self.config.learner.side_of(g)
        stage, plan = generation_state(self.store, self.name, g)
        done = -1 if stage is None else STAGES.index(stage)
        steps: tuple[Callable[[int, GenerationPlan], GenerationPlan], ...] = (
            self.update_meta_strategy,
            self.train,
            self.register,
        )
        plan = plan or GenerationPlan(label=f"gen-{g}-{side}", side=side)
        for k, (name, step) in enumerate(zip(STAGES, steps, strict=False)):
            if k > done:
                plan = step(g, plan)
                finish_stage(self.store, self.name, g, name, plan)
        if done < STAGES.index("evaluated"):
            self.evaluate(g, plan, self.rounds(g, plan))
        elif done < STAGES.index("rated"):
            self.finish(g, plan)

    def update_meta_strategy(self, g: int, plan: GenerationPlan) -> GenerationPlan:
        """The parent checkpoint, and the opponent mixture of the meta-solver."""
        parent, adapter, parent_label = self.parent(g, plan.side)
        plan = dataclasses.replace(
            plan, parent=parent, parent_label=parent_label, parent_adapter=adapter
        )
        if plan.side == "self-play":
            return plan
        members, weights = opponent_mixture(self.store, self.config, plan.side, parent)
        shown = ", ".join(
            f"{self.labels.get(m.spec, m.spec)}={w:.2f}"
            for m, w in zip(members, weights, strict=True)
        )
        rule = self.config.learner.opponent_rule(plan.side)
        self.log(f"generation {g} ({plan.side}): {rule} mixture {shown}")
        opponents = tuple(m.spec for m in members)
        return dataclasses.replace(plan, opponents=opponents, weights=tuple(weights))

    def parent(self, g: int, side: str) -> tuple[str, str | None, str]:
        """(spec, adapter or None, label) of the side's latest checkpoint, else its start."""
        adapter = self.start(side)[1]
        parent = (self.base_of(side), None if adapter is None else str(adapter), "base")
        for k, _, plan in generations(self.store, self.name):
            if 0 < k < g and plan.side == side and plan.adapter:
                parent = (next(iter(plan.checkpoint.values())), plan.adapter, plan.label)
        return parent

    def train(self, g: int, plan: GenerationPlan) -> GenerationPlan:
        """GRPO on the generation's training rows (a best response to the mixture)."""
        config, learner = self.config, self.config.learner
        rows = training_rows(config, g, plan.side, plan.opponents, plan.weights)
        steps = learner.steps_for(plan.side)  # the side's own steps (side_train), else the league's
        train = learner.train_for(plan.side)  # the side's own settings (side_train)
        folder = self.folder / f"gen-{g:03d}-{plan.side}"
        job = TrainJob(
            base_model=self.start(plan.side)[0],
            parent_adapter=Path(plan.parent_adapter) if plan.parent_adapter else None,
            rows=tuple(rows),
            market=config.train_market_config(),
            train=dataclasses.replace(
                train, grpo={**train.grpo, "learning_rate": config.learning_rate(g)}
            ),
            steps=steps,
            output_dir=folder / "trainer",
            adapter_dir=folder / "adapter",
            seed=training_seed(config, g),
            learner_name=learner_name(plan.label, config.learner),
            log_dir=self.folder / "logs" / folder.name,
            run_name=f"{self.name}/{folder.name}",
            spares=tuple(spare_scenarios(config, g)),
        )
        claim_folder(folder, self.name, league_hash(self.store, self.name))
        started = time.perf_counter()

        before = learner.steps_through(g - 1)  # the league's steps before this generation

        def on_step(step: int, logs: dict[str, float]) -> None:
            record_step(self.store, self.name, g, plan.side, step, before + step, logs)
            self.log(
                f"generation {g} step {step}/{steps}: reward {logs.get('reward', math.nan):+.3f}"
                f", loss {logs.get('loss', math.nan):.4f}"
            )

        self.log(f"generation {g}: training the {plan.side} for {steps} steps ({len(rows)} groups, "
                 f"learning rate {config.learning_rate(g):.3g})")  # fmt: skip
        if self.learner is not None:  # its LLM opponents play on the pool's actors
            opponents = [s for row in rows for s in row.players if s != LEARNER]
            served = self.actor_pool.serving(opponents) if self.actor_pool else {}
            train_remote(self.learner, job, on_step, self.log, served)
        else:
            train_learner(job, on_step)
        self.log(f"generation {g}: trained in {time.perf_counter() - started:.0f} s")
        return plan

    def register(self, g: int, plan: GenerationPlan) -> GenerationPlan:
        """The trained checkpoint joins the population(s), with its lineage."""
        config = self.config
        folder = self.folder / f"gen-{g:03d}-{plan.side}"
        adapter = folder / "adapter"
        model = self.start(plan.side)[0]
        spec = model_spec(config, model, adapter)
        roles = ROLES if plan.side == "self-play" else (plan.side,)
        step = config.learner.steps_through(g)
        lineage = {"generation": g, "step": step, "config_hash": league_hash(self.store, self.name)}
        for role in roles:
            parent = self.store.register_agent(plan.parent, role)
            self.store.register_agent(
                spec, role, plan.label, parent=parent, path=str(adapter), **lineage
            )
        checkpoint = dict.fromkeys(roles, spec)
        # The seeds a checkpoint came from travel with its files (reproduce or audit it).
        (folder / "league.json").write_text(json.dumps({
            "league": self.name, "label": plan.label, "generation": g, "league_seed": config.seed,
            "base_seed": base_seed(config), "training_seed": training_seed(config, g),
            "learning_rate": config.learning_rate(g),
            "config_hash": lineage["config_hash"], "base": str(model), "parent": plan.parent,
        }, indent=2))  # fmt: skip
        return dataclasses.replace(plan, adapter=str(adapter), checkpoint=checkpoint)

    def rounds(self, g: int, plan: GenerationPlan) -> list[TournamentConfig]:
        """The checkpoint against every member of the other side, on the evaluation split."""
        rounds = []
        for role, spec in plan.checkpoint.items():
            opponents = [m.spec for m in population(self.store, self.config, other(role))]
            name = f"{self.name}/gen-{g:03d}-{role}"
            if role == "seller":
                rounds.append(eval_tournament(self.config, name, [spec], [(o,) for o in opponents]))
            else:
                rounds.append(eval_tournament(self.config, name, opponents, [(spec,)]))
            self.log(f"generation {g}: evaluating {plan.label} as {role}")
        return rounds

    def evaluate(self, g: int, plan: GenerationPlan, rounds: list[TournamentConfig]) -> None:
        """Play generation ``g``'s rounds, then rate (:meth:`finish`); or, where the next
        generation's training reads no evaluation (:func:`leagues.rounds.can_overlap`), queue
        them in the background process and finish the generation once they are played."""
        self.label_all()
        if self.beside is not None and can_overlap(self.config, g):
            self.log(f"generation {g}: its evaluation plays beside generation {g + 1}'s training")
            self.pending.append((g, plan, [self.beside.submit(t, self.labels) for t in rounds]))
            return
        self.settle(wait=True)  # what the background still plays first: every worker for this
        workers = self.config.workers
        for tournament in rounds:
            for line in play_round(
                tournament, self.store, self.config, self.labels, workers, self.actor_pool
            ):
                self.log(line)
        self.finish(g, plan)

    def settle(self, wait: bool) -> None:
        """Finish, in order, the generations whose rounds the background process has played
        (with ``wait``: all of them, waiting for it); its errors are raised here."""
        while self.pending and (wait or all(f.done() for f in self.pending[0][2])):
            g, plan, futures = self.pending.pop(0)
            for future in futures:
                for line in future.result():
                    self.log(line)
            self.finish(g, plan)

    def finish(self, g: int, plan: GenerationPlan) -> None:
        """Record generation ``g`` evaluated, rate, record it rated."""
        finish_stage(self.store, self.name, g, "evaluated", plan)
        plan = self.rate(g, plan)
        finish_stage(self.store, self.name, g, "rated", plan)

    def rate(self, g: int, plan: GenerationPlan) -> GenerationPlan:
        """Anchored ratings of every league agent from the episodes of generations ``<= g``."""
        self.label_all()
        config = self.config
        records, entries = league_records(self.store, self.name, through=g)
        rows = [
            {
                "role": role,
                "agent": row["agent"],
                "label": self.labels.get(row["agent"], row["agent"]),
                **{key: row[key] for key in ("rating", "ci_low", "ci_high", "games", "episodes")},
                "reward": row["reward"],
            }
            for role in ("seller", "buyer")
            for row in league_leaderboard(
                records, entries, role, config.sellers, config.bootstrap_rounds, config.seed
            )
        ]
        store_ratings(self.store, self.name, g, rows)
        return plan


def run_league(
    config: LeagueConfig, db_path: str | Path, log: Log = _stderr, report: bool = True
) -> LeagueSummary:
    """Run (or resume) the league into the database at ``db_path``; see the module docstring.

    The run holds the database's writer lock (:mod:`tournaments.lock`), so a second league or
    tournament run on the same file stops at once. With ``report``, an HTML report (tournament
    leaderboards, training curves, ratings per generation) is written to
    ``<folder>/report/index.html`` at the end.
    """
    if config.seeds:
        raise ValueError(
            f"league {config.name!r} lists seeds {list(config.seeds)}: run it with "
            "leagues.seeds.run_seeds (arena league run does), one league per seed"
        )
    check_splits(config)
    check_reporters(config.learner.train.report_to)
    db = Path(db_path)
    folder = league_folder(config, db)
    # The database's writer lock first: a second run on the file stops before any work.
    with contextlib.ExitStack() as stack:
        stack.enter_context(writer_lock(db, f"league {config.name}"))
        store = stack.enter_context(Store.open(db))
        folder.mkdir(parents=True, exist_ok=True)
        if config.cpu_threads:
            import torch

            torch.set_num_threads(config.cpu_threads)
        register_league(store, config)
        base = prepare_base_model(config, folder, log)  # or the start's, when every side has one
        if config.learner.train.use_vllm:
            check_sampler_model(base, resolve_device(config.learner.train)[0] == "cpu")
        run = LeagueRun(config, store, folder, base, log)
        if config.executor == "ray":  # one pool for every round: its actors stay loaded
            run.actor_pool = stack.enter_context(
                ActorPool.open(config.ray_address or None, config.workers)
            )
            # The learner's actor before any round: it holds its share, the pool the rest.
            run.learner = start_learner(config.learner.train, config.cpu_threads)
            stack.callback(stop_learner, run.learner)
        if config.overlap_evaluation:
            run.beside = Beside(config, db)
            stack.callback(run.beside.close)  # on an error: stop it before the lock is freed
        run.label_all()
        run.setup()
        for g in range(1, config.generations + 1):
            run.settle(wait=False)
            run.generation(g)
        run.settle(wait=True)
        page = None
        if report:
            page = write_league_report(db, folder / "report", config.name)
            log(f"report: {page}")
        return summarize(store, config, folder, page, run.labels)
