"""The durable results store: one SQLite file per project or league, written through sqlite-utils.

``Store.open(path)`` opens it for writing, ``Store.open(path, read_only=True)`` for reading
without changing the file (:mod:`tournaments.database`); one run at a time writes a file
(:mod:`tournaments.lock`), any number of readers may read it meanwhile.

Everything a metric or a rating needs is in the file, so a leaderboard can be rebuilt from the
database alone (:func:`load_records`); the tables and their migrations are in
:mod:`tournaments.schema`.

An episode is identified within its tournament by its :class:`arena.records.EpisodeKey`
(environment version, preset, seller, buyer specs per slot, scenario seed, scenario index,
reward names; a tournament fixes its market, so the UNIQUE index holds the others), so a resumed
run cannot store one twice. An episode row, its turns and its share of the ``payoffs`` sums are
written in the same transaction, and a batch of episodes is one transaction, so a process killed
at any moment leaves whole episodes only. The journal is WAL with ``synchronous=NORMAL``: a crash
of the writing process never loses a committed batch (a power loss may lose the last few, never
corrupt the file).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NamedTuple

import sqlite_utils

from arena.records import EpisodeKey, EpisodeRecord
from arena.rewards import Rewards
from arena.seats import ROLES
from arena.settings import changes
from tournaments.database import connect_reader, connect_writer, in_memory_copy
from tournaments.rows import EncodedEpisode, encode_episode
from tournaments.schema import (
    ADD_USAGE,
    EPISODE_COLUMNS,
    LINEAGE_FIELDS,
    MIGRATIONS,
    SCHEMA_VERSION,
    TURN_COLUMNS,
    TURN_FIELDS,
    fill_payoffs,
)

KEY_COLUMNS = (
    "env_version, preset, seller, buyers, scenario_seed, scenario_index, seller_reward_name, "
    "buyer_reward_name"
)
"""The ``episodes`` columns of an :class:`EpisodeKey`, in :func:`stored_key`'s order."""


def stored_key(
    env: str, preset: str, seller: str, buyers: str, seed: int, index: int, *rewards: str
) -> EpisodeKey:
    """The key of an ``episodes`` row from its :data:`KEY_COLUMNS`."""
    return EpisodeKey(
        env, preset, seller, tuple(json.loads(buyers)), seed, index, Rewards(*rewards)
    )


class PayoffSums(NamedTuple):
    """A lineup's stored sums over its counted episodes (see :mod:`tournaments.schema`)."""

    episodes: int
    seller_reward: float
    buyer_reward: float
    seller_score: float


ADD_PAYOFF = (
    "INSERT INTO payoffs (tournament_id, seller, buyers, episodes, seller_reward, buyer_reward, "
    "seller_score) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tournament_id, seller, buyers) DO "
    "UPDATE SET episodes = episodes + excluded.episodes, "
    "seller_reward = seller_reward + excluded.seller_reward, "
    "buyer_reward = buyer_reward + excluded.buyer_reward, "
    "seller_score = seller_score + excluded.seller_score"
)
_SELLER, _BUYERS = EPISODE_COLUMNS.index("seller"), EPISODE_COLUMNS.index("buyers")


def _payoff_rows(tournament_id: int, encoded: Iterable[EncodedEpisode]) -> list[tuple[Any, ...]]:
    """One ``payoffs`` increment per lineup of a batch: counts and sums of its episodes."""
    sums: dict[tuple[str, str], list[float]] = {}
    for e in encoded:
        if e.payoff is not None:
            cell = sums.setdefault((e.row[_SELLER], e.row[_BUYERS]), [0, 0.0, 0.0, 0.0])
            for i, value in enumerate((1, *e.payoff)):
                cell[i] += value
    return [(tournament_id, *key, *cell) for key, cell in sums.items()]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _normalized(config: Mapping[str, Any]) -> Any:
    """The config as it reads back from JSON, so a fresh config compares equal to a stored one."""
    return json.loads(json.dumps(config, sort_keys=True))


class Store:
    """An open results database. Use :meth:`open`; close it (or use ``with``) when done."""

    def __init__(self, db: sqlite_utils.Database, path: Path) -> None:
        self.db = db
        self.path = path

    @classmethod
    def open(cls, path: str | Path, read_only: bool = False) -> Store:
        """Open ``path`` (:mod:`tournaments.database`). A writer creates the file and upgrades
        its schema as needed, in WAL mode. A reader (``read_only``) never changes the file: it
        refuses a missing or non-arena file, and upgrades an old schema in an in-memory copy."""
        target = Path(path)
        if not read_only:
            store = cls(sqlite_utils.Database(connect_writer(target)), target)
            store._migrate()
            return store
        conn = connect_reader(target)
        store = cls(sqlite_utils.Database(conn), target)
        try:
            version = store.schema_version()
            if version > SCHEMA_VERSION:
                raise ValueError(store._newer(version))
        except BaseException:
            store.close()
            raise
        if version < SCHEMA_VERSION:
            store = cls(sqlite_utils.Database(in_memory_copy(conn)), target)
            store._migrate()
        return store

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One write transaction (the league tables are written in them too). ``IMMEDIATE``
        takes the write lock first, so two writers queue instead of failing when both try to
        upgrade a read lock."""
        self.db.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.conn.execute("ROLLBACK")
            raise
        self.db.conn.execute("COMMIT")

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads that see one committed state while another process writes (a WAL read
        transaction); inside a transaction already open, that one's state."""
        conn = self.db.conn
        if conn.in_transaction:
            yield
            return
        conn.execute("BEGIN")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")

    def schema_version(self) -> int:
        if "meta" not in self.db.table_names():
            return 0
        row = self.db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return 0 if row is None else int(row[0])

    def _newer(self, version: int) -> str:
        return (
            f"database {self.path} has schema version {version}, newer than the "
            f"{SCHEMA_VERSION} this code knows; upgrade bargain-arena to open it"
        )

    def _migrate(self) -> None:
        """Apply the missing migrations, each with its version bump in one transaction."""
        while True:
            with self.transaction():
                version = self.schema_version()
                if version > SCHEMA_VERSION:
                    raise ValueError(self._newer(version))
                if version == SCHEMA_VERSION:
                    return
                MIGRATIONS[version](self.db)
                self.db.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                    [str(version + 1)],
                )

    def tournament_id(
        self, name: str, config: Mapping[str, Any], defaults: Mapping[str, Any] | None = None
    ) -> int:
        """The id of tournament ``name``, created with ``config`` if new. A stored tournament
        whose config differs is refused: its episodes were played under other settings. Given
        the config class's ``defaults`` (:func:`arena.settings.defaults`), a setting the stored
        config lacks counts as unchanged while it keeps its default."""
        if not name:
            raise ValueError("tournament name must be a non-empty string")
        wanted = _normalized(config)
        with self.transaction():
            row = self.db.execute(
                "SELECT id, config FROM tournaments WHERE name = ?", [name]
            ).fetchone()
            if row is None:
                cursor = self.db.execute(
                    "INSERT INTO tournaments (name, config, created) VALUES (?, ?, ?)",
                    [name, json.dumps(wanted, sort_keys=True), _now()],
                )
                return int(cursor.lastrowid)
        keys = changes(json.loads(row[1]), wanted, defaults or {})
        if keys:
            raise ValueError(
                f"tournament {name!r} is already stored in {self.path} with a different config "
                f"(differs in: {', '.join(keys)}); give the tournament a new name or use another "
                "database file"
            )
        return int(row[0])

    def register_agent(self, spec: str, role: str, label: str | None = None, **lineage: Any) -> int:
        """The id of agent ``spec`` playing ``role``; created if new. Lineage fields given
        (parent, generation, step, config_hash, path) are recorded, replacing stored ones."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {role!r}")
        unknown = sorted(set(lineage) - set(LINEAGE_FIELDS))
        if unknown:
            raise ValueError(
                f"unknown lineage field(s) {', '.join(unknown)}; use {', '.join(LINEAGE_FIELDS)}"
            )
        given = {k: v for k, v in lineage.items() if v is not None}
        with self.transaction():
            row = self.db.execute(
                "SELECT id FROM agents WHERE spec = ? AND role = ?", [spec, role]
            ).fetchone()
            if row is None:
                cursor = self.db.execute(
                    "INSERT INTO agents (spec, role, label, created) VALUES (?, ?, ?, ?)",
                    [spec, role, label or spec, _now()],
                )
                agent_id = int(cursor.lastrowid)
            else:
                agent_id = int(row[0])
                if label is not None:
                    self.db.execute("UPDATE agents SET label = ? WHERE id = ?", [label, agent_id])
            if given:
                assignments = ", ".join(f"{k} = ?" for k in given)
                self.db.execute(
                    f"UPDATE agents SET {assignments} WHERE id = ?", [*given.values(), agent_id]
                )
        return agent_id

    def agent(self, agent_id: int) -> dict[str, Any]:
        """The stored row of an agent, as a dict."""
        rows = list(self.db.query("SELECT * FROM agents WHERE id = ?", [agent_id]))
        if not rows:
            raise KeyError(f"no agent with id {agent_id} in {self.path}")
        return rows[0]

    def add_episodes(
        self, tournament_id: int, episodes: Iterable[EpisodeRecord | EncodedEpisode]
    ) -> int:
        """Store a batch of episodes (records or pre-encoded) in one transaction; returns how
        many. A key that is already stored aborts the whole batch with a ValueError."""
        encoded = [e if isinstance(e, EncodedEpisode) else encode_episode(e) for e in episodes]
        if not encoded:
            return 0
        insert_episode = (
            f"INSERT INTO episodes (id, tournament_id, {', '.join(EPISODE_COLUMNS)}) "
            f"VALUES ({', '.join('?' * (len(EPISODE_COLUMNS) + 2))})"
        )
        insert_turn = (
            f"INSERT INTO turns (episode_id, {', '.join(TURN_COLUMNS)}) "
            f"VALUES ({', '.join('?' * (len(TURN_COLUMNS) + 1))})"
        )
        conn = self.db.conn
        try:
            with self.transaction():
                # Ids are assigned here, under the write lock, so turns can be inserted in bulk.
                first = conn.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM episodes").fetchone()[0]
                conn.executemany(
                    insert_episode,
                    ((first + n, tournament_id, *e.row) for n, e in enumerate(encoded)),
                )
                conn.executemany(
                    insert_turn,
                    ((first + n, *t) for n, e in enumerate(encoded) for t in e.turns),
                )
                conn.executemany(ADD_PAYOFF, _payoff_rows(tournament_id, encoded))
                conn.executemany(
                    ADD_USAGE, ((first + n, *u) for n, e in enumerate(encoded) for u in e.usage)
                )
        except sqlite3.IntegrityError as exc:
            raise ValueError(
                f"an episode of this batch is already stored in tournament {tournament_id} "
                f"({exc}); skip the keys of done_keys() before playing"
            ) from exc
        return len(encoded)

    def payoffs(self, tournaments: Iterable[int]) -> dict[tuple[str, tuple[str, ...]], PayoffSums]:
        """The ``payoffs`` sums of the given tournaments, added up per (seller, lineup)."""
        ids = list(tournaments)
        if not ids:
            return {}
        rows = self.db.execute(
            "SELECT seller, buyers, SUM(episodes), SUM(seller_reward), SUM(buyer_reward), "
            f"SUM(seller_score) FROM payoffs WHERE tournament_id IN ({', '.join('?' * len(ids))}) "
            "GROUP BY seller, buyers",
            ids,
        )
        return {
            (seller, tuple(json.loads(buyers))): PayoffSums(int(n), *sums)
            for seller, buyers, n, *sums in rows
        }

    def rebuild_payoffs(self) -> None:
        """Recompute the ``payoffs`` sums from the episodes: after episodes were deleted by
        hand (``add_episodes`` keeps them current otherwise)."""
        with self.transaction():
            fill_payoffs(self.db)

    def done_keys(self, tournament_id: int) -> set[EpisodeKey]:
        """The keys of every episode stored for the tournament."""
        rows = self.db.execute(
            f"SELECT {KEY_COLUMNS} FROM episodes WHERE tournament_id = ?", [tournament_id]
        )
        return {stored_key(*row) for row in rows}

    def outcomes(self, tournament_id: int) -> dict[EpisodeKey, tuple[float, str]]:
        """(seller reward, outcome) of every stored episode of the tournament, by key: what a
        per-pairing summary needs, without decoding whole records."""
        rows = self.db.execute(
            f"SELECT {KEY_COLUMNS}, seller_reward, outcome FROM episodes WHERE tournament_id = ?",
            [tournament_id],
        )
        return {stored_key(*key): (reward, outcome) for *key, reward, outcome in rows}

    def episode_ids(self) -> dict[EpisodeKey, tuple[int, str]]:
        """(id, tournament name) of every stored episode by key: the first copy of a key, in the
        order :meth:`load_records` reads them; counterfactual replays are left out."""
        rows = self.db.execute(
            f"SELECT e.id, t.name, {KEY_COLUMNS} FROM episodes e JOIN tournaments t "
            "ON t.id = e.tournament_id WHERE e.parent_id IS NULL ORDER BY e.tournament_id, e.id"
        )
        ids: dict[EpisodeKey, tuple[int, str]] = {}
        for episode_id, name, *key in rows:
            ids.setdefault(stored_key(*key), (episode_id, name))
        return ids

    def load_records(
        self,
        tournament: int | str | None = None,
        seller: str | None = None,
        buyer: str | None = None,
        preset: str | None = None,
        env_version: str | None = None,
    ) -> list[EpisodeRecord]:
        """Stored episodes as records, turns included, ordered by key. Filters: tournament (id
        or name), seller spec, a buyer spec playing at least one slot, preset, env version.
        Without a tournament, counterfactual replays (``parent_id`` set) are left out: they are
        no matches of their players."""
        with self.snapshot():
            where, params = self._filters(tournament, seller, buyer, preset, env_version)
            episodes = self.db.execute(
                f"SELECT e.id, e.record FROM episodes e WHERE {where} ORDER BY e.tournament_id, "
                "e.env_version, e.seller, e.buyers, e.scenario_seed, e.scenario_index",
                params,
            ).fetchall()
            turns: dict[int, list[dict[str, Any]]] = {}
            rows = self.db.execute(
                f"SELECT t.episode_id, {', '.join('t.' + c for c in TURN_COLUMNS)} FROM turns t "
                f"JOIN episodes e ON e.id = t.episode_id WHERE {where} "
                "ORDER BY t.episode_id, t.idx",
                params,
            )
            for episode_id, *values in rows:
                turn = dict(zip(TURN_FIELDS, values, strict=True))
                turn["valid"] = bool(turn["valid"])
                turns.setdefault(episode_id, []).append(turn)
        records = []
        for episode_id, text in episodes:
            data = json.loads(text)
            data["result"]["turns"] = turns.get(episode_id, [])
            records.append(EpisodeRecord.from_dict(data))
        return records

    def _filters(
        self,
        tournament: int | str | None,
        seller: str | None,
        buyer: str | None,
        preset: str | None,
        env_version: str | None,
    ) -> tuple[str, list[Any]]:
        clauses, params = ["1"], []
        if isinstance(tournament, str):
            row = self.db.execute(
                "SELECT id FROM tournaments WHERE name = ?", [tournament]
            ).fetchone()
            if row is None:
                raise KeyError(f"no tournament named {tournament!r} in {self.path}")
            tournament = int(row[0])
        for column, value in (
            ("tournament_id", tournament),
            ("seller", seller),
            ("preset", preset),
            ("env_version", env_version),
        ):
            if value is not None:
                clauses.append(f"e.{column} = ?")
                params.append(value)
        if buyer is not None:
            clauses.append("EXISTS (SELECT 1 FROM json_each(e.buyers) WHERE value = ?)")
            params.append(buyer)
        if tournament is None:  # counterfactual replays count only when their tournament is named
            clauses.append("e.parent_id IS NULL")
        return " AND ".join(clauses), params


def load_records(
    db: str | Path | Store,
    tournament: int | str | None = None,
    seller: str | None = None,
    buyer: str | None = None,
    preset: str | None = None,
    env_version: str | None = None,
) -> list[EpisodeRecord]:
    """Stored episodes of the database at ``db`` (a path, opened read-only, or an open
    :class:`Store`)."""
    if isinstance(db, Store):
        return db.load_records(tournament, seller, buyer, preset, env_version)
    with Store.open(db, read_only=True) as store:
        return store.load_records(tournament, seller, buyer, preset, env_version)
