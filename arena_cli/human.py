"""``arena play --seller human`` / ``--buyer human``: a person plays one seat in the terminal.

The person reads what an LLM agent in the seat would read and types moves in the protocol's
lines, each ended by an empty line; piped input works the same (``printf '...\\n\\n' | arena
play --seller human``). The game ends with an outcome line; with ``--db`` it is stored under
``human:<name>`` (:mod:`tournaments.human`).
"""

from __future__ import annotations

import dataclasses
import getpass
import sys
from pathlib import Path
from typing import TextIO

from rich.console import Console
from rich.rule import Rule

from agents.human import HumanAgent, MoveReader, human_spec, is_human
from arena.money import format_price
from arena.records import EpisodeRecord
from arena.seats import SELLER, buyer_seat
from tournaments.evaluate import EvalConfig
from tournaments.human import check_new_game, play_human_game, store_human_game

HOW_TO = (
    "Your move: the lines Thought / Target / Talk / Action (Product too with several products), "
    "as in the format above, then an empty line."
)


def named(config: EvalConfig) -> EvalConfig:
    """The config with its ``human`` spec named ``human:<name>`` (default: the login name)."""
    try:
        default = getpass.getuser()
    except (KeyError, OSError):
        default = "anonymous"
    if is_human(config.seller):
        return dataclasses.replace(config, seller=human_spec(config.seller, default))
    buyers = tuple(human_spec(b, default) if is_human(b) else b for b in config.buyers)
    return dataclasses.replace(config, buyers=buyers)


def outcome_line(record: EpisodeRecord, seat: str) -> str:
    res = record.result
    deals = ", ".join(f"{buyer_seat(d.buyer)} at {format_price(d.price)}" for d in res.deals)
    reward = res.seller_reward if seat == SELLER else res.buyer_rewards[0]
    line = f"outcome: {res.outcome} ({res.termination}); deal: {deals or 'none'}"
    if res.violation:
        line += f"; violation by {res.violation_by}: {res.violation} ({res.violation_reason})"
    return line + f"; your reward ({seat}): {reward:+.3f}"


def hidden_values(record: EpisodeRecord) -> str:
    """What each side kept to itself, shown once the game is over."""
    sc = record.scenario
    costs = ", ".join(format_price(c) for c in sc.costs)
    budgets = "; ".join(
        f"{buyer_seat(i)} ({spec}) {', '.join(format_price(v) for v in values)}"
        for i, (spec, values) in enumerate(zip(record.buyers, sc.valuations, strict=True))
    )
    return f"hidden values: seller cost {costs}; budgets: {budgets}"


def play_human(
    config: EvalConfig,
    index: int,
    db: Path | None,
    stream: TextIO | None = None,
    console: Console | None = None,
) -> EpisodeRecord:
    """Play one game with the person reading ``stream`` (stdin) and seeing ``console``."""
    out = console or Console(highlight=False)
    config = named(config)
    spec = config.seller if is_human(config.seller) else config.buyers[0]
    seat = SELLER if is_human(config.seller) else buyer_seat(0)

    def show(text: str) -> None:
        out.print(Rule(f"{spec} ({seat})"))
        out.print(text, markup=False, highlight=False)

    def read() -> str:
        out.print(HOW_TO, markup=False, style="dim")
        return reader()

    if db is not None:
        check_new_game(db, config, index)
    reader = MoveReader(stream or sys.stdin)
    person = HumanAgent(spec, read, show)
    record = play_human_game(config, index, person)
    out.print(Rule("game over"))
    if person.input_ended:
        out.print(f"the input ended after {reader.moves} move(s): you quit", markup=False)
    out.print(outcome_line(record, seat), markup=False)
    out.print(hidden_values(record), markup=False)
    if db is not None:
        episode_id = store_human_game(db, config, record)
        out.print(f"stored as episode {episode_id} in {db} (`arena ratings --db {db}`)",
                  markup=False)  # fmt: skip
    return record
