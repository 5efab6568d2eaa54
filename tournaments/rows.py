"""An episode as rows of the results database, built where it was played.

A worker process encodes its episodes (:func:`encode_episode`) so that the process writing the
database (:class:`tournaments.store.Store`) only runs SQL. The columns are those of
:mod:`tournaments.schema`.
"""

from __future__ import annotations

import dataclasses
import json
import operator
from typing import Any, NamedTuple

from arena.records import EpisodeKey, EpisodeRecord
from tournaments.schema import EPISODE_COLUMNS, TURN_FIELDS, payoff, usage_rows

_turn_values = operator.attrgetter(*TURN_FIELDS)
"""A TurnRecord's values in ``TURN_COLUMNS`` order (SQLite stores the bool as 0/1)."""


class EncodedEpisode(NamedTuple):
    """An episode turned into rows, ready to insert. Built where the episode was played (a
    worker process), so the process that writes the database only runs SQL."""

    key: EpisodeKey
    row: tuple[Any, ...]
    """Values of ``EPISODE_COLUMNS``, in that order."""
    turns: list[tuple[Any, ...]]
    """Values of ``TURN_COLUMNS``, one tuple per message."""
    payoff: tuple[float, float, float] | None
    """What the episode adds to its lineup's ``payoffs`` sums (None for an error episode)."""
    usage: tuple[tuple[str, str, int, int], ...] = ()
    """Its ``episode_usage`` rows: (seat, agent, tokens in, tokens out) per seat that used a
    model (:func:`tournaments.schema.usage_rows`)."""


def _fields(value: Any) -> dict[str, Any]:
    """One level of a dataclass as a dict; the JSON encoder recurses (and writes tuples as
    lists) itself, which is several times faster than ``dataclasses.asdict``."""
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        raise TypeError(f"cannot store {type(value).__name__} {value!r} as JSON")
    return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}


_json = json.JSONEncoder(separators=(",", ":"), default=_fields).encode
"""Compact JSON of plain values, tuples and dataclasses (one encoder, built once)."""


def encode_episode(record: EpisodeRecord) -> EncodedEpisode:
    """The episode row and turn rows of ``record``; the turns are stored once, in ``turns``."""
    sc, res = record.scenario, record.result
    result = {f.name: getattr(res, f.name) for f in dataclasses.fields(res) if f.name != "turns"}
    full = {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}
    full["result"] = result
    deal = res.deal
    values = {
        "env_version": record.env_version,
        "preset": record.preset,
        "scenario_seed": sc.seed,
        "scenario_index": sc.index,
        "episode_seed": sc.episode_seed,
        "seller": record.seller,
        "buyers": _json(record.buyers),
        "product_ids": _json([p.id for p in sc.products]),
        "cost": sc.products[0].cost,
        "list_price": sc.products[0].list_price,
        "budgets": _json(sc.budgets),
        "outcome": res.outcome,
        "termination": res.termination,
        "deal_price": None if deal is None else deal.price,
        "deal_buyer": None if deal is None else deal.buyer,
        "deal_product": None if deal is None else deal.product,
        "seller_reward": res.seller_reward,
        "buyer_rewards": _json(res.buyer_rewards),
        "violation": res.violation,
        "violation_by": res.violation_by,
        "engaged_count": sum(res.engaged),
        "first_bids": _json(res.first_bids),
        "seller_turns": res.seller_turns,
        "num_turns": len(res.turns),
        "record": _json(full),
        "seller_reward_name": record.rewards.seller,
        "buyer_reward_name": record.rewards.buyer,
    }
    row = tuple(values[c] for c in EPISODE_COLUMNS)
    turns = [_turn_values(t) for t in res.turns]
    counted = res.outcome != "error"
    return EncodedEpisode(
        record.key, row, turns, payoff(record) if counted else None, usage_rows(record)
    )
