"""Stored episodes one at a time: lists with filters and totals, opening by id, the stored
market of a tournament."""

from __future__ import annotations

from pathlib import Path

import pytest

from tournaments.config import TournamentConfig
from tournaments.episodes import (
    EpisodeFilter,
    list_episodes,
    load_episode,
    load_episodes,
    stored_market,
)
from tournaments.runner import run_tournament
from tournaments.store import Store, load_records

SELLERS = ("scripted:satisficer", "scripted:prober")
BUYERS = (("scripted:time",), ("scripted:time", "scripted:tit-for-tat"))


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("episodes") / "demo.db"
    run_tournament(TournamentConfig("demo", SELLERS, BUYERS, episodes=16), path, progress=False)
    short = TournamentConfig(
        "short", ("scripted:time",), (("scripted:time",),), market={"total_turns": 4}, episodes=4
    )
    run_tournament(short, path, progress=False)
    return path


@pytest.fixture
def store(db: Path):
    with Store.open(db) as opened:
        yield opened


def test_filters_select_what_load_records_selects_and_the_total_counts_them_all(store) -> None:
    records = load_records(store, tournament="demo", seller="scripted:satisficer")
    rows, total = list_episodes(store, EpisodeFilter("demo", "scripted:satisficer", limit=0))
    assert total == len(rows) == len(records)
    assert sorted(r.seller_reward for r in rows) == sorted(r.result.seller_reward for r in records)
    deals, deal_total = list_episodes(store, EpisodeFilter(outcome="deal", limit=5))
    assert len(deals) == 5 < deal_total
    assert all(r.outcome == "deal" and r.deal_price is not None for r in deals)
    assert all(1 <= r.deal_buyer <= 3 for r in deals)
    tft, _ = list_episodes(store, EpisodeFilter(buyer="scripted:tit-for-tat", limit=0))
    assert tft and all("scripted:tit-for-tat" in r.buyers for r in tft)
    best, _ = list_episodes(store, EpisodeFilter(order="-reward", limit=0))
    assert [r.seller_reward for r in best] == sorted((r.seller_reward for r in best), reverse=True)
    low, _ = list_episodes(store, EpisodeFilter(max_reward=0.0, limit=0))
    assert all(r.seller_reward <= 0.0 for r in low)
    assert {r.tournament for r in list_episodes(store, EpisodeFilter(limit=0))[0]} == {
        "demo",
        "short",
    }


def test_an_episode_opened_by_id_is_the_stored_record_with_its_turns(store) -> None:
    rows, _ = list_episodes(store, EpisodeFilter("demo", order="-reward", limit=3))
    opened = load_episodes(store, [rows[2].id, rows[0].id])
    assert [e.id for e in opened] == [rows[2].id, rows[0].id]
    by_key = {r.key: r for r in load_records(store, tournament="demo")}
    for episode in opened:
        assert episode.tournament == "demo" and episode.parent_id is None
        assert episode.record == by_key[episode.record.key]
        assert episode.record.result.turns
    with pytest.raises(KeyError, match="no episode with id 999999"):
        load_episode(store, 999999)


def test_the_stored_market_is_the_tournaments_preset_with_its_overrides(store) -> None:
    (row,), _ = list_episodes(store, EpisodeFilter("short", limit=1))
    episode = load_episode(store, row.id)
    market = stored_market(store, episode.tournament_id)
    assert (market.name, market.total_turns) == ("in-distribution", 4)
    assert episode.record.result.seller_turns <= 4


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("seller", "not key=value"),
        ("colour=red", "not key=value"),
        ("max_reward=lots", "bad value for max_reward"),
        ("outcome=won", "outcome must be one of"),
        ("order=price", "order must be one of"),
    ],
)
def test_a_bad_filter_is_refused_with_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EpisodeFilter.parse(text)


def test_a_written_filter_reads_specs_with_parameters_and_selects_all_by_default() -> None:
    chosen = EpisodeFilter.parse("seller=scripted:time?e=0.3 outcome=no_deal max_reward=0")
    assert (chosen.seller, chosen.outcome, chosen.max_reward) == (
        "scripted:time?e=0.3",
        "no_deal",
        0.0,
    )
    assert chosen.limit == 0 and EpisodeFilter.parse("limit=7").limit == 7
    with Store.open(":memory:") as store, pytest.raises(KeyError, match="named 'nope'"):
        list_episodes(store, EpisodeFilter("nope"))
