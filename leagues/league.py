"""The league manager: generations of sample-opponents, train, save, register, evaluate, rate.

``arena league run CONFIG.toml [--db FILE]`` calls :func:`run_league`. The loop follows
OpenSpiel's PSRO: a meta-strategy over the opponent population picks who the learner trains
against, the learner trains, and its checkpoint joins the population.

Generation 0 (setup): the base model is registered, and a round-robin tournament plays every
initial seller (and the base model, when it will learn to sell) against every initial buyer entry
(and the base model, when it will learn to buy). Then each generation ``g = 1 .. generations``
runs these named stages, each recorded in ``league_generations`` once finished:

1. ``sampled``: the opponent mixture over the other side's population (initial specs and the
   other side's checkpoints) by ``[league.learner] opponents``, and the training rows: each
   scenario of the generation's slice of the training split gets one opponent drawn from the
   mixture, who fills every opponent seat (:mod:`leagues.sampling`).
2. ``trained``: GRPO for ``steps_per_generation`` steps from the parent adapter (the side's latest
   checkpoint; none for the first), per-step metrics into ``training_steps``
   (:mod:`leagues.trainer`).
3. ``registered``: the adapter (and, for the hf back-end, which loads no LoRA, a merged copy)
   registered in the store's ``agents`` table with its lineage: parent, side (the role), generation,
   step and the league's config hash.
4. ``evaluated``: a tournament of the checkpoint against every member of the other side, on the
   held-out evaluation scenarios, through the batched engine (:mod:`agents.engine`).
5. ``rated``: Bradley-Terry ratings with bootstrap intervals over every league episode
   (:func:`tournaments.leaderboard.leaderboard`), stored per generation in ``league_ratings``.

``side = "both"`` alternates: odd generations train the seller lineage against the buyer
population, even ones the buyer lineage against the seller population, each side continuing its
own adapter. ``side = "self-play"``: one model in every seat; its seller and buyer streams are
trained together with a baseline per role (see :mod:`leagues.rollout`), and each checkpoint is
evaluated as a seller against the initial buyers and as a buyer against the initial sellers.

Resumable: a killed run restarts at the first unfinished stage; training resumes from its last
trainer checkpoint, evaluation skips stored episodes, and nothing finished is redone.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from arena.catalog import load_catalog, split_catalog
from arena.records import ENV_VERSION, EpisodeRecord
from arena.scenarios import Scenario, make_scenarios
from leagues.config import LeagueConfig
from leagues.rollout import LEARNER, GroupRow
from leagues.sampling import opponent_weights, sample_indices
from tournaments.config import TournamentConfig
from tournaments.match import buyer_lineup
from tournaments.store import Store

__all__ = ["LeagueConfig", "LeagueSummary", "run_league"]

STAGES = ("sampled", "trained", "registered", "evaluated", "rated")
"""Stages of a generation, in order (generation 0, the setup, only records ``rated``)."""

STEP_METRICS: tuple[tuple[str, str], ...] = (
    ("reward", "reward"),
    ("deal_rate", "deal_rate"),
    ("surplus_extraction_ratio", "surplus_extraction_ratio"),
    ("distinct_buyers_engaged", "distinct_buyers_engaged"),
    ("deal_on_top_buyer_rate", "deal_on_top_buyer_rate"),
    ("sell_below_cost_error_rate", "sell_below_cost_error_rate"),
    ("loss", "loss"),
    ("entropy", "entropy"),
    ("step_time", "seconds"),
)
"""(TRL log key, training_steps column) stored for every optimizer step."""

CLIP_KEYS = ("cispo_clip_ratio", "clip_ratio/region_mean")
"""TRL's clip-ratio log key: CISPO's, or the PPO-style losses'."""

TABLES = (
    """CREATE TABLE IF NOT EXISTS league_runs (
        name TEXT PRIMARY KEY,
        config TEXT NOT NULL,          -- JSON, without `generations` (a league may be extended)
        created TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS league_generations (
        league TEXT NOT NULL,
        generation INTEGER NOT NULL,   -- 0: setup; 1..: trained generations
        side TEXT NOT NULL,            -- seller, buyer, self-play (setup: the learner's side)
        stage TEXT NOT NULL,           -- last finished stage (STAGES)
        plan TEXT NOT NULL,            -- JSON: opponents, weights, parent, checkpoint specs
        updated TEXT NOT NULL,
        PRIMARY KEY (league, generation)
    )""",
    """CREATE TABLE IF NOT EXISTS training_steps (
        league TEXT NOT NULL,
        generation INTEGER NOT NULL,
        step INTEGER NOT NULL,         -- optimizer step within the generation, from 1
        league_step INTEGER NOT NULL,  -- optimizer step across the league, from 1
        side TEXT NOT NULL,
        reward REAL, deal_rate REAL, surplus_extraction_ratio REAL,
        distinct_buyers_engaged REAL, deal_on_top_buyer_rate REAL,
        sell_below_cost_error_rate REAL, loss REAL, clip_ratio REAL, entropy REAL,
        seconds REAL,
        logs TEXT NOT NULL,            -- every TRL log value of the step, JSON
        logged TEXT NOT NULL,
        PRIMARY KEY (league, generation, step)
    )""",
    """CREATE TABLE IF NOT EXISTS league_ratings (
        league TEXT NOT NULL,
        generation INTEGER NOT NULL,   -- ratings after this generation (0: setup)
        role TEXT NOT NULL,
        agent TEXT NOT NULL,
        label TEXT NOT NULL,
        rating REAL, ci_low REAL, ci_high REAL,
        games INTEGER NOT NULL, episodes INTEGER NOT NULL, reward REAL,
        PRIMARY KEY (league, generation, role, agent)
    )""",
)


Log = Callable[[str], None]


def _stderr(message: str) -> None:
    print(f"[league] {message}", file=sys.stderr, flush=True)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# Database --------------------------------------------------------------------------------------


def ensure_tables(store: Store) -> None:
    """Create the league tables in the store's database (a no-op when they exist)."""
    for ddl in TABLES:
        store.db.execute(ddl)
    store.db.conn.commit()


def register_league(store: Store, config: LeagueConfig) -> None:
    """Record the league; a stored league of the same name with other settings is refused."""
    wanted = {k: v for k, v in config.to_dict().items() if k != "generations"}
    wanted = json.loads(json.dumps(wanted, sort_keys=True))
    row = store.db.execute(
        "SELECT config FROM league_runs WHERE name = ?", [config.name]
    ).fetchone()
    if row is None:
        store.db.execute(
            "INSERT INTO league_runs (name, config, created) VALUES (?, ?, ?)",
            [config.name, json.dumps(wanted, sort_keys=True), _now()],
        )
        store.db.conn.commit()
        return
    changed = config_changes(json.loads(row[0]), wanted, default_settings())
    if changed:
        raise ValueError(
            f"league {config.name!r} is already stored in {store.path} with other settings "
            f"(differs in: {', '.join(changed)}); rename the league or use another database "
            "(only `generations` may change, to extend a league)"
        )


def default_settings() -> dict[str, Any]:
    """The default of every league setting that has one, nested like ``LeagueConfig.to_dict``."""
    from leagues.config import LearnerConfig, TrainConfig

    def defaults(cls: type) -> dict[str, Any]:
        return {
            f.name: f.default
            for f in dataclasses.fields(cls)
            if f.default is not dataclasses.MISSING
        }

    return {
        **defaults(LeagueConfig),
        "market": {},
        "learner": {**defaults(LearnerConfig), "train": defaults(TrainConfig)},
    }


def config_changes(stored: dict, wanted: dict, defaults: dict, prefix: str = "") -> list[str]:
    """Settings that differ between a stored league and the one asked for, as dotted names.

    A setting missing from the stored config was added to the code since; it counts as unchanged
    while it keeps its default, so upgrading the package does not orphan a league.
    """
    changed = []
    for key in sorted(set(stored) | set(wanted)):
        name = f"{prefix}{key}"
        old, new = stored.get(key), wanted.get(key)
        if isinstance(old, dict) and isinstance(new, dict) and isinstance(defaults.get(key), dict):
            changed += config_changes(old, new, defaults[key], f"{name}.")
        elif key not in stored:
            if key not in defaults or new != defaults[key]:
                changed.append(name)
        elif old != new:
            changed.append(name)
    return changed


def generation_state(store: Store, league: str, generation: int) -> tuple[str | None, dict]:
    """(last finished stage or None, plan) of a generation."""
    row = store.db.execute(
        "SELECT stage, plan FROM league_generations WHERE league = ? AND generation = ?",
        [league, generation],
    ).fetchone()
    return (None, {}) if row is None else (row[0], json.loads(row[1]))


def finish_stage(
    store: Store, league: str, generation: int, side: str, stage: str, plan: dict
) -> None:
    """Record that ``stage`` of ``generation`` finished, with the generation's plan so far."""
    store.db.execute(
        "INSERT OR REPLACE INTO league_generations "
        "(league, generation, side, stage, plan, updated) VALUES (?, ?, ?, ?, ?, ?)",
        [league, generation, side, stage, json.dumps(plan, sort_keys=True), _now()],
    )
    store.db.conn.commit()


def record_step(
    store: Store,
    league: str,
    generation: int,
    side: str,
    step: int,
    league_step: int,
    logs: dict[str, Any],
) -> None:
    """Store one optimizer step's metrics (a replayed step replaces its row)."""
    row: dict[str, Any] = {
        "league": league,
        "generation": generation,
        "step": step,
        "league_step": league_step,
        "side": side,
    }
    row.update({column: _number(logs.get(key)) for key, column in STEP_METRICS})
    row["clip_ratio"] = next((_number(logs[k]) for k in CLIP_KEYS if k in logs), None)
    row["logs"] = json.dumps(logs, sort_keys=True, default=str)
    row["logged"] = _now()
    store.db["training_steps"].insert(row, replace=True)


def _number(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return None if math.isnan(number) else number


def training_steps(store: Store, league: str) -> list[dict[str, Any]]:
    """Every stored training step of the league, in league order."""
    return list(
        store.db.query(
            "SELECT * FROM training_steps WHERE league = ? ORDER BY league_step", [league]
        )
    )


def league_tournaments(store: Store, league: str) -> list[tuple[str, dict]]:
    """(name, config) of the league's tournaments, in creation order."""
    rows = store.db.execute(
        "SELECT name, config FROM tournaments WHERE name LIKE ? ORDER BY id", [f"{league}/%"]
    ).fetchall()
    return [(name, json.loads(config)) for name, config in rows]


def league_records(store: Store, league: str) -> tuple[list[EpisodeRecord], list[tuple[str, ...]]]:
    """Every evaluation episode of the league, and the buyer entries of its tournaments."""
    records: list[EpisodeRecord] = []
    entries: dict[tuple[str, ...], None] = {}
    for name, config in league_tournaments(store, league):
        records += store.load_records(tournament=name)
        for entry in config["buyers"]:
            entries.setdefault(tuple(entry), None)
    return records, list(entries)


# Members and specs -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Member:
    """A league agent: a spec in a role, and where it came from."""

    spec: str
    role: str
    label: str
    generation: int
    """0 for the initial population and the base model."""


def model_spec(config: LeagueConfig, model: Path, adapter: Path | None = None) -> str:
    """The agent spec that evaluates a model folder (or base + LoRA adapter on vLLM)."""
    learner = config.learner
    tokens = learner.train.max_new_tokens
    if learner.train.use_vllm:
        lora = "" if adapter is None else f"lora={adapter}&"
        return f"vllm:{model}?{lora}max_tokens={tokens}"
    # seed=none lets the hf back-end batch sampled requests (seeded ones run one at a time).
    return f"hf:{model}?batch_size={learner.eval_batch_size}&seed=none&max_tokens={tokens}"


def checkpoints(store: Store, league: str, role: str) -> list[Member]:
    """The league's trained checkpoints playing ``role``, oldest first."""
    members = []
    for generation in range(1, 1_000_000):
        stage, plan = generation_state(store, league, generation)
        if stage is None:
            break
        for spec_role, spec in plan.get("checkpoint", {}).items():
            if spec_role == role and STAGES.index(stage) >= STAGES.index("registered"):
                members.append(Member(spec, role, plan["label"], generation))
    return members


def population(store: Store, config: LeagueConfig, role: str) -> list[Member]:
    """The ``role`` side's population: its initial specs, then the league's checkpoints."""
    initial = config.sellers if role == "seller" else config.buyers
    members = [Member(spec, role, spec, 0) for spec in initial]
    if config.learner.side != "self-play":
        members += checkpoints(store, config.name, role)
    return members


def other(role: str) -> str:
    return "buyer" if role == "seller" else "seller"


# Statistics for opponent sampling --------------------------------------------------------------


def _meets(record: EpisodeRecord, role: str, agent: str, opponent: str) -> bool:
    """``record`` has ``agent`` in ``role`` against ``opponent`` in every opposing seat."""
    if role == "seller":
        return record.seller == agent and all(b == opponent for b in record.buyers)
    return record.seller == opponent and all(b == agent for b in record.buyers)


def win_rate(records: Sequence[EpisodeRecord], role: str, agent: str, opponent: str) -> float:
    """The share of the gains from trade ``agent`` took against ``opponent`` (the leaderboard's
    cross score, from ``agent``'s side); NaN when they never met."""
    from tournaments.leaderboard import cross_score

    scores = [
        cross_score(r)
        for r in records
        if r.result.outcome != "error" and _meets(r, role, agent, opponent)
    ]
    values = [s if role == "seller" else 1.0 - s for s in scores if s is not None]
    return math.fsum(values) / len(values) if values else math.nan


def mean_reward(records: Sequence[EpisodeRecord], role: str, agent: str, opponent: str) -> float:
    """``agent``'s mean reward against ``opponent`` (buyer side: the mean over its slots)."""
    from tournaments.leaderboard import side_buyer_reward

    values = [
        r.result.seller_reward if role == "seller" else side_buyer_reward(r)
        for r in records
        if r.result.outcome != "error" and _meets(r, role, agent, opponent)
    ]
    return math.fsum(values) / len(values) if values else math.nan


def learner_payoffs(
    records: Sequence[EpisodeRecord], role: str, agents: Sequence[str], opponents: Sequence[str]
) -> np.ndarray:
    """Mean rewards of the learner side's agents (rows) against the opponents (columns); rows
    of agents that have not met every opponent are left out (the Nash solver needs every cell)."""
    rows = [[mean_reward(records, role, a, o) for o in opponents] for a in agents]
    complete = [row for row in rows if not any(math.isnan(x) for x in row)]
    return np.array(complete).reshape(len(complete), len(opponents))


def opponent_mixture(
    store: Store, config: LeagueConfig, side: str, learner_spec: str
) -> tuple[list[Member], list[float]]:
    """The other side's population and the mixture to draw training opponents from."""
    opponents = population(store, config, other(side))
    specs = [m.spec for m in opponents]
    strategy = config.learner.opponents
    records = league_records(store, config.name)[0] if strategy in ("pfsp", "nash") else []
    if strategy == "pfsp":
        rates = [win_rate(records, side, learner_spec, s) for s in specs]
        return opponents, opponent_weights("pfsp", len(specs), win_rates=rates).tolist()
    if strategy == "nash":
        own = [m.spec for m in population(store, config, side)] + [learner_spec]
        payoffs = learner_payoffs(records, side, list(dict.fromkeys(own)), specs)
        if payoffs.shape[0] == 0:
            return opponents, opponent_weights("uniform", len(specs)).tolist()
        return opponents, opponent_weights("nash", len(specs), learner_payoffs=payoffs).tolist()
    return opponents, opponent_weights(strategy, len(specs)).tolist()


# Training rows ---------------------------------------------------------------------------------


def training_scenarios(config: LeagueConfig, generation: int) -> list[Scenario]:
    """The generation's own slice of the training scenario list (no scenario is reused)."""
    per_generation = config.learner.steps_per_generation * config.learner.train.scenarios_per_step
    market = config.market_config()
    catalog = split_catalog(load_catalog(config.catalog), config.train_split)
    count = per_generation // 2 if config.learner.side == "self-play" else per_generation
    start = (generation - 1) * count
    return make_scenarios(market, catalog, config.seed, count, start=start)


def training_rows(
    config: LeagueConfig,
    generation: int,
    side: str,
    opponents: Sequence[str],
    weights: Sequence[float],
) -> list[GroupRow]:
    """One dataset row per GRPO group, in step order (see the module docstring)."""
    scenarios = training_scenarios(config, generation)
    n = config.market_config().num_buyers
    rows = []
    if side == "self-play":
        for sc in scenarios:
            seats = (LEARNER,) * n
            for trained in ("seller", "buyer_1"):
                key = f"g{generation}/s{sc.index}/{trained}"
                rows.append(GroupRow(key, sc, LEARNER, seats, trained))
        return rows
    rng = np.random.default_rng(np.random.SeedSequence([config.seed, generation, 17]))
    draws = sample_indices(rng, np.asarray(weights), len(scenarios))
    for sc, k in zip(scenarios, draws.tolist(), strict=True):
        opponent = opponents[k]
        if side == "seller":
            rows.append(
                GroupRow(f"g{generation}/s{sc.index}", sc, LEARNER, (opponent,) * n, "seller")
            )
        else:
            # The learner takes slot 1; other buyer slots (N > 1) draw from the initial buyers.
            others = [config.buyers[sc.pool_index(i, len(config.buyers))] for i in range(1, n)]
            buyers = (LEARNER, *others)
            rows.append(GroupRow(f"g{generation}/s{sc.index}", sc, opponent, buyers, "buyer_1"))
    return rows


# Evaluation ------------------------------------------------------------------------------------


def eval_tournament(
    config: LeagueConfig, name: str, sellers: Sequence[str], buyers: Sequence[Sequence[str]]
) -> TournamentConfig:
    """A tournament on the league's held-out evaluation scenarios."""
    return TournamentConfig(
        name=name,
        sellers=tuple(sellers),
        buyers=tuple(tuple(b) for b in buyers),
        preset=config.preset,
        market=dict(config.market),
        episodes=config.learner.eval_episodes,
        seed=config.evaluation_seed,
        catalog=config.catalog,
        split=config.eval_split,
    )


def play_tournament(
    store: Store, tournament: TournamentConfig, labels: dict[str, str], log: Log
) -> int:
    """Play (or finish) a tournament through the batched engine, storing episodes as they
    finish; returns how many were played now. LLM agents are batched per back-end."""
    from agents.backends import close_backends
    from agents.engine import run_episodes

    market = tournament.market_config()
    catalog = split_catalog(load_catalog(tournament.catalog), tournament.split)
    scenarios = make_scenarios(market, catalog, tournament.seed, tournament.episodes)
    tid = store.tournament_id(tournament.name, tournament.to_dict())
    for spec in tournament.sellers:
        store.register_agent(spec, "seller", labels.get(spec))
    for spec in sorted({s for pool in tournament.buyers for s in pool}):
        store.register_agent(spec, "buyer", labels.get(spec))
    played = 0
    try:
        for seller in tournament.sellers:
            for pool in tournament.buyers:
                done = store.done_keys(tid)
                todo = [
                    sc
                    for sc in scenarios
                    if (ENV_VERSION, seller, buyer_lineup(sc, pool), sc.seed, sc.index) not in done
                ]
                if not todo:
                    continue
                # Each episode is stored as it finishes: a kill loses none that finished.
                run_episodes(
                    market,
                    todo,
                    seller,
                    list(pool),
                    max_concurrent=64,
                    on_episode=lambda record: store.add_episodes(tid, [record]),
                )
                played += len(todo)
                log(
                    f"{tournament.name}: {labels.get(seller, seller)} vs "
                    f"{'|'.join(labels.get(b, b) for b in pool)}: {len(todo)} episodes"
                )
    finally:
        close_backends()
    return played


def rate(store: Store, config: LeagueConfig, generation: int, labels: dict[str, str]) -> None:
    """Ratings of every league agent after ``generation``, from every league episode."""
    from tournaments.leaderboard import leaderboard
    from tournaments.ratings import RatingConfig

    records, entries = league_records(store, config.name)
    rating_config = RatingConfig(bootstrap_rounds=config.bootstrap_rounds, seed=config.seed)
    store.db.execute(
        "DELETE FROM league_ratings WHERE league = ? AND generation = ?", [config.name, generation]
    )
    rows = [
        {
            "league": config.name,
            "generation": generation,
            "role": role,
            "agent": row["agent"],
            "label": labels.get(row["agent"], row["agent"]),
            **{key: row[key] for key in ("rating", "ci_low", "ci_high", "games", "episodes")},
            "reward": row["reward"],
        }
        for role in ("seller", "buyer")
        for row in leaderboard(records, role, rating_config, entries or None)
    ]
    store.db["league_ratings"].insert_all(rows)


def league_ratings(store: Store, league: str) -> list[dict[str, Any]]:
    """Stored ratings of every generation, best first within a generation and role."""
    return list(
        store.db.query(
            "SELECT * FROM league_ratings WHERE league = ? "
            "ORDER BY generation, role, rating IS NULL, rating DESC",
            [league],
        )
    )


# The league loop -------------------------------------------------------------------------------


@dataclass
class LeagueRun:
    """The state one ``run_league`` call carries between stages."""

    config: LeagueConfig
    store: Store
    folder: Path
    base: Path
    log: Log
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def base_spec(self) -> str:
        return model_spec(self.config, self.base)

    def label_all(self) -> None:
        """Short names for the report: the base model and every checkpoint."""
        self.labels[self.base_spec] = "base"
        for generation in range(1, self.config.generations + 1):
            stage, plan = generation_state(self.store, self.name, generation)
            if stage is None:
                break
            for spec in plan.get("checkpoint", {}).values():
                self.labels[spec] = plan["label"]

    def setup(self) -> None:
        """Generation 0: register the base model, play the initial round-robin, rate."""
        stage, _ = generation_state(self.store, self.name, 0)
        if stage == "rated":
            return
        config = self.config
        roles = config.learner.roles
        for role in roles:
            self.store.register_agent(
                self.base_spec,
                role,
                "base",
                generation=0,
                step=0,
                config_hash=config.config_hash(),
                path=str(self.base),
            )
        sellers = list(config.sellers) + ([self.base_spec] if "seller" in roles else [])
        buyers = [(b,) for b in config.buyers] + ([(self.base_spec,)] if "buyer" in roles else [])
        tournament = eval_tournament(config, f"{self.name}/gen-000", sellers, buyers)
        self.log("generation 0: initial round-robin")
        play_tournament(self.store, tournament, self.labels, self.log)
        rate(self.store, config, 0, self.labels)
        plan = {"label": "base", "checkpoint": {}, "base": self.base_spec}
        finish_stage(self.store, self.name, 0, config.learner.side, "rated", plan)

    def parent(self, generation: int, side: str) -> tuple[str, Path | None, str]:
        """(parent spec, parent adapter or None, parent label) of the side's next checkpoint."""
        parent_spec, adapter, label = self.base_spec, None, "base"
        for g in range(1, generation):
            stage, plan = generation_state(self.store, self.name, g)
            if stage is not None and plan["side"] == side and plan.get("adapter"):
                parent_spec = next(iter(plan["checkpoint"].values()))
                adapter, label = Path(plan["adapter"]), plan["label"]
        return parent_spec, adapter, label

    def generation(self, g: int) -> None:
        """Run (or finish) the stages of generation ``g``."""
        config = self.config
        side = config.learner.side_of(g)
        stage, plan = generation_state(self.store, self.name, g)
        done = -1 if stage is None else STAGES.index(stage)
        folder = self.folder / f"gen-{g:03d}-{side}"
        if done < STAGES.index("sampled"):
            plan = self.sample(g, side)
            finish_stage(self.store, self.name, g, side, "sampled", plan)
        if done < STAGES.index("trained"):
            self.train(g, side, plan, folder)
            finish_stage(self.store, self.name, g, side, "trained", plan)
        if done < STAGES.index("registered"):
            plan = self.register(g, side, plan, folder)
            finish_stage(self.store, self.name, g, side, "registered", plan)
        self.label_all()
        if done < STAGES.index("evaluated"):
            self.evaluate(g, plan)
            finish_stage(self.store, self.name, g, side, "evaluated", plan)
        if done < STAGES.index("rated"):
            rate(self.store, config, g, self.labels)
            finish_stage(self.store, self.name, g, side, "rated", plan)

    def sample(self, g: int, side: str) -> dict[str, Any]:
        parent_spec, adapter, parent_label = self.parent(g, side)
        plan: dict[str, Any] = {
            "side": side,
            "label": f"gen-{g}-{side}",
            "parent": parent_spec,
            "parent_label": parent_label,
            "parent_adapter": None if adapter is None else str(adapter),
            "checkpoint": {},
        }
        if side == "self-play":
            plan.update(opponents=[], weights=[])
        else:
            members, weights = opponent_mixture(self.store, self.config, side, parent_spec)
            plan.update(opponents=[m.spec for m in members], weights=weights)
            shown = ", ".join(
                f"{self.labels.get(m.spec, m.spec)}={w:.2f}"
                for m, w in zip(members, weights, strict=True)
            )
            self.log(f"generation {g} ({side}): {self.config.learner.opponents} mixture {shown}")
        return plan

    def train(self, g: int, side: str, plan: dict[str, Any], folder: Path) -> None:
        from leagues.trainer import TrainJob, train_learner

        config = self.config
        learner = config.learner
        rows = training_rows(config, g, side, plan["opponents"], plan["weights"])
        steps = learner.steps_per_generation
        job = TrainJob(
            base_model=self.base,
            parent_adapter=Path(plan["parent_adapter"]) if plan["parent_adapter"] else None,
            rows=tuple(rows),
            market=config.market_config(),
            train=learner.train,
            steps=steps,
            output_dir=folder / "trainer",
            adapter_dir=folder / "adapter",
            seed=int(np.random.SeedSequence([config.seed, g]).generate_state(1)[0]),
            learner_name=f"hf:{plan['label']}",
        )
        started = time.perf_counter()

        def on_step(step: int, logs: dict[str, float]) -> None:
            league_step = (g - 1) * steps + step
            record_step(self.store, self.name, g, side, step, league_step, logs)
            self.log(
                f"generation {g} step {step}/{steps}: reward {logs.get('reward', math.nan):+.3f}"
                f", loss {logs.get('loss', math.nan):.4f}"
            )

        self.log(f"generation {g}: training the {side} for {steps} steps ({len(rows)} groups)")
        train_learner(job, on_step)
        self.log(f"generation {g}: trained in {time.perf_counter() - started:.0f} s")

    def register(self, g: int, side: str, plan: dict[str, Any], folder: Path) -> dict[str, Any]:
        from leagues.trainer import merge_adapter

        config = self.config
        adapter = folder / "adapter"
        if config.learner.train.use_vllm:
            spec = model_spec(config, self.base, adapter)
        else:
            spec = model_spec(config, merge_adapter(self.base, adapter, folder / "merged"))
        roles = ("seller", "buyer") if side == "self-play" else (side,)
        step = g * config.learner.steps_per_generation
        for role in roles:
            parent = self.store.register_agent(plan["parent"], role)
            self.store.register_agent(
                spec,
                role,
                plan["label"],
                parent=parent,
                generation=g,
                step=step,
                config_hash=config.config_hash(),
                path=str(adapter),
            )
        return {**plan, "adapter": str(adapter), "checkpoint": dict.fromkeys(roles, spec)}

    def evaluate(self, g: int, plan: dict[str, Any]) -> None:
        config = self.config
        for role, spec in plan["checkpoint"].items():
            if role == "seller":
                opponents = [(m.spec,) for m in population(self.store, config, "buyer")]
                tournament = eval_tournament(
                    config, f"{self.name}/gen-{g:03d}-seller", [spec], opponents
                )
            else:
                sellers = [m.spec for m in population(self.store, config, "seller")]
                tournament = eval_tournament(
                    config, f"{self.name}/gen-{g:03d}-buyer", sellers, [(spec,)]
                )
            self.log(f"generation {g}: evaluating {plan['label']} as {role}")
            play_tournament(self.store, tournament, self.labels, self.log)


def check_splits(config: LeagueConfig) -> None:
    """Fail early, naming the key, when a catalogue split cannot make the market's scenarios
    (e.g. three substitutable products from the 6-product test split of the small catalogue)."""
    market = config.market_config()
    catalog = load_catalog(config.catalog)
    for key in ("train_split", "eval_split"):
        split = getattr(config, key)
        try:
            make_scenarios(market, split_catalog(catalog, split), config.seed, 1)
        except ValueError as exc:
            raise ValueError(
                f'league.{key} = {split!r}: {exc}; choose another split ("all") or catalogue'
            ) from None


def league_folder(config: LeagueConfig, db_path: Path) -> Path:
    """Where checkpoints live: ``folder`` from the config, else ``runs/<name>`` beside the
    database (``<name>`` in the database's own folder when that is already ``runs``)."""
    if config.folder:
        return Path(config.folder)
    parent = db_path.resolve().parent
    return (parent if parent.name == "runs" else parent / "runs") / config.name


@dataclass(frozen=True)
class LeagueSummary:
    """What a league run leaves: per-generation rows, ratings, and where the files are."""

    name: str
    db_path: str
    folder: str
    report: str | None
    generations: tuple[dict[str, Any], ...]
    ratings: tuple[dict[str, Any], ...]
    """Ratings after the last generation."""

    def __rich__(self) -> Any:
        from rich.console import Group
        from rich.table import Table

        gens = Table(title=f"league {self.name}: generations")
        for header in ("gen", "side", "checkpoint", "parent", "opponents", "train reward"):
            gens.add_column(header)
        for row in self.generations:
            gens.add_row(
                str(row["generation"]),
                row["side"],
                row["label"],
                row["parent"],
                row["opponents"],
                row["train_reward"],
            )
        board = Table(title="ratings after the last generation (Bradley-Terry, 95% interval)")
        for header in ("role", "agent", "rating", "interval", "episodes", "mean reward"):
            board.add_column(header)
        for row in self.ratings:
            interval = (
                "-"
                if row["ci_low"] is None or row["ci_high"] is None
                else f"[{row['ci_low']:.0f}, {row['ci_high']:.0f}]"
            )
            board.add_row(
                row["role"],
                row["label"],
                _fmt(row["rating"], 0),
                interval,
                str(row["episodes"]),
                _fmt(row["reward"], 3),
            )
        parts: list[Any] = [gens, board, f"database: {self.db_path}", f"files: {self.folder}"]
        if self.report:
            parts.append(f"report: {self.report}")
        return Group(*parts)


def _fmt(value: Any, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def summarize(
    store: Store, config: LeagueConfig, folder: Path, report: Path | None, labels: dict[str, str]
) -> LeagueSummary:
    """The summary of everything stored for the league."""
    steps = training_steps(store, config.name)
    rows = []
    for g in range(1, config.generations + 1):
        stage, plan = generation_state(store, config.name, g)
        if stage is None:
            break
        rewards = [s["reward"] for s in steps if s["generation"] == g and s["reward"] is not None]
        mixture = ", ".join(
            f"{labels.get(spec, spec)}:{w:.2f}"
            for spec, w in zip(plan["opponents"], plan["weights"], strict=True)
        )
        rows.append(
            {
                "generation": g,
                "side": plan["side"],
                "label": plan["label"],
                "parent": plan["parent_label"],
                "opponents": mixture or "itself",
                "train_reward": "-" if not rewards else f"{rewards[0]:+.3f} -> {rewards[-1]:+.3f}",
                "stage": stage,
            }
        )
    ratings = [r for r in league_ratings(store, config.name) if r["generation"] == len(rows)]
    return LeagueSummary(
        name=config.name,
        db_path=str(store.path),
        folder=str(folder),
        report=None if report is None else str(report),
        generations=tuple(rows),
        ratings=tuple(ratings),
    )


def run_league(
    config: LeagueConfig, db_path: str | Path, log: Log = _stderr, report: bool = True
) -> LeagueSummary:
    """Run (or resume) the league into the database at ``db_path``; see the module docstring.

    With ``report``, an HTML report (tournament leaderboards, training curves, ratings per
    generation) is written to ``<folder>/report/index.html`` at the end.
    """
    check_splits(config)
    db = Path(db_path)
    folder = league_folder(config, db)
    folder.mkdir(parents=True, exist_ok=True)
    if config.cpu_threads:
        import torch

        torch.set_num_threads(config.cpu_threads)
    from leagues.models import prepare_base_model

    with Store.open(db) as store:
        ensure_tables(store)
        register_league(store, config)
        base = prepare_base_model(config, folder, log)
        run = LeagueRun(config, store, folder, base, log)
        run.label_all()
        run.setup()
        for g in range(1, config.generations + 1):
            run.generation(g)
        page = None
        if report:
            from leagues.report import write_league_report

            page = write_league_report(db, folder / "report", config.name)
            log(f"report: {page}")
        return summarize(store, config, folder, page, run.labels)
