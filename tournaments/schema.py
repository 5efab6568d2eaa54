"""The results database's schema: its tables, as numbered migrations, and their columns.

* ``meta``: ``schema_version`` (see ``MIGRATIONS``);
* ``agents``: every spec that played, by role, with nullable lineage fields for checkpoints;
* ``tournaments``: name, the config as JSON, creation time;
* ``episodes``: one row per episode; the columns an analyst filters on (outcome, rewards, prices,
  budgets, specs, ...) plus ``record``, the full :class:`EpisodeRecord` JSON *without* its turns;
* ``turns``: one row per message (valid or not) of an episode; ``load_records`` puts them back;
* ``payoffs``: per tournament and lineup, the sums of the seller's reward, the buyer side's reward
  and the cross-role score over counted episodes, updated in the transaction that stores the
  episodes: the league's meta-game reads it instead of decoding every record;
* ``episodes.seller_reward_name``, ``episodes.buyer_reward_name``: the rewards the episode was
  played under (:mod:`arena.rewards`; part of its :class:`arena.records.EpisodeKey`);
* ``episode_usage``: per episode and seat, the agent's prompt and completion tokens (seats
  without model tokens have no row);
* ``episodes.parent_id``, ``episodes.from_turn``: a counterfactual replay's parent episode and
  the turn it branched after (:mod:`tournaments.replay`); NULL for played episodes;
* ``league_runs``, ``league_generations``, ``training_steps``, ``league_ratings``: a league's
  settings, generation plans and stages, per-step training metrics (the registry's training
  group, reward, loss, clip ratio, zero-advantage groups, sampler gap) and ratings per generation
  (:mod:`leagues.state`).

An old database is upgraded by the migrations it lacks when it is opened
(:meth:`tournaments.store.Store.open`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable

import sqlite_utils

from arena.buyer_metrics import episode_buyer_side_reward
from arena.metrics import episode_cross_score
from arena.records import EpisodeRecord, TurnRecord
from arena.seats import seats

LINEAGE_FIELDS = ("parent", "generation", "step", "config_hash", "path")


def _v1_initial(db: sqlite_utils.Database) -> None:
    """Version 1: meta, agents (spec, role, label), tournaments, episodes and turns."""
    db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute(
        """CREATE TABLE agents (
            id INTEGER PRIMARY KEY,
            spec TEXT NOT NULL,
            role TEXT NOT NULL,
            label TEXT NOT NULL,
            created TEXT NOT NULL,
            UNIQUE (spec, role)
        )"""
    )
    db.execute(
        """CREATE TABLE tournaments (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            config TEXT NOT NULL,
            created TEXT NOT NULL
        )"""
    )
    db.execute(
        """CREATE TABLE episodes (
            id INTEGER PRIMARY KEY,
            tournament_id INTEGER NOT NULL REFERENCES tournaments(id),
            env_version TEXT NOT NULL,
            preset TEXT NOT NULL,
            scenario_seed INTEGER NOT NULL,
            scenario_index INTEGER NOT NULL,
            episode_seed INTEGER NOT NULL,
            seller TEXT NOT NULL,
            buyers TEXT NOT NULL,          -- JSON list: the buyer spec of every slot
            product_ids TEXT NOT NULL,     -- JSON list
            cost REAL NOT NULL,            -- product 0 (the single-product view)
            list_price REAL NOT NULL,      -- product 0
            budgets TEXT NOT NULL,         -- JSON list: each buyer's budget for product 0
            outcome TEXT NOT NULL,
            termination TEXT NOT NULL,
            deal_price REAL,               -- first deal, NULL without one
            deal_buyer INTEGER,            -- 0-based slot of the first deal's buyer
            deal_product INTEGER,
            seller_reward REAL NOT NULL,
            buyer_rewards TEXT NOT NULL,   -- JSON list
            violation TEXT,
            violation_by TEXT,
            engaged_count INTEGER NOT NULL,
            first_bids TEXT NOT NULL,      -- JSON list
            seller_turns INTEGER NOT NULL,
            num_turns INTEGER NOT NULL,    -- rows this episode has in `turns`
            record TEXT NOT NULL           -- EpisodeRecord JSON without result.turns
        )"""
    )
    db.execute(
        "CREATE UNIQUE INDEX episodes_key ON episodes "
        "(tournament_id, env_version, seller, buyers, scenario_seed, scenario_index)"
    )
    db.execute(
        """CREATE TABLE turns (
            episode_id INTEGER NOT NULL REFERENCES episodes(id),
            idx INTEGER NOT NULL,
            agent TEXT NOT NULL,
            to_agent TEXT NOT NULL,
            text TEXT NOT NULL,
            kind TEXT,
            price REAL,
            product INTEGER,
            valid INTEGER NOT NULL,
            reason TEXT,
            tokens_in INTEGER NOT NULL,
            tokens_out INTEGER NOT NULL,
            PRIMARY KEY (episode_id, idx)
        ) WITHOUT ROWID"""
    )


def _v2_agent_lineage(db: sqlite_utils.Database) -> None:
    """Version 2: lineage of trained checkpoints on agents (all nullable)."""
    db.execute("ALTER TABLE agents ADD COLUMN parent INTEGER REFERENCES agents(id)")
    db.execute("ALTER TABLE agents ADD COLUMN generation INTEGER")
    db.execute("ALTER TABLE agents ADD COLUMN step INTEGER")
    db.execute("ALTER TABLE agents ADD COLUMN config_hash TEXT")
    db.execute("ALTER TABLE agents ADD COLUMN path TEXT")


def _v3_leagues_and_payoffs(db: sqlite_utils.Database) -> None:
    """Version 3: the league tables (created outside the migrations before, hence ``IF NOT
    EXISTS``) and ``payoffs``, per-lineup sums kept as episodes are stored, backfilled here."""
    db.execute(
        """CREATE TABLE IF NOT EXISTS league_runs (
            name TEXT PRIMARY KEY,
            config TEXT NOT NULL,          -- JSON, without `generations` (a league may grow)
            created TEXT NOT NULL
        )"""
    )
    db.execute(
        """CREATE TABLE IF NOT EXISTS league_generations (
            league TEXT NOT NULL,
            generation INTEGER NOT NULL,   -- 0: setup; 1..: trained generations
            side TEXT NOT NULL,            -- seller, buyer, self-play (setup: the learner's side)
            stage TEXT NOT NULL,           -- last finished stage
            plan TEXT NOT NULL,            -- JSON of leagues.plan.GenerationPlan
            updated TEXT NOT NULL,
            PRIMARY KEY (league, generation)
        )"""
    )
    db.execute(
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
        )"""
    )
    db.execute(
        """CREATE TABLE IF NOT EXISTS league_ratings (
            league TEXT NOT NULL,
            generation INTEGER NOT NULL,   -- ratings after this generation (0: setup)
            role TEXT NOT NULL,
            agent TEXT NOT NULL,
            label TEXT NOT NULL,
            rating REAL, ci_low REAL, ci_high REAL,
            games INTEGER NOT NULL, episodes INTEGER NOT NULL, reward REAL,
            PRIMARY KEY (league, generation, role, agent)
        )"""
    )
    db.execute(
        """CREATE TABLE payoffs (
            tournament_id INTEGER NOT NULL REFERENCES tournaments(id),
            seller TEXT NOT NULL,
            buyers TEXT NOT NULL,          -- JSON list: the lineup, as in episodes.buyers
            episodes INTEGER NOT NULL,     -- counted episodes (every outcome but "error")
            seller_reward REAL NOT NULL,   -- sums over those episodes
            buyer_reward REAL NOT NULL,    -- of the buyer side's mean reward
            seller_score REAL NOT NULL,    -- of the cross-role score (seller's surplus share)
            PRIMARY KEY (tournament_id, seller, buyers)
        )"""
    )
    fill_payoffs(db)


def _v4_replays_and_usage(db: sqlite_utils.Database) -> None:
    """Version 4: counterfactual replays link to the episode they branch from (``parent_id``,
    ``from_turn``; NULL for played episodes), which joins the unique key, so the replays of two
    parents on one scenario are two episodes; ``episode_usage`` holds each seat's model tokens
    per episode (backfilled from ``turns``)."""
    db.execute("ALTER TABLE episodes ADD COLUMN parent_id INTEGER REFERENCES episodes(id)")
    db.execute("ALTER TABLE episodes ADD COLUMN from_turn INTEGER")
    db.execute("DROP INDEX episodes_key")
    db.execute(
        "CREATE UNIQUE INDEX episodes_key ON episodes (tournament_id, env_version, seller, "
        "buyers, scenario_seed, scenario_index, COALESCE(parent_id, 0), COALESCE(from_turn, -1))"
    )
    db.execute("CREATE INDEX episodes_parent ON episodes (parent_id) WHERE parent_id IS NOT NULL")
    db.execute(
        """CREATE TABLE episode_usage (
            episode_id INTEGER NOT NULL REFERENCES episodes(id),
            seat TEXT NOT NULL,            -- seller, buyer_1, ...
            agent TEXT NOT NULL,           -- the seat's agent spec
            tokens_in INTEGER NOT NULL,    -- prompt tokens over the seat's turns
            tokens_out INTEGER NOT NULL,   -- completion tokens
            PRIMARY KEY (episode_id, seat)
        ) WITHOUT ROWID"""
    )
    db.execute(
        """INSERT INTO episode_usage
        SELECT t.episode_id, t.agent,
            CASE WHEN t.agent = 'seller' THEN e.seller ELSE json_extract(
                e.buyers, '$[' || (CAST(substr(t.agent, 7) AS INTEGER) - 1) || ']') END,
            SUM(t.tokens_in), SUM(t.tokens_out)
        FROM turns t JOIN episodes e ON e.id = t.episode_id
        GROUP BY t.episode_id, t.agent
        HAVING SUM(t.tokens_in) + SUM(t.tokens_out) > 0"""
    )


def _v5_training_story(db: sqlite_utils.Database) -> None:
    """Version 5: per training step, the violation rate (the paper's Phase 1), the GRPO groups
    with equal rewards (they train nothing) and the sampler/trainer logprob gap (vLLM)."""
    for column in ("violation_rate", "zero_advantage_groups", "sampler_logp_diff"):
        db.execute(f"ALTER TABLE training_steps ADD COLUMN {column} REAL")


def _v6_reward_names(db: sqlite_utils.Database) -> None:
    """Version 6: the names of the seller's and the buyers' reward every episode was played
    under (``MarketConfig.seller_reward`` / ``buyer_reward``, :mod:`arena.rewards`); episodes
    stored before rewards were a setting were played under the defaults written here."""
    for column in ("seller_reward_name", "buyer_reward_name"):
        db.execute(
            f"ALTER TABLE episodes ADD COLUMN {column} TEXT NOT NULL DEFAULT 'surplus_extraction'"
        )


def _v7_resampled_groups(db: sqlite_utils.Database) -> None:
    """Version 7: per training step, the GRPO groups dynamic sampling replayed on a fresh
    scenario (``leagues.group_rewards.RESAMPLED``)."""
    db.execute("ALTER TABLE training_steps ADD COLUMN resampled_groups REAL")


MIGRATIONS: list[Callable[[sqlite_utils.Database], None]] = [
    _v1_initial,
    _v2_agent_lineage,
    _v3_leagues_and_payoffs,
    _v4_replays_and_usage,
    _v5_training_story,
    _v6_reward_names,
    _v7_resampled_groups,
]
"""Migration ``i`` takes a database at schema version ``i`` to ``i + 1``. Append, never edit."""

SCHEMA_VERSION = len(MIGRATIONS)


def fill_payoffs(db: sqlite_utils.Database) -> None:
    """Recompute every ``payoffs`` row from the stored episodes (decoding each record)."""
    db.execute("DELETE FROM payoffs")
    rows = db.execute(
        "SELECT tournament_id, seller, buyers, record FROM episodes WHERE outcome != 'error'"
    )
    sums: dict[tuple[int, str, str], list[float]] = {}
    for tournament_id, seller, buyers, text in rows:
        data = json.loads(text)
        data["result"]["turns"] = []
        cell = sums.setdefault((tournament_id, seller, buyers), [0, 0.0, 0.0, 0.0])
        for i, value in enumerate((1, *payoff(EpisodeRecord.from_dict(data)))):
            cell[i] += value
    db.conn.executemany(
        "INSERT INTO payoffs VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(*key, *cell) for key, cell in sums.items()],
    )


def payoff(record: EpisodeRecord) -> tuple[float, float, float]:
    """What a counted episode adds to its lineup's ``payoffs`` row: the seller's reward, the
    buyer side's reward and the seller's cross-role score."""
    score = episode_cross_score(record)
    assert score is not None, "error episodes carry no payoff"
    return record.result.seller_reward, episode_buyer_side_reward(record), score


ADD_USAGE = (
    "INSERT INTO episode_usage (episode_id, seat, agent, tokens_in, tokens_out) "
    "VALUES (?, ?, ?, ?, ?)"
)


def usage_rows(record: EpisodeRecord) -> tuple[tuple[str, str, int, int], ...]:
    """What an episode adds to ``episode_usage``: (seat, agent spec, prompt tokens, completion
    tokens) of every seat whose turns used a model, from the turn records."""
    sums: dict[str, list[int]] = {}
    for turn in record.result.turns:
        if turn.tokens_in or turn.tokens_out:
            cell = sums.setdefault(turn.agent, [0, 0])
            cell[0] += turn.tokens_in
            cell[1] += turn.tokens_out
    specs = dict(zip(seats(len(record.buyers)), (record.seller, *record.buyers), strict=True))
    return tuple((seat, specs[seat], *cell) for seat, cell in sums.items())  # type: ignore[misc]


EPISODE_COLUMNS = (
    "env_version",
    "preset",
    "scenario_seed",
    "scenario_index",
    "episode_seed",
    "seller",
    "buyers",
    "product_ids",
    "cost",
    "list_price",
    "budgets",
    "outcome",
    "termination",
    "deal_price",
    "deal_buyer",
    "deal_product",
    "seller_reward",
    "buyer_rewards",
    "violation",
    "violation_by",
    "engaged_count",
    "first_bids",
    "seller_turns",
    "num_turns",
    "record",
    "seller_reward_name",
    "buyer_reward_name",
)
TURN_FIELDS = tuple(f.name for f in dataclasses.fields(TurnRecord))
TURN_COLUMNS = tuple({"index": "idx", "to": "to_agent"}.get(f, f) for f in TURN_FIELDS)
"""The ``turns`` column of each :class:`TurnRecord` field (two renamed: SQL keywords)."""
