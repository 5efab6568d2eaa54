"""A league's stored state: its settings, generation stages and plans, training steps, ratings.

The tables are part of the results database's schema (:mod:`tournaments.schema`, migration 3);
this module reads and writes them, each write in one store transaction. A generation records the
last stage it finished (:data:`STAGES`) with its :class:`leagues.plan.GenerationPlan`, so a
killed league restarts at the first unfinished stage.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from arena import metrics, settings
from arena.records import EpisodeRecord
from leagues.config import LeagueConfig, without_loggers
from leagues.group_rewards import RESAMPLED, ZERO_ADVANTAGE
from leagues.plan import GenerationPlan
from leagues.train_config import migrate_settings
from tournaments.leaderboard import default_anchor, leaderboard
from tournaments.ratings import RatingConfig
from tournaments.store import Store

STAGES = ("sampled", "trained", "registered", "evaluated", "rated")
"""Stages of a generation, in order (generation 0, the setup, only records ``rated``)."""

STEP_METRICS: tuple[tuple[str, str], ...] = (
    ("reward", "reward"),
    *((m.name, m.name) for m in metrics.group(metrics.TRAINING)),
    ("loss", "loss"),
    ("entropy", "entropy"),
    ("step_time", "seconds"),
    (ZERO_ADVANTAGE, ZERO_ADVANTAGE),
    (RESAMPLED, RESAMPLED),
    ("sampling/sampling_logp_difference/mean", "sampler_logp_diff"),
)
"""(TRL log key, training_steps column) stored for every optimizer step: the reward, the
registry's training metrics, the loss, the entropy, the step time, the GRPO groups with equal
rewards (:func:`leagues.group_rewards.zero_advantage_groups`), the groups dynamic sampling replayed
and, with vLLM, the mean absolute difference between the sampler's and the trainer's token
logprobs."""

CLIP_KEYS = ("cispo_clip_ratio", "clip_ratio/region_mean")
"""TRL's clip-ratio log key: CISPO's, or the PPO-style losses'."""


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def stored_settings(config: LeagueConfig) -> dict[str, Any]:
    """The league's settings as stored: JSON, without ``generations`` (a league may grow) and
    the loggers (:func:`leagues.config.without_loggers`)."""
    return without_loggers(
        {k: v for k, v in settings.to_json(config).items() if k != "generations"}
    )


def league_hash(store: Store, league: str) -> str:
    """The league's config hash, from its settings *as first stored*: a league stored before
    a setting was added keeps the hash its checkpoints carry (``LeagueConfig.config_hash`` of
    the same settings), instead of changing with every new field of the code."""
    row = store.db.execute("SELECT config FROM league_runs WHERE name = ?", [league]).fetchone()
    if row is None:
        raise ValueError(f"no league {league!r} is stored in {store.path}")
    text = json.dumps(json.loads(row[0]), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def register_league(store: Store, config: LeagueConfig) -> None:
    """Record the league; a stored league of the same name with other settings is refused. A
    setting added to the code since the league was stored counts as unchanged while it keeps
    its default (:func:`arena.settings.changes`), so upgrading does not orphan a league; a league
    stored with the training settings' old names is compared in the new ones
    (:func:`leagues.train_config.migrate_settings`), its stored row (and so its hash) untouched."""
    wanted = stored_settings(config)
    with store.transaction():
        row = store.db.execute(
            "SELECT config FROM league_runs WHERE name = ?", [config.name]
        ).fetchone()
        if row is None:
            store.db.execute(
                "INSERT INTO league_runs (name, config, created) VALUES (?, ?, ?)",
                [config.name, json.dumps(wanted, sort_keys=True), _now()],
            )
            return
    stored = migrate_settings(json.loads(row[0]))
    changed = settings.changes(stored, wanted, settings.defaults(LeagueConfig))
    if changed:
        raise ValueError(
            f"league {config.name!r} is already stored in {store.path} with other settings "
            f"(differs in: {', '.join(changed)}); rename the league or use another database "
            "(only `generations` may change, to extend a league)"
        )


def generation_state(
    store: Store, league: str, generation: int
) -> tuple[str | None, GenerationPlan | None]:
    """(last finished stage, plan) of a generation; (None, None) before its first stage."""
    row = store.db.execute(
        "SELECT stage, plan FROM league_generations WHERE league = ? AND generation = ?",
        [league, generation],
    ).fetchone()
    return (None, None) if row is None else (row[0], GenerationPlan.from_json(row[1]))


def finished(stage: str | None, wanted: str) -> bool:
    """Whether a generation at ``stage`` has finished ``wanted``."""
    return stage is not None and STAGES.index(stage) >= STAGES.index(wanted)


def generations(store: Store, league: str) -> list[tuple[int, str, GenerationPlan]]:
    """(generation, stage, plan) of every recorded generation, setup first."""
    rows = store.db.execute(
        "SELECT generation, stage, plan FROM league_generations WHERE league = ? "
        "ORDER BY generation",
        [league],
    )
    return [(g, stage, GenerationPlan.from_json(plan)) for g, stage, plan in rows]


def finish_stage(
    store: Store, league: str, generation: int, stage: str, plan: GenerationPlan
) -> None:
    """Record that ``stage`` of ``generation`` finished, with the generation's plan so far."""
    with store.transaction():
        store.db.execute(
            "INSERT OR REPLACE INTO league_generations "
            "(league, generation, side, stage, plan, updated) VALUES (?, ?, ?, ?, ?, ?)",
            [league, generation, plan.side, stage, plan.to_json(), _now()],
        )


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
    with store.transaction():
        _insert(store, "training_steps", [row], replace=True)


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


def league_tournaments(store: Store, league: str) -> list[tuple[int, str, dict[str, Any]]]:
    """(id, name, config) of the league's tournaments, in creation order."""
    rows = store.db.execute(
        "SELECT id, name, config FROM tournaments WHERE name LIKE ? ORDER BY id", [f"{league}/%"]
    ).fetchall()
    return [(tid, name, json.loads(config)) for tid, name, config in rows]


def league_records(
    store: Store, league: str, through: int | None = None
) -> tuple[list[EpisodeRecord], list[tuple[str, ...]]]:
    """Every evaluation episode of the league, and the buyer entries of its tournaments; with
    ``through``, of generations ``<= through`` only (a generation's ratings are the same
    whether a later generation's round has started or not: ``overlap_evaluation``)."""
    records: list[EpisodeRecord] = []
    entries: dict[tuple[str, ...], None] = {}
    for tid, name, config in league_tournaments(store, league):
        if through is not None and tournament_generation(name) > through:
            continue
        records += store.load_records(tournament=tid)
        for entry in config["buyers"]:
            entries.setdefault(tuple(entry), None)
    return records, list(entries)


def tournament_generation(name: str) -> int:
    """The generation of a league tournament ``<league>/gen-NNN[-<role>]``."""
    match = re.fullmatch(r".*/gen-(\d+)(?:-[a-z-]+)?", name)
    if match is None:
        raise ValueError(f"{name!r} is no league tournament name (<league>/gen-NNN[-<role>])")
    return int(match.group(1))


def league_leaderboard(
    records: Sequence[EpisodeRecord],
    entries: Sequence[tuple[str, ...]],
    role: str,
    sellers: Sequence[str],
    bootstrap_rounds: int,
    seed: int,
) -> list[dict[str, Any]]:
    """How a league rates ``role``, written once for the league after each generation and for
    a refit on chosen episodes (:func:`leagues.evaluation.refitted`): Bradley-Terry with the
    league's bootstrap settings, anchored at the first scripted seller of ``sellers`` or the
    first scripted buyer entry (:func:`tournaments.leaderboard.default_anchor`)."""
    rating = RatingConfig(bootstrap_rounds=bootstrap_rounds, seed=seed)
    anchor = default_anchor(role, sellers, ["|".join(entry) for entry in entries])
    return leaderboard(records, role, rating, entries or None, anchor)


def store_ratings(
    store: Store, league: str, generation: int, rows: Sequence[dict[str, Any]]
) -> None:
    """Replace the ratings stored after ``generation``."""
    with store.transaction():
        store.db.execute(
            "DELETE FROM league_ratings WHERE league = ? AND generation = ?", [league, generation]
        )
        rated = [{"league": league, "generation": generation, **row} for row in rows]
        _insert(store, "league_ratings", rated)


def _insert(store: Store, table: str, rows: list[dict[str, Any]], replace: bool = False) -> None:
    """Insert rows (dicts with the same keys), inside the caller's transaction."""
    if not rows:
        return
    columns = list(rows[0])
    verb = "INSERT OR REPLACE" if replace else "INSERT"
    store.db.conn.executemany(
        f"{verb} INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
        [[row[c] for c in columns] for row in rows],
    )


def league_ratings(store: Store, league: str) -> list[dict[str, Any]]:
    """Stored ratings of every generation, best first within a generation and role."""
    return list(
        store.db.query(
            "SELECT * FROM league_ratings WHERE league = ? "
            "ORDER BY generation, role, rating IS NULL, rating DESC",
            [league],
        )
    )


def leagues_in(store: Store) -> list[str]:
    """Names of the leagues stored in the database."""
    return [row[0] for row in store.db.execute("SELECT name FROM league_runs ORDER BY created")]
