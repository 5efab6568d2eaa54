from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from rich.console import Console

from agents.engine import play_vs_pool
from arena import metrics
from arena.buyer_metrics import episode_buyer_side_reward
from arena.catalog import default_catalog
from arena.config import get_preset
from arena.metrics import episode_cross_score
from arena.records import EpisodeRecord
from arena.scenarios import Scenario, make_scenarios
from tests.tournaments.episodes import ENTRIES, POOL, TFT, TIME, hand_made_base, made
from tournaments.config import TournamentConfig
from tournaments.leaderboard import (
    add_names,
    comparisons,
    distinct_episodes,
    leaderboard,
    payoff_matrix,
    ratings_over_time,
    render_table,
    stored_buyer_entries,
    stored_names,
)
from tournaments.ratings import RatingConfig
from tournaments.runner import run_tournament
from tournaments.store import Store, load_records

SELLERS = ["scripted:satisficer", "scripted:prober", "scripted:time?e=0.3"]
NO_BOOTSTRAP = RatingConfig(bootstrap_rounds=0)


def play_tournament(
    sellers: list[str], episodes: int
) -> tuple[list[EpisodeRecord], dict[tuple[str, str], list[EpisodeRecord]]]:
    """Every seller against every entry with play_vs_pool; returns all records (a lineup that
    two entries share is played twice, as separate play_vs_pool calls do) and each pairing's."""
    config = get_preset("in-distribution")
    scenarios = make_scenarios(config, default_catalog(), 0, episodes)
    pairings = {
        (seller, "|".join(pool)): play_vs_pool(
            config, scenarios, seller, list(pool), keep_turns=False
        )[0]
        for seller in sellers
        for pool in ENTRIES
    }
    return [r for recs in pairings.values() for r in recs], pairings


@pytest.fixture(scope="module")
def tournament() -> tuple[list[EpisodeRecord], dict[tuple[str, str], list[EpisodeRecord]]]:
    return play_tournament(SELLERS, 128)


@pytest.fixture(scope="module")
def aliases() -> list[EpisodeRecord]:
    records, _ = play_tournament(["scripted:satisficer", "scripted:greedy", "scripted:prober"], 64)
    return records


def by_agent(rows: list[dict]) -> dict[str, dict]:
    return {row["agent"]: row for row in rows}


# Ratings on a scripted tournament


def test_prober_ranks_above_satisficer_with_non_overlapping_intervals(tournament) -> None:
    records, _ = tournament
    rows = leaderboard(records, "seller", buyer_entries=ENTRIES)
    assert [row["role"] for row in rows] == ["seller"] * 3
    assert rows[0]["agent"] == "scripted:prober"
    board = by_agent(rows)
    prober, satisficer = board["scripted:prober"], board["scripted:satisficer"]
    assert prober["rating"] > satisficer["rating"]
    assert prober["ci_low"] > satisficer["ci_high"]
    assert prober["elo"] > satisficer["elo"]
    for row in rows:
        assert row["ci_low"] <= row["rating"] <= row["ci_high"]
    # The first scripted seller is the anchor, pinned at the initial rating by default ...
    assert (
        board["scripted:satisficer"]["rating"] == 1000.0 and board["scripted:satisficer"]["anchor"]
    )
    assert [row["anchor"] for row in rows].count(True) == 1
    # ... without an anchor the ratings are centred on it instead; differences are the same.
    centred = by_agent(leaderboard(records, "seller", buyer_entries=ENTRIES, anchor=None))
    assert math.fsum(r["rating"] for r in centred.values()) / 3 == pytest.approx(1000.0, abs=1e-6)
    assert not any(r["anchor"] for r in centred.values())
    gap = prober["rating"] - satisficer["rating"]
    centred_gap = centred["scripted:prober"]["rating"] - centred["scripted:satisficer"]["rating"]
    assert gap == pytest.approx(centred_gap, abs=1e-6)


def test_a_seller_joining_later_leaves_the_anchor_where_it_was(tournament) -> None:
    records, _ = tournament
    first_two = [r for r in records if r.seller != SELLERS[2]]
    before = by_agent(leaderboard(first_two, "seller", NO_BOOTSTRAP, ENTRIES))
    after = by_agent(leaderboard(records, "seller", NO_BOOTSTRAP, ENTRIES))
    assert before[SELLERS[0]]["rating"] == after[SELLERS[0]]["rating"] == 1000.0
    named = by_agent(leaderboard(records, "seller", NO_BOOTSTRAP, ENTRIES, anchor=SELLERS[1]))
    assert named[SELLERS[1]]["rating"] == 1000.0 and named[SELLERS[1]]["anchor"]
    with pytest.raises(ValueError, match="anchor 'seller:scripted:hardliner' is not among"):
        leaderboard(records, "seller", NO_BOOTSTRAP, ENTRIES, anchor="scripted:hardliner")
    buyers = by_agent(leaderboard(records, "buyer", NO_BOOTSTRAP, ENTRIES))
    assert buyers[TIME]["rating"] == 1000.0  # the first all-scripted entry
    cross = leaderboard(records, "cross", NO_BOOTSTRAP, ENTRIES)
    assert [(r["role"], r["agent"]) for r in cross if r["anchor"]] == [("seller", SELLERS[0])]


def test_seller_games_count_every_other_seller_on_every_distinct_lineup(tournament) -> None:
    records, _ = tournament
    groups = {(r.scenario.index, r.buyers) for r in records}
    rows = leaderboard(records, "seller", NO_BOOTSTRAP, ENTRIES)
    for row in rows:
        assert row["games"] == 2 * len(groups)
        assert row["episodes"] == len(groups)
    assert len(comparisons(records, "seller", ENTRIES)) == 3 * len(groups)


def test_seller_rows_carry_the_papers_metrics_over_distinct_episodes(tournament) -> None:
    records, _ = tournament
    row = by_agent(leaderboard(records, "seller", NO_BOOTSTRAP, ENTRIES))["scripted:prober"]
    own = [r for r in distinct_episodes(records) if r.seller == "scripted:prober"]
    assert row["reward"] == metrics.METRICS["reward"].over(own).mean
    assert row["deal_rate"] == metrics.METRICS["deal_rate"].over(own).mean
    assert (
        row["surplus_extraction_ratio"]
        == metrics.METRICS["surplus_extraction_ratio"].over(own).mean
    )
    assert row["deal_on_top_buyer_rate"] == metrics.METRICS["deal_on_top_buyer_rate"].over(own).mean
    assert (
        row["sell_below_cost_error_rate"]
        == metrics.METRICS["sell_below_cost_error_rate"].over(own).mean
    )
    assert row["deal_buyer_rank_distribution"] == metrics.deal_buyer_rank_distribution(own)
    assert sum(row["deal_buyer_rank_distribution"]) == pytest.approx(1.0)


def test_buyer_board_rates_the_fixed_entry_above_the_pool_with_tit_for_tat(tournament) -> None:
    records, pairings = tournament
    rows = leaderboard(records, "buyer", buyer_entries=ENTRIES)
    assert [row["agent"] for row in rows] == [TIME, POOL]
    fixed, pool = rows
    assert fixed["ci_low"] > pool["ci_high"]
    # Each entry met 3 sellers on 128 scenarios: one comparison per (seller, scenario).
    assert fixed["games"] == pool["games"] == 3 * 128
    assert fixed["episodes"] == pool["episodes"] == 3 * 128
    pool_records = [r for s in SELLERS for r in pairings[(s, POOL)]]
    assert pool["reward"] == pytest.approx(
        math.fsum(episode_buyer_side_reward(r) for r in pool_records) / len(pool_records)
    )
    assert pool["deal_rate"] == pytest.approx(metrics.METRICS["deal_rate"].over(pool_records).mean)


def test_sellers_that_differ_only_by_an_alias_get_equal_ratings(aliases) -> None:
    # Pinned elsewhere: an anchor's own interval is a point.
    rows = by_agent(leaderboard(aliases, "seller", buyer_entries=ENTRIES, anchor="scripted:prober"))
    satisficer, greedy = rows["scripted:satisficer"], rows["scripted:greedy"]
    assert satisficer["rating"] == pytest.approx(greedy["rating"], abs=1e-6)
    assert satisficer["games"] == greedy["games"]
    assert satisficer["wins"] == greedy["wins"]
    width = satisficer["ci_high"] - satisficer["ci_low"]
    assert abs(satisficer["ci_low"] - greedy["ci_low"]) < width / 2
    assert abs(satisficer["ci_high"] - greedy["ci_high"]) < width / 2
    between = [
        c
        for c in comparisons(aliases, "seller", ENTRIES)
        if {c.a, c.b} == {"seller:scripted:greedy", "seller:scripted:satisficer"}
    ]
    assert between and all(c.score == 0.5 for c in between)


def test_cross_scores_lie_in_unit_interval_and_board_has_sellers_and_buyers(tournament) -> None:
    records, _ = tournament
    scores = [episode_cross_score(r) for r in records]
    assert all(s is not None and 0.0 <= s <= 1.0 for s in scores)
    assert 0.5 in scores  # no-deal episodes are draws
    rows = leaderboard(records, "cross", buyer_entries=ENTRIES)
    assert {(row["role"], row["agent"]) for row in rows} == {
        *(("seller", s) for s in SELLERS),
        ("buyer", TIME),
        ("buyer", POOL),
    }
    assert all(row["rating"] is not None and 0.0 <= row["cross_score"] <= 1.0 for row in rows)
    # One game per episode and entry: a seller meets 2 entries x 128 scenarios.
    assert all(row["games"] == 256 for row in rows if row["role"] == "seller")
    assert all(row["games"] == 3 * 128 for row in rows if row["role"] == "buyer")


def test_leaderboard_rows_are_json_ready(tournament) -> None:
    records, _ = tournament
    for role in ("seller", "buyer", "cross"):
        rows = leaderboard(records, role, NO_BOOTSTRAP, ENTRIES)
        assert json.loads(json.dumps(rows, allow_nan=False)) == rows
        assert all(row["ci_low"] is None and row["ci_high"] is None for row in rows)


def test_payoff_matrix_holds_the_mean_seller_reward_of_every_pairing(tournament) -> None:
    records, pairings = tournament
    matrix = payoff_matrix(records, ENTRIES)
    assert matrix["sellers"] == sorted(SELLERS)
    assert matrix["buyers"] == [TIME, POOL]
    for s, seller in enumerate(matrix["sellers"]):
        for b, entry in enumerate(matrix["buyers"]):
            played = pairings[(seller, entry)]
            assert matrix["episodes"][s][b] == 128
            expected = math.fsum(r.result.seller_reward for r in played) / 128
            assert matrix["mean_seller_reward"][s][b] == pytest.approx(expected)


def test_ratings_over_time_ends_at_the_full_fit(tournament) -> None:
    records, _ = tournament
    history = ratings_over_time(records, "seller", 4, NO_BOOTSTRAP, ENTRIES)
    assert history["scenarios"] == [32, 64, 96, 128]
    final = {
        row["agent"]: row["rating"] for row in leaderboard(records, "seller", NO_BOOTSTRAP, ENTRIES)
    }
    assert {s["agent"] for s in history["series"]} == set(final)
    for series in history["series"]:
        assert len(series["ratings"]) == 4
        assert series["ratings"][-1] == pytest.approx(final[series["agent"]], abs=1e-6)


def test_ratings_over_time_rejects_a_bad_point_count(tournament) -> None:
    records, _ = tournament
    with pytest.raises(ValueError, match="points"):
        ratings_over_time(records, "seller", 0)


# Hand-made cases


@pytest.fixture(scope="module")
def base() -> tuple[list[Scenario], EpisodeRecord]:
    return hand_made_base()


def test_a_lone_seller_is_listed_without_a_rating(base) -> None:
    rows = leaderboard([made(base, "A", 0, 0.4), made(base, "A", 1, 0.2)], "seller")
    assert len(rows) == 1
    assert rows[0]["rating"] is None and rows[0]["elo"] is None and rows[0]["games"] == 0
    assert rows[0]["reward"] == pytest.approx(0.3)


def test_unknown_role_is_rejected(base) -> None:
    with pytest.raises(ValueError, match="role must be one of"):
        leaderboard([made(base, "A", 0)], "referee")


def test_render_table_shows_rank_rating_interval_and_metrics(tournament) -> None:
    records, _ = tournament
    rows = leaderboard(records, "seller", buyer_entries=ENTRIES)
    console = Console(width=250, record=True)
    console.print(render_table(rows, title="sellers"))
    text = console.export_text()
    top = rows[0]
    assert f"{top['rating']:.0f}" in text
    assert f"[{top['ci_low']:.0f}, {top['ci_high']:.0f}]" in text
    assert f"{top['reward']:.3f}" in text
    lines = [line for line in text.splitlines() if "scripted:" in line]
    assert [line.split()[1] for line in lines] == ["1", "2", "3"]
    assert "Deal Rate" in text and "Buyer Surplus" not in text


def test_render_table_shows_agent_names_verbatim_never_as_markup(base) -> None:
    """An LLM spec may hold anything: ``[/x]`` raised MarkupError, ``[b]`` vanished."""
    odd = "openai:[b]tuned[/b]?base_url=http://h/v1&persona=[/x]"
    rows = leaderboard([made(base, odd, 0, 0.5), made(base, "scripted:prober", 0, 0.2)], "seller")
    console = Console(width=250, record=True)
    console.print(render_table(rows, title="[/sellers]"))
    text = console.export_text()
    assert odd in text and "[/sellers]" in text


def test_stored_buyer_entries_reads_the_tournament_configs(tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    for name, entries in (("a", ((TIME,), (TIME, TFT))), ("b", ((TFT,), (TIME,)))):
        config = TournamentConfig(
            name=name, sellers=("scripted:prober",), buyers=entries, episodes=2
        )
        run_tournament(config, db, progress=False)
    assert stored_buyer_entries(db) == [(TIME,), (TIME, TFT), (TFT,)]
    assert stored_buyer_entries(db, "b") == [(TFT,), (TIME,)]
    with pytest.raises(KeyError, match="no tournament named 'c'"):
        stored_buyer_entries(db, "c")
    with pytest.raises(FileNotFoundError):
        stored_buyer_entries(tmp_path / "missing.db")


def test_ratings_rows_carry_the_names_agents_were_registered_under(tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    config = TournamentConfig(
        name="t", sellers=("scripted:prober", "scripted:satisficer"), buyers=((TIME,),), episodes=2
    )
    with Store.open(db) as store:
        store.register_agent("scripted:prober", "seller", "gen-3-seller")
        store.register_agent(TIME, "buyer", "base")
    run_tournament(config, db, progress=False)
    names = stored_names(db)
    assert names == {("scripted:prober", "seller"): "gen-3-seller", (TIME, "buyer"): "base"}
    rows = leaderboard(load_records(db), "seller", NO_BOOTSTRAP)
    add_names(rows, names)
    assert {r["agent"]: r["name"] for r in rows} == {
        "scripted:prober": "gen-3-seller",
        "scripted:satisficer": "scripted:satisficer",
    }
    console = Console(width=200, record=True)
    console.print(render_table(rows))
    assert "gen-3-seller" in console.export_text()


def test_multi_product_seller_rows_carry_matching_quality_and_single_product_rows_do_not() -> None:
    from agents.engine import play_vs_pool
    from arena.catalog import default_catalog
    from arena.config import get_preset
    from arena.scenarios import make_scenarios
    from tournaments.leaderboard import leaderboard

    rows = {}
    for preset in ("multi-product", "in-distribution"):
        config = get_preset(preset)
        scenarios = make_scenarios(config, default_catalog(), 0, 16)
        records = [
            r
            for seller in ("scripted:greedy", "scripted:oracle")
            for r in play_vs_pool(config, scenarios, seller, ["scripted:time"])[0]
        ]
        rows[preset] = {row["agent"]: row for row in leaderboard(records, "seller")}
    assert rows["multi-product"]["scripted:oracle"]["matching_quality"] == 1.0
    assert rows["multi-product"]["scripted:greedy"]["deals_per_episode"] > 1
    assert "matching_quality" not in rows["in-distribution"]["scripted:oracle"]


def test_episodes_under_two_buyer_rewards_are_never_pooled_in_a_leaderboard(tmp_path) -> None:
    """One file, one tournament per buyer reward: the whole file is refused by every board
    (naming both settings and how to rate them apart), each tournament alone is rated."""
    db = tmp_path / "two.db"
    for name in ("surplus_extraction", "budget_surplus"):
        config = TournamentConfig(
            name=name,
            preset="bilateral",
            market={"buyer_reward": name},
            sellers=("scripted:prober", "scripted:satisficer"),
            buyers=((TIME,), (TFT,)),
            episodes=8,
        )
        run_tournament(config, db, workers=1, progress=False)
    records = load_records(db)
    for role in ("seller", "buyer", "cross"):
        with pytest.raises(ValueError, match=r"2 reward settings .*budget_surplus .*--tournament"):
            leaderboard(records, role)
    with pytest.raises(ValueError, match="reward settings"):
        payoff_matrix(records)
    boards = {}
    for name in ("surplus_extraction", "budget_surplus"):
        rows = leaderboard(load_records(db, tournament=name), "buyer")
        assert {row["episodes"] for row in rows} == {16}
        boards[name] = by_agent(rows)
    old, new = boards["surplus_extraction"], boards["budget_surplus"]
    for entry in (TIME, TFT):
        assert old[entry]["reward"] != pytest.approx(new[entry]["reward"])
        # Table 12's buyer surplus extraction is a metric of prices, the same under both
        assert old[entry]["buyer_surplus_extraction"] == new[entry]["buyer_surplus_extraction"]
