"""Counterfactual replays of stored episodes: exact prefixes, the stored market, linked storage
kept out of ratings, and the paired summary."""

from __future__ import annotations

import dataclasses
import math
import shutil
from pathlib import Path

import pytest

from agents.counterfactual import prefix_length
from tournaments.config import TournamentConfig
from tournaments.episodes import EpisodeFilter, list_episodes, load_episode
from tournaments.replay import (
    Takeover,
    paired_summary,
    parse_buyer_takeover,
    replay,
    replayable,
    seat_reward,
    select,
    store_counterfactuals,
)
from tournaments.runner import run_tournament
from tournaments.store import Store, load_records

PROBER = Takeover(3, seller="scripted:prober")


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("replay") / "demo.db"
    config = TournamentConfig(
        "demo", ("scripted:satisficer", "scripted:prober"), (("scripted:time",),), episodes=24
    )
    run_tournament(config, path, progress=False)
    short = TournamentConfig(
        "short", ("scripted:satisficer",), (("scripted:time",),), market={"total_turns": 5},
        episodes=6,
    )  # fmt: skip
    run_tournament(short, path, progress=False)
    return path


@pytest.fixture
def store(source: Path, tmp_path: Path):
    copy = tmp_path / "demo.db"
    shutil.copyfile(source, copy)
    with Store.open(copy) as opened:
        yield opened


def a_long_satisficer_episode(store: Store, tournament: str = "demo") -> int:
    chosen = EpisodeFilter(tournament, "scripted:satisficer", outcome="no_deal", limit=1)
    (row,), _ = list_episodes(store, chosen)
    assert row.seller_turns > 3
    return row.id


def test_a_stored_satisficer_episode_taken_over_by_prober_after_turn_3(store: Store) -> None:
    parent = load_episode(store, a_long_satisficer_episode(store))
    (item,) = replay(store, [parent], PROBER)
    until = prefix_length(parent.record.result.turns, 3)
    assert item.replayed == until and item.mismatches == 0
    assert [t.text for t in item.record.result.turns[:until]] == [
        t.text for t in parent.record.result.turns[:until]
    ]
    assert item.record.seller == "scripted:prober"
    assert item.record.scenario == parent.record.scenario
    assert item.difference == item.record.result.seller_reward - parent.record.result.seller_reward

    (stored,), new = store_counterfactuals(store, [item])
    assert new == 1
    reopened = load_episode(store, stored.stored_id)
    assert (reopened.parent_id, reopened.from_turn) == (parent.id, 3)
    assert reopened.tournament == "replays of demo"
    assert reopened.record == item.record
    # A replay is no match of its players: ratings and reports leave it out unless asked.
    assert all(r.seller == "scripted:satisficer" or r.seller == "scripted:prober"
               for r in load_records(store))  # fmt: skip
    assert len(load_records(store)) == 24 * 2 + 6
    assert load_records(store, tournament="replays of demo") == [item.record]
    listed, _ = list_episodes(store, EpisodeFilter(replays=True, order="-reward", limit=0))
    assert any(r.id == stored.stored_id and r.parent_id == parent.id for r in listed)
    # The same replay again keeps the first copy.
    (again,), new = store_counterfactuals(store, [item])
    assert (again.stored_id, new) == (stored.stored_id, 0)


def test_a_replay_plays_on_the_market_its_tournament_stored(store: Store) -> None:
    parent = load_episode(store, a_long_satisficer_episode(store, "short"))
    (item,) = replay(store, [parent], PROBER)
    assert item.record.result.seller_turns <= 5 < 8  # the preset's default is 8


def test_many_replays_report_the_mean_difference_with_a_paired_interval(store: Store) -> None:
    chosen = select(store, EpisodeFilter.parse("tournament=demo seller=scripted:satisficer"))
    ready = replayable(chosen, 3)
    assert 0 < len(ready) < len(chosen) == 24  # short episodes have no turn 4
    items = replay(store, ready, PROBER)
    summary = paired_summary(items, skipped=len(chosen) - len(ready))
    diffs = [seat_reward(i.record, "seller") - seat_reward(i.parent.record, "seller")
             for i in items]  # fmt: skip
    mean = sum(diffs) / len(diffs)
    se = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1) / len(diffs))
    assert summary["difference"] == pytest.approx(mean)
    assert summary["difference_se"] == pytest.approx(se)
    assert summary["ci95"] == pytest.approx([mean - 1.96 * se, mean + 1.96 * se], abs=1e-3)
    assert summary["episodes"] == len(items) and summary["skipped"] == len(chosen) - len(ready)
    assert sum(summary["original_outcomes"].values()) == len(items)
    assert summary["counterfactual_reward"] - summary["original_reward"] == pytest.approx(mean)
    assert summary["mismatches"] == 0


def test_a_buyer_takeover_compares_that_buyers_reward(store: Store) -> None:
    parent = load_episode(store, a_long_satisficer_episode(store))
    takeover = Takeover(1, buyers=(parse_buyer_takeover("2=scripted:hardliner"),))
    (item,) = replay(store, [parent], takeover)
    assert takeover.seat == "buyer_2"
    assert item.record.buyers[1] == "scripted:hardliner"
    assert item.record.buyers[0] == parent.record.buyers[0]
    assert paired_summary([item])["seat"] == "buyer_2"
    assert item.difference == (
        item.record.result.buyer_rewards[1] - parent.record.result.buyer_rewards[1]
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"from_turn": 2}, "name a new agent"),
        ({"from_turn": -1, "seller": "scripted:prober"}, ">= 0"),
        ({"from_turn": 1, "buyers": ((0, "scripted:time"),)}, "distinct and >= 1"),
        ({"from_turn": 1, "seller": "scripted:nobody"}, "--seller"),
    ],
)
def test_a_bad_takeover_is_refused_with_what_is_wrong(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Takeover(**kwargs)
    with pytest.raises(ValueError, match="NUMBER=SPEC"):
        parse_buyer_takeover("scripted:time")


def test_an_episode_stored_without_messages_cannot_be_replayed(store: Store) -> None:
    parent = load_episode(store, a_long_satisficer_episode(store))
    bare = dataclasses.replace(
        parent,
        record=dataclasses.replace(
            parent.record, result=dataclasses.replace(parent.record.result, turns=())
        ),
    )
    assert replayable([bare], 3) == []
    with pytest.raises(ValueError, match="without its messages"):
        replay(store, [bare], PROBER)
