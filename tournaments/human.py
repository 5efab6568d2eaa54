"""Games with a person in a seat (``arena play --seller human``, ``--buyer human``) and their
storage, so that ratings count a person like any other agent.

The person plays the seller, or buyer slot 1 (``buyer_1``). A person seller meets the lineup
the buyer specs draw on the scenario, as in ``arena eval``. A person buyer sits in slot 1 and
the other slots draw from the remaining buyer specs (``--buyer human,scripted:tit-for-tat``;
``scripted:time`` when none is given).

A stored game goes to a tournament named after its matchup, ``play: <seller> vs <buyers>
(<preset>)``, whose config lists the seller and, for a person seller, the buyer entry: the
ratings then compare the person with every seller that met the same lineup on the same
scenario (same preset, seed and index). Another scenario is another game: ``--seed`` and
``--index`` pick it, and the same one stored twice is refused.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from agents import check_spec, make_agent
from agents.driver import Episode, Responder, buyer_lineup
from agents.engine import drive_episodes
from agents.human import HumanAgent, is_human
from arena.catalog import load_catalog, split_catalog
from arena.records import ENV_VERSION, EpisodeKey, EpisodeRecord
from arena.scenarios import make_scenario
from tournaments.config import pool_label
from tournaments.evaluate import EvalConfig
from tournaments.store import Store

DEFAULT_BUYER = "scripted:time"


def human_lineup(config: EvalConfig, scenario_index: int) -> tuple[str, tuple[str, ...]]:
    """(seller spec, buyer spec of every slot) of a game with one person in it."""
    market = config.market()
    scenario = make_scenario(market, _catalog(config), config.seed, scenario_index)
    people = [s for s in (config.seller, *config.buyers) if is_human(s)]
    if len(people) != 1:
        raise ValueError(f"a game has one person in it; got {len(people)} human specs")
    if is_human(config.seller):
        pool = config.buyers
        return config.seller, buyer_lineup(scenario, pool)
    person, *rest = config.buyers
    if not is_human(person):
        raise ValueError("a person buyer takes buyer slot 1: give human first in --buyer")
    others = buyer_lineup(scenario, rest or [DEFAULT_BUYER])[1:]
    return config.seller, (person, *others)


def _catalog(config: EvalConfig):  # -> list[Product]
    return split_catalog(load_catalog(config.catalog), config.split)


def play_human_game(config: EvalConfig, scenario_index: int, person: HumanAgent) -> EpisodeRecord:
    """Play scenario ``scenario_index`` of ``config.seed`` with ``person`` in the human seat
    (its spec ``human:<name>``, see :func:`agents.human.human_spec`); the other seats are the
    config's agents, LLM agents included."""
    if scenario_index < 0:
        raise ValueError(f"the scenario index must be >= 0; got {scenario_index}")
    seller, buyers = human_lineup(config, scenario_index)
    market = config.market()
    scenario = make_scenario(market, _catalog(config), config.seed, scenario_index)
    responders: list[Responder] = []
    for slot, spec in enumerate((seller, *buyers)):
        role = "seller" if slot == 0 else "buyer"
        if is_human(spec):
            responders.append(person)
        else:
            check_spec(spec, role, "--seller" if slot == 0 else "--buyer")
            responders.append(make_agent(spec, role))
    (record,), _ = drive_episodes(1, lambda _: Episode(market, scenario, responders))
    return record


def human_tournament(config: EvalConfig, seller: str, buyers: tuple[str, ...]) -> tuple[str, dict]:
    """(name, config) of the tournament that stores a game (module docstring)."""
    person_sells = is_human(seller)
    entry = list(config.buyers)
    setting = {
        "preset": config.preset,
        "market": dict(config.overrides),
        "catalog": config.catalog,
        "split": config.split,
    }
    tournament = {
        "sellers": [seller],
        "buyers": [entry] if person_sells else [],
        "lineup": None if person_sells else list(buyers),
        **setting,
    }
    label = pool_label(entry) if person_sells else ", ".join(buyers)
    name = f"play: {seller} vs {label} ({config.preset})"
    if setting["market"] or setting["catalog"] or setting["split"] != "all":
        digest = hashlib.sha256(json.dumps(setting, sort_keys=True).encode()).hexdigest()
        name += f" #{digest[:8]}"
    return name, tournament


def check_new_game(db: str | Path, config: EvalConfig, scenario_index: int) -> None:
    """Before a person plays: the database's folder exists and this game is not stored yet,
    so nobody plays a game that cannot be kept."""
    path = Path(db)
    if not path.parent.is_dir():
        raise FileNotFoundError(f"folder {path.parent} of database {path} does not exist")
    if not path.is_file():
        return
    seller, buyers = human_lineup(config, scenario_index)
    name, _ = human_tournament(config, seller, buyers)
    market = config.market()
    key = EpisodeKey(ENV_VERSION, market.name, seller, buyers, config.seed, scenario_index,
                     market.rewards)  # fmt: skip
    with Store.open(path) as store:
        row = store.db.execute("SELECT id FROM tournaments WHERE name = ?", [name]).fetchone()
        if row is not None and key in store.done_keys(int(row[0])):
            raise ValueError(f"this game (seed {config.seed}, index {scenario_index}) is already "
                             f"stored in {path}; play another --index or --seed")  # fmt: skip


def store_human_game(db: str | Path, config: EvalConfig, record: EpisodeRecord) -> int:
    """Store a game (module docstring); returns the episode's id."""
    name, tournament = human_tournament(config, record.seller, record.buyers)
    with Store.open(db) as store:
        tournament_id = store.tournament_id(name, tournament)
        store.register_agent(record.seller, "seller")
        for spec in sorted(set(record.buyers)):
            store.register_agent(spec, "buyer")
        try:
            store.add_episodes(tournament_id, [record])
        except ValueError:
            sc = record.scenario
            raise ValueError(f"this game (seed {sc.seed}, index {sc.index}) is already stored "
                             f"in {db}; play another --index or --seed") from None  # fmt: skip
        row = store.db.execute(
            "SELECT MAX(id) FROM episodes WHERE tournament_id = ?", [tournament_id]
        ).fetchone()
    return int(row[0])
