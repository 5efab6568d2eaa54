from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

import pytest

from agents.engine import play_vs_pool
from arena.buyer_metrics import episode_buyer_side_reward
from arena.catalog import load_catalog
from arena.config import get_preset
from arena.metrics import episode_cross_score
from arena.records import EpisodeRecord
from arena.scenarios import make_scenarios
from tournaments.store import Store, load_records

POOL = ["scripted:time", "scripted:tit-for-tat", "scripted:hardliner"]


def play(preset: str, seller: str, count: int, seed: int = 0, **overrides) -> list[EpisodeRecord]:
    config = get_preset(preset, overrides or None)
    scenarios = make_scenarios(config, load_catalog(), seed, count)
    return play_vs_pool(config, scenarios, seller, POOL)[0]


def by_key(records: list[EpisodeRecord]) -> dict:
    return {r.key: r for r in records}


@pytest.fixture
def store(tmp_path: Path):
    with Store.open(tmp_path / "results.db") as s:
        yield s


def test_records_written_then_loaded_equal_the_originals(store: Store) -> None:
    # Tiered and uniform budgets, regulated and free openings, one and two products, turns
    # kept and dropped: every shape of record must come back equal, field for field.
    originals = [
        *play("in-distribution", "scripted:prober", 12),
        *play("ood", "scripted:time?e=0.5", 6),
        *play("in-distribution", "scripted:satisficer", 6, num_products=2, stock=1),
    ]
    no_turns = [
        dataclasses.replace(
            r, seller="scripted:oracle", result=dataclasses.replace(r.result, turns=())
        )
        for r in originals[:3]
    ]
    tid = store.tournament_id("t", {"note": "round trip"})
    assert store.add_episodes(tid, originals + no_turns) == len(originals) + len(no_turns)

    loaded = store.load_records()
    assert len(loaded) == len(originals) + len(no_turns)
    assert by_key(loaded) == by_key(originals + no_turns)
    assert any(r.result.turns for r in loaded)
    assert {r.scenario.num_products for r in loaded} == {1, 2}


def test_episode_columns_hold_the_values_of_the_record(store: Store) -> None:
    record = next(r for r in play("in-distribution", "scripted:prober", 20) if r.result.deal)
    tid = store.tournament_id("t", {})
    store.add_episodes(tid, [record])
    row = next(iter(store.db.query("SELECT * FROM episodes")))
    deal = record.result.deal
    assert row["deal_price"] == deal.price and row["deal_buyer"] == deal.buyer
    assert row["cost"] == record.scenario.costs[0]
    assert row["list_price"] == record.scenario.list_prices[0]
    assert json.loads(row["budgets"]) == list(record.scenario.budgets)
    assert json.loads(row["buyers"]) == list(record.buyers)
    assert row["engaged_count"] == sum(record.result.engaged)
    assert row["num_turns"] == len(record.result.turns)
    turns = list(store.db.query("SELECT * FROM turns ORDER BY idx"))
    assert [t["text"] for t in turns] == [t.text for t in record.result.turns]
    assert [t["to_agent"] for t in turns] == [t.to for t in record.result.turns]


def test_load_records_filters_by_tournament_seller_and_buyer(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    prober = play("in-distribution", "scripted:prober", 8)
    time_seller = play("in-distribution", "scripted:time", 8)
    with Store.open(path) as store:
        first = store.tournament_id("first", {})
        second = store.tournament_id("second", {})
        store.add_episodes(first, prober + time_seller)
        store.add_episodes(second, prober)

    assert len(load_records(path)) == 24
    assert by_key(load_records(path, tournament="first")) == by_key(prober + time_seller)
    assert by_key(load_records(path, tournament=second, seller="scripted:prober")) == by_key(prober)
    hardliner = [r for r in prober if "scripted:hardliner" in r.buyers]
    assert 0 < len(hardliner) < len(prober)
    found = load_records(path, tournament="second", buyer="scripted:hardliner")
    assert by_key(found) == by_key(hardliner)
    with pytest.raises(KeyError, match="no tournament named 'third'"):
        load_records(path, tournament="third")


def test_storing_a_key_twice_is_refused_and_the_whole_batch_is_rolled_back(store: Store) -> None:
    records = play("in-distribution", "scripted:prober", 4)
    tid = store.tournament_id("t", {})
    store.add_episodes(tid, records[:2])
    turns_before = store.db.execute("SELECT COUNT(*) FROM turns").fetchone()[0]

    with pytest.raises(ValueError, match="already stored"):
        store.add_episodes(tid, [records[2], records[0]])

    assert store.db.execute("SELECT COUNT(*) FROM episodes").fetchone()[0] == 2
    assert store.db.execute("SELECT COUNT(*) FROM turns").fetchone()[0] == turns_before
    assert store.done_keys(tid) == {r.key for r in records[:2]}


def test_the_same_episode_may_be_stored_once_per_tournament(store: Store) -> None:
    records = play("in-distribution", "scripted:prober", 3)
    a, b = store.tournament_id("a", {}), store.tournament_id("b", {})
    store.add_episodes(a, records)
    store.add_episodes(b, records)
    assert store.done_keys(a) == store.done_keys(b) == {r.key for r in records}


def test_database_is_in_wal_mode(tmp_path: Path) -> None:
    Store.open(tmp_path / "results.db").close()
    conn = sqlite3.connect(tmp_path / "results.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_a_database_written_by_newer_code_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    with Store.open(path) as store, store.transaction():
        store.db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(ValueError, match="schema version 99, newer than"):
        Store.open(path)


def test_tournament_id_fetches_the_stored_one_and_refuses_a_changed_config(store: Store) -> None:
    config = {"preset": "in-distribution", "sellers": ("scripted:prober",), "episodes": 8}
    first = store.tournament_id("league", config)
    assert store.tournament_id("league", dict(config)) == first
    assert store.tournament_id("other", config) != first
    with pytest.raises(ValueError, match=r"differs in: episodes"):
        store.tournament_id("league", {**config, "episodes": 16})


def test_register_agent_returns_one_id_per_spec_and_role(store: Store) -> None:
    seller = store.register_agent("hf:/ckpt/gen1", "seller")
    assert store.register_agent("hf:/ckpt/gen1", "seller") == seller
    assert store.register_agent("hf:/ckpt/gen1", "buyer") != seller
    child = store.register_agent(
        "hf:/ckpt/gen2", "seller", label="gen2", parent=seller, generation=2, config_hash="ab12"
    )
    row = store.agent(child)
    assert (row["label"], row["parent"], row["generation"], row["config_hash"]) == (
        "gen2",
        seller,
        2,
        "ab12",
    )
    with pytest.raises(ValueError, match="unknown lineage field"):
        store.register_agent("hf:/ckpt/gen2", "seller", epoch=1)
    with pytest.raises(ValueError, match="role must be one of"):
        store.register_agent("hf:/ckpt/gen2", "referee")


def test_payoffs_sum_each_lineups_counted_episodes_as_they_are_stored(store: Store) -> None:
    records = play("in-distribution", "scripted:prober", 10)
    errored = dataclasses.replace(
        records[0], result=dataclasses.replace(records[0].result, outcome="error")
    )
    errored = dataclasses.replace(errored, seller="scripted:oracle")
    tid = store.tournament_id("t", {})
    store.add_episodes(tid, records[:4])
    store.add_episodes(tid, [*records[4:], errored])
    payoffs = store.payoffs([tid])
    assert ("scripted:oracle", errored.buyers) not in payoffs  # errors count for nothing
    for (seller, lineup), cell in payoffs.items():
        mine = [r for r in records if (r.seller, r.buyers) == (seller, lineup)]
        assert cell.episodes == len(mine) > 0
        assert cell.seller_reward == pytest.approx(sum(r.result.seller_reward for r in mine))
        assert cell.buyer_reward == pytest.approx(sum(episode_buyer_side_reward(r) for r in mine))
        assert cell.seller_score == pytest.approx(sum(episode_cross_score(r) for r in mine))
    assert sum(c.episodes for c in payoffs.values()) == 10
