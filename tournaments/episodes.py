"""Stored episodes one at a time: list them with filters and open them by id.

``arena episodes`` lists (:func:`list_episodes`), ``arena replay`` opens episodes to replay
(:func:`load_episodes`, :func:`stored_market`), and the report's episode browser pages through
them. Everything reads the columns of the ``episodes`` table and the per-seat tokens of
``episode_usage``; only an opened episode decodes its record and turns.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from arena.config import MarketConfig
from arena.records import EpisodeRecord
from arena.settings import about
from tournaments.config import market_config
from tournaments.schema import TURN_COLUMNS, TURN_FIELDS
from tournaments.store import Store

OUTCOMES = ("deal", "no_deal", "violation", "error")
ORDERS = {
    "id": "e.id",
    "reward": "e.seller_reward, e.id",
    "-reward": "e.seller_reward DESC, e.id",
}


@dataclass(frozen=True)
class EpisodeFilter:
    """Which stored episodes to list or replay; every field left empty matches all."""

    tournament: str | None = field(default=None, metadata=about("Tournament name."))
    seller: str | None = field(default=None, metadata=about("Seller spec."))
    buyer: str | None = field(default=None, metadata=about("A buyer spec in any slot."))
    outcome: str | None = field(default=None, metadata=about("deal, no_deal, violation or error."))
    min_reward: float | None = field(default=None, metadata=about("Seller reward at least this."))
    max_reward: float | None = field(default=None, metadata=about("Seller reward at most this."))
    replays: bool = field(
        default=False, metadata=about("Include counterfactual replays (left out by default).")
    )
    order: str = field(default="id", metadata=about("id, reward or -reward (highest first)."))
    limit: int = field(default=50, metadata=about("Most episodes listed; 0: all."))

    def __post_init__(self) -> None:
        if self.outcome is not None and self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {', '.join(OUTCOMES)}; got {self.outcome!r}")
        if self.order not in ORDERS:
            raise ValueError(f"order must be one of {', '.join(ORDERS)}; got {self.order!r}")
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 0:
            raise ValueError(f"limit must be an integer >= 0 (0: all); got {self.limit!r}")

    @classmethod
    def parse(cls, text: str) -> EpisodeFilter:
        """A filter written as ``key=value`` words, e.g. ``"seller=scripted:satisficer
        outcome=no_deal"`` (specs never contain spaces); every matching episode unless it sets
        a ``limit``. Unknown keys are an error."""
        known = {f.name: f for f in fields(cls)}
        values: dict[str, Any] = {"limit": 0}
        for word in text.split():
            key, sep, value = word.partition("=")
            if not sep or key not in known:
                raise ValueError(f"episode filter {text!r}: {word!r} is not key=value with a key "
                                 f"among {', '.join(known)}")  # fmt: skip
            try:
                values[key] = _convert(key, value)
            except ValueError:
                raise ValueError(
                    f"episode filter {text!r}: bad value for {key}: {value!r}"
                ) from None
        return cls(**values)


def _convert(key: str, value: str) -> Any:
    if key in ("min_reward", "max_reward"):
        return float(value)
    if key == "limit":
        return int(value)
    if key == "replays":
        if value.lower() not in ("true", "false"):
            raise ValueError(value)
        return value.lower() == "true"
    return value


@dataclass(frozen=True)
class EpisodeRow:
    """One stored episode as a list shows it."""

    id: int
    tournament: str
    preset: str
    scenario_seed: int
    scenario_index: int
    seller: str
    buyers: tuple[str, ...]
    outcome: str
    termination: str
    deal_price: float | None
    deal_buyer: int | None
    """The closing buyer's number (1-based, as in ``buyer_1``), None without a deal."""
    seller_reward: float
    seller_turns: int
    tokens_in: int
    tokens_out: int
    parent_id: int | None
    from_turn: int | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


SELECT_ROWS = (
    "SELECT e.id, t.name, e.preset, e.scenario_seed, e.scenario_index, e.seller, e.buyers, "
    "e.outcome, e.termination, e.deal_price, e.deal_buyer, e.seller_reward, e.seller_turns, "
    "COALESCE(u.tokens_in, 0), COALESCE(u.tokens_out, 0), e.parent_id, e.from_turn "
    "FROM episodes e JOIN tournaments t ON t.id = e.tournament_id LEFT JOIN ("
    "SELECT episode_id, SUM(tokens_in) AS tokens_in, SUM(tokens_out) AS tokens_out "
    "FROM episode_usage GROUP BY episode_id) u ON u.episode_id = e.id"
)


def _row(values: Sequence[Any]) -> EpisodeRow:
    items = list(values)
    items[6] = tuple(json.loads(items[6]))
    items[10] = None if items[10] is None else items[10] + 1
    return EpisodeRow(*items)


def _where(store: Store, chosen: EpisodeFilter) -> tuple[str, list[Any]]:
    clauses, params = ["1"], []
    if chosen.tournament is not None:
        if (
            store.db.execute(
                "SELECT 1 FROM tournaments WHERE name = ?", [chosen.tournament]
            ).fetchone()
            is None
        ):
            raise KeyError(f"no tournament named {chosen.tournament!r} in {store.path}")
        clauses.append("t.name = ?")
        params.append(chosen.tournament)
    for column, value in (("seller", chosen.seller), ("outcome", chosen.outcome)):
        if value is not None:
            clauses.append(f"e.{column} = ?")
            params.append(value)
    if chosen.buyer is not None:
        clauses.append("EXISTS (SELECT 1 FROM json_each(e.buyers) WHERE value = ?)")
        params.append(chosen.buyer)
    if chosen.min_reward is not None:
        clauses.append("e.seller_reward >= ?")
        params.append(chosen.min_reward)
    if chosen.max_reward is not None:
        clauses.append("e.seller_reward <= ?")
        params.append(chosen.max_reward)
    if not chosen.replays:
        clauses.append("e.parent_id IS NULL")
    return " AND ".join(clauses), params


def list_episodes(store: Store, chosen: EpisodeFilter) -> tuple[list[EpisodeRow], int]:
    """The episodes ``chosen`` selects, in its order and up to its limit, and how many match
    in all."""
    where, params = _where(store, chosen)
    base = f"{SELECT_ROWS} WHERE {where}"
    total = store.db.execute(
        "SELECT COUNT(*) FROM episodes e JOIN tournaments t ON t.id = e.tournament_id "
        f"WHERE {where}",
        params,
    ).fetchone()[0]
    limit = f" LIMIT {int(chosen.limit)}" if chosen.limit else ""
    rows = store.db.execute(f"{base} ORDER BY {ORDERS[chosen.order]}{limit}", params)
    return [_row(r) for r in rows], int(total)


@dataclass(frozen=True)
class StoredEpisode:
    """An episode opened by id: its record (turns included) and where it is stored."""

    id: int
    tournament: str
    tournament_id: int
    record: EpisodeRecord
    parent_id: int | None
    from_turn: int | None


def load_episodes(store: Store, ids: Iterable[int]) -> list[StoredEpisode]:
    """The episodes with these ids, in the order given; an unknown id is a KeyError."""
    wanted = list(dict.fromkeys(int(i) for i in ids))
    if not wanted:
        return []
    marks = ", ".join("?" * len(wanted))
    rows = store.db.execute(
        "SELECT e.id, t.name, e.tournament_id, e.record, e.parent_id, e.from_turn FROM episodes e "
        f"JOIN tournaments t ON t.id = e.tournament_id WHERE e.id IN ({marks})",
        wanted,
    ).fetchall()
    missing = sorted(set(wanted) - {row[0] for row in rows})
    if missing:
        raise KeyError(f"no episode with id {', '.join(map(str, missing))} in {store.path}; "
                       "`arena episodes --db ...` lists them")  # fmt: skip
    turns: dict[int, list[dict[str, Any]]] = {}
    for episode_id, *values in store.db.execute(
        f"SELECT episode_id, {', '.join(TURN_COLUMNS)} FROM turns WHERE episode_id IN ({marks}) "
        "ORDER BY episode_id, idx",
        wanted,
    ):
        turn = dict(zip(TURN_FIELDS, values, strict=True))
        turn["valid"] = bool(turn["valid"])
        turns.setdefault(episode_id, []).append(turn)
    found = {}
    for episode_id, name, tournament_id, text, parent, from_turn in rows:
        data = json.loads(text)
        data["result"]["turns"] = turns.get(episode_id, [])
        record = EpisodeRecord.from_dict(data)
        found[episode_id] = StoredEpisode(
            episode_id, name, tournament_id, record, parent, from_turn
        )
    return [found[i] for i in wanted]


def load_episode(store: Store, episode_id: int) -> StoredEpisode:
    """One stored episode by id."""
    return load_episodes(store, [episode_id])[0]


def stored_market(store: Store, tournament_id: int) -> MarketConfig:
    """The market its episodes were played on: the stored tournament's preset and overrides."""
    row = store.db.execute(
        "SELECT name, config FROM tournaments WHERE id = ?", [tournament_id]
    ).fetchone()
    if row is None:
        raise KeyError(f"no tournament with id {tournament_id} in {store.path}")
    name, text = row
    config = json.loads(text)
    if "preset" not in config:
        raise ValueError(f"tournament {name!r} stores no market preset; its episodes cannot be "
                         "replayed")  # fmt: skip
    return market_config(config["preset"], config.get("market") or {}, f"tournament {name!r}")
