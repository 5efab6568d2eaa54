from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.processes import running
from tournaments.config import TournamentConfig
from tournaments.runner import even_chunks, run_tournament
from tournaments.store import Store, load_records

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = REPO_ROOT / "examples" / "scripted-demo.toml"

SMALL = TournamentConfig(
    name="small",
    sellers=("scripted:satisficer", "scripted:prober", "scripted:time?e=0.3"),
    buyers=(("scripted:time",), ("scripted:time", "scripted:tit-for-tat")),
    episodes=12,
)


def contents(db: Path) -> list[tuple[str, str]]:
    """Every stored episode as (key, record JSON), sorted: what two runs must agree on."""
    return sorted(
        (json.dumps(r.key), json.dumps(r.to_dict(), sort_keys=True)) for r in load_records(db)
    )


def write_toml(path: Path, body: str) -> Path:
    path.write_text(body, encoding="utf-8")
    return path


def test_every_pairing_plays_the_same_scenarios_and_the_summary_matches_the_store(
    tmp_path: Path,
) -> None:
    db = tmp_path / "r.db"
    summary = run_tournament(SMALL, db, workers=1, progress=False)

    records = load_records(db, tournament="small")
    assert summary.skipped == 0 and summary.played == len(records)
    assert len(summary.pairings) == 6
    for pairing in summary.pairings:
        mine = [r for r in records if r.seller == pairing.seller]
        if "|" not in pairing.buyers:
            mine = [r for r in mine if set(r.buyers) == {pairing.buyers}]
            assert sorted(r.scenario.index for r in mine) == list(range(12))
            rewards = [r.result.seller_reward for r in mine]
            assert pairing.mean_seller_reward == pytest.approx(math.fsum(rewards) / 12)
            deals = sum(r.result.outcome == "deal" for r in mine)
            assert pairing.deal_rate == pytest.approx(deals / 12)
        assert pairing.episodes == 12
    by_seller = {
        s: sorted({r.scenario.index for r in records if r.seller == s}) for s in SMALL.sellers
    }
    assert all(indices == list(range(12)) for indices in by_seller.values())
    # A pool lineup that happens to be all scripted:time is the fixed entry's episode: stored once.
    assert len(records) == len({r.key for r in records}) <= 3 * 2 * 12


def test_a_resumed_run_plays_only_the_missing_episodes(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    first = run_tournament(SMALL, db, workers=1, progress=False)
    full = contents(db)
    with Store.open(db) as store, store.transaction():
        prober = "SELECT id FROM episodes WHERE seller = 'scripted:prober'"
        store.db.execute(f"DELETE FROM turns WHERE episode_id IN ({prober})")
        removed = store.db.execute(f"DELETE FROM episodes WHERE id IN ({prober})").rowcount
    with Store.open(db) as store:
        store.rebuild_payoffs()
    assert 0 < removed < first.played

    again = run_tournament(SMALL, db, workers=1, progress=False)

    assert (again.played, again.skipped) == (removed, first.played - removed)
    assert again.pairings == first.pairings
    assert contents(db) == full
    with Store.open(db) as store, Store.open(tmp_path / "fresh.db") as fresh:
        run_tournament(SMALL, fresh, workers=1, progress=False)
        resumed, played_once = store.payoffs([1]), fresh.payoffs([1])
        assert resumed.keys() == played_once.keys()
        for pairing, payoff in resumed.items():
            # Sums over episodes in another order: equal to rounding (approx takes flat tuples).
            assert tuple(payoff) == pytest.approx(tuple(played_once[pairing])), pairing
    third = run_tournament(SMALL, db, workers=1, progress=False)
    assert (third.played, third.skipped) == (0, first.played)


def test_a_process_pool_stores_the_same_episodes_as_one_process(tmp_path: Path) -> None:
    one = run_tournament(SMALL, tmp_path / "one.db", workers=1, progress=False)
    pool = run_tournament(SMALL, tmp_path / "pool.db", workers=2, progress=False, chunk_size=5)
    assert pool.pairings == one.pairings
    assert contents(tmp_path / "pool.db") == contents(tmp_path / "one.db")


@pytest.mark.parametrize(
    ("episodes", "most", "workers", "sizes"),
    [
        (576, 192, 1, [192] * 3),  # one process: a batch a chunk
        (100, 32, 1, [25] * 4),  # not 32, 32, 32, 4
        (768, 192, 2, [192] * 4),  # two workers, two chunks each
        (576, 192, 2, [144] * 4),  # not 192, 192, 192: one worker would play two thirds
        (1728, 192, 2, [173] * 8 + [172] * 2),  # ten chunks, not ten of 172 and one of 8
        (16, 192, 2, [8, 8]),  # fewer episodes than a batch: still both workers
        (9, 4, 4, [3, 2, 2, 2]),  # no worker idle (chunks of 3 would leave one)
        (3, 64, 8, [1, 1, 1]),  # fewer episodes than workers: one each
    ],
)
def test_chunks_hold_at_most_a_batch_and_share_the_episodes_equally_between_workers(
    episodes, most, workers, sizes
) -> None:
    jobs = list(range(episodes))
    chunks = even_chunks(jobs, most, workers)
    assert [len(c) for c in chunks] == sizes
    assert [j for c in chunks for j in c] == jobs  # in order, each once


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 5000), st.integers(1, 512), st.integers(1, 8))
def test_every_chunk_is_at_most_the_most_and_every_worker_gets_an_equal_share(
    episodes, most, workers
) -> None:
    chunks = even_chunks(list(range(episodes)), most, workers)
    sizes = [len(c) for c in chunks]
    assert sum(sizes) == episodes and all(1 <= n <= most for n in sizes)
    assert max(sizes, default=0) - min(sizes, default=0) <= 1  # equal to one episode
    # A multiple of the workers, unless there are fewer episodes than that.
    assert len(chunks) % workers == 0 or len(chunks) == episodes


def test_a_run_without_a_store_gives_the_same_summary(tmp_path: Path) -> None:
    stored = run_tournament(SMALL, tmp_path / "r.db", workers=1, progress=False)
    bare = run_tournament(SMALL, None, workers=1, progress=False)
    assert bare.pairings == stored.pairings and bare.db_path is None


def test_keep_turns_false_stores_outcomes_without_messages(tmp_path: Path) -> None:
    config = TournamentConfig(
        name="lean",
        sellers=("scripted:prober",),
        buyers=(("scripted:time",),),
        episodes=5,
        keep_turns=False,
    )
    run_tournament(config, tmp_path / "r.db", progress=False)
    records = load_records(tmp_path / "r.db")
    assert len(records) == 5 and all(r.result.turns == () for r in records)
    assert all(r.result.seller_turns > 0 for r in records)


def test_the_same_name_with_another_config_is_refused(tmp_path: Path) -> None:
    run_tournament(SMALL, tmp_path / "r.db", progress=False)
    other = TournamentConfig(
        name="small", sellers=SMALL.sellers, buyers=SMALL.buyers, episodes=12, preset="ood"
    )
    with pytest.raises(ValueError, match="differs in: preset"):
        run_tournament(other, tmp_path / "r.db", progress=False)


def test_a_setting_added_since_a_tournament_was_stored_does_not_block_resuming(
    tmp_path: Path,
) -> None:
    db = tmp_path / "r.db"
    first = run_tournament(SMALL, db, workers=1, progress=False)
    with Store.open(db) as store, store.transaction():
        stored = json.loads(store.db.execute("SELECT config FROM tournaments").fetchone()[0])
        del stored["keep_turns"]  # as if the field had been added to the code since
        store.db.execute("UPDATE tournaments SET config = ?", [json.dumps(stored)])
    again = run_tournament(SMALL, db, workers=1, progress=False)
    assert (again.played, again.skipped) == (0, first.played)
    lean = TournamentConfig(name="small", sellers=SMALL.sellers, buyers=SMALL.buyers,
                            episodes=12, keep_turns=False)  # fmt: skip
    with pytest.raises(ValueError, match=r"differs in: keep_turns"):
        run_tournament(lean, db, progress=False)


def test_the_summary_prints_as_a_table_with_one_row_per_pairing(tmp_path: Path) -> None:
    from rich.console import Console

    summary = run_tournament(SMALL, None, progress=False)
    console = Console(width=200, record=True)
    console.print(summary.table())
    text = console.export_text()
    assert "scripted:time|scripted:tit-for-tat" in text
    assert text.count("scripted:satisficer") == 2


def test_names_that_look_like_markup_are_shown_verbatim_by_the_table_and_the_bar(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A name rich would read as markup ([/x] raised MarkupError) is printed as written."""
    from rich.console import Console

    config = dataclasses.replace(SMALL, name="[/oops] [bold]t", episodes=2)
    summary = run_tournament(config, tmp_path / "t.db", progress=True)
    assert "[/oops] [bold]t" in capsys.readouterr().out
    console = Console(width=200, record=True)
    console.print(summary.table())
    assert "[/oops] [bold]t: 12 played" in console.export_text()


def test_the_shipped_example_config_loads() -> None:
    config = TournamentConfig.from_toml(EXAMPLE)
    assert config.name == "scripted-demo" and config.episodes == 256
    assert config.buyers == (("scripted:time",), ("scripted:time", "scripted:tit-for-tat"))
    assert config.buyer_labels == ["scripted:time", "scripted:time|scripted:tit-for-tat"]
    assert config.split == "all" and config.catalog is None and config.keep_turns


def test_config_market_table_overrides_the_preset(tmp_path: Path) -> None:
    path = write_toml(
        tmp_path / "t.toml",
        '[tournament]\nname = "x"\nsellers = ["scripted:prober"]\nbuyers = ["scripted:time"]\n'
        'catalog = "cat.json"\n[tournament.market]\ntotal_turns = 5\n',
    )
    config = TournamentConfig.from_toml(path)
    assert config.market_config().total_turns == 5
    assert config.market_config().num_buyers == 3
    assert config.catalog == str(tmp_path / "cat.json")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('rounds = 3\nwinner = "x"', "tournament: unknown keys 'rounds', 'winner'; known keys:"),
        ("episodes = 0", "tournament.episodes must be >= 1"),
        ('sellers = ["scripted:nobody"]', "unknown scripted seller 'nobody'"),
        ('buyers = [["scripted:time", 3]]', "tournament.buyers[0][1]: expected a string, got 3"),
        ('sellers = ["scripted:prober?foo=1"]', "tournament.sellers[0]: 'scripted:prober?foo=1'"),
        ("keep_turns = 'tru'", "tournament.keep_turns: expected true or false, got 'tru'"),
        ('buyers = ["scripted:time", "scripted:time"]', "lists scripted:time twice"),
        ('preset = "mars"', "unknown preset 'mars'"),
        ("market = { total_turns = 20 }", "total_turns=20 must be <"),
        ("market = { turns = 20 }", "tournament.market: unknown key 'turns'"),
        ("market = { stock = 'two' }", "tournament.market.stock: expected an integer, got 'two'"),
        ('split = "dev"', "tournament.split must be one of"),
    ],
)
def test_bad_config_values_are_reported_by_name(tmp_path: Path, body: str, message: str) -> None:
    base = {"name": '"x"', "sellers": '["scripted:prober"]', "buyers": '["scripted:time"]'}
    key = body.split("=")[0].strip()
    lines = [f"{k} = {v}" for k, v in base.items() if k != key]
    path = write_toml(tmp_path / "t.toml", "[tournament]\n" + "\n".join([*lines, body]) + "\n")
    with pytest.raises(ValueError) as info:
        TournamentConfig.from_toml(path)
    assert message in str(info.value)


def test_a_table_other_than_tournament_is_an_error(tmp_path: Path) -> None:
    path = write_toml(tmp_path / "t.toml", '[tournament]\nname = "x"\n[league]\nsize = 3\n')
    with pytest.raises(ValueError, match=r"unknown table\(s\) league"):
        TournamentConfig.from_toml(path)


def stored_count(db: Path) -> int:
    """Episodes committed so far, read the way another process would; 0 before the schema."""
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return conn.execute("SELECT COUNT(*) FROM episodes").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.OperationalError:
        return 0


@pytest.mark.slow
def test_a_run_killed_mid_way_resumes_to_the_uninterrupted_result(tmp_path: Path) -> None:
    episodes = 400
    config_path = write_toml(
        tmp_path / "kill.toml",
        f'[tournament]\nname = "kill"\nepisodes = {episodes}\n'
        'sellers = ["scripted:satisficer", "scripted:prober", "scripted:time?e=0.3"]\n'
        'buyers = ["scripted:time", ["scripted:time", "scripted:tit-for-tat"]]\n',
    )
    config = TournamentConfig.from_toml(config_path)
    reference = tmp_path / "reference.db"
    total = run_tournament(config, reference, workers=1, progress=False).played

    db = tmp_path / "killed.db"
    command = [
        sys.executable,
        "-m",
        "arena_cli",
        "tournament",
        "run",
        str(config_path),
        "--db",
        str(db),
        "--workers",
        "2",
        "--chunk-size",
        "7",
        "--no-progress",
    ]
    # Its own session, so the kill takes the pool's workers with the parent, like an OOM kill.
    runner = subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    try:
        while stored_count(db) < total // 5:
            assert runner.poll() is None, runner.stderr.read().decode()
            assert time.monotonic() < deadline, "the runner stored nothing within 60 s"
            time.sleep(0.01)
    finally:
        os.killpg(runner.pid, signal.SIGKILL)
        runner.wait()
        runner.stderr.close()

    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    stored = conn.execute("SELECT COUNT(*) FROM episodes").fetchone()[0]
    partial = conn.execute(
        "SELECT COUNT(*) FROM episodes e WHERE e.num_turns != "
        "(SELECT COUNT(*) FROM turns t WHERE t.episode_id = e.id)"
    ).fetchone()[0]
    orphans = conn.execute(
        "SELECT COUNT(*) FROM turns WHERE episode_id NOT IN (SELECT id FROM episodes)"
    ).fetchone()[0]
    conn.close()
    assert 0 < stored < total, "the kill must land mid-run"
    assert (partial, orphans) == (0, 0)

    resumed = run_tournament(config, db, workers=2, progress=False)
    assert (resumed.played, resumed.skipped) == (total - stored, stored)
    assert contents(db) == contents(reference)


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` now, read from /proc (children, their children, ...)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


@pytest.mark.slow
@pytest.mark.parametrize("when", ["workers started", "a fifth stored"])
def test_a_sigkilled_run_leaves_no_worker_behind(tmp_path: Path, when: str) -> None:
    config_path = write_toml(
        tmp_path / "orphans.toml",
        '[tournament]\nname = "orphans"\nepisodes = 1000\n'
        'sellers = ["scripted:satisficer", "scripted:prober", "scripted:time?e=0.3"]\n'
        'buyers = [["scripted:time", "scripted:tit-for-tat"]]\n',
    )
    db = tmp_path / "orphans.db"
    command = [sys.executable, "-m", "arena_cli", "tournament", "run", str(config_path)]
    runner = subprocess.Popen(
        [*command, "--db", str(db), "--no-progress"],
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    seen: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while len(seen) < 2 or (when == "a fifth stored" and stored_count(db) < 3000 // 5):
            assert runner.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, f"not reached within 60 s: {when}"
            seen |= descendants(runner.pid)
            time.sleep(0.01)
    finally:
        # The parent alone, as the OOM killer does: no clean-up code runs in it.
        runner.kill()
        runner.wait()
    deadline = time.monotonic() + 10
    while any(running(pid) for pid in seen) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [pid for pid in seen if running(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == [], f"{len(left)} of {len(seen)} workers outlived the killed run"


@pytest.mark.slow
def test_the_ray_executor_stores_the_same_episodes_as_the_local_one(tmp_path: Path) -> None:
    ray = pytest.importorskip("ray")
    local = run_tournament(SMALL, tmp_path / "local.db", workers=2, progress=False)
    ray.init(num_cpus=2, include_dashboard=False)
    try:
        remote = run_tournament(
            SMALL, tmp_path / "ray.db", workers=2, executor="ray", progress=False, chunk_size=10
        )
    finally:
        ray.shutdown()
    assert remote.pairings == local.pairings
    assert contents(tmp_path / "ray.db") == contents(tmp_path / "local.db")


def quitting_seller(messages: list[dict[str, str]]) -> str:
    """The HTTP server's seller: always quits at once (buyers here are scripted)."""
    return "Thought: enough\nTarget: 1\nTalk: Goodbye.\nAction: [QUIT]"


def test_llm_agents_in_a_tournament_go_through_the_batched_engine(tmp_path: Path) -> None:
    from agents.backends import close_backends
    from agents.testing.http_server import ScriptedChatServer

    with ScriptedChatServer(reply_text=quitting_seller, default_delay=0.05) as server:
        spec = f"openai:arena-test?base_url={server.url}&max_retries=1&backoff=0.001&timeout=5"
        config = TournamentConfig.from_dict(
            {
                "name": "llm",
                "episodes": 12,
                "sellers": [spec, "scripted:prober"],
                "buyers": ["scripted:time"],
            }
        )
        db = tmp_path / "llm.db"
        summary = run_tournament(config, db, workers=1, progress=False)
        in_flight = server.max_in_flight
    close_backends()
    assert summary.played == 24
    llm = [r for r in load_records(db) if r.seller == spec]
    assert len(llm) == 12
    assert {r.result.termination for r in llm} == {"seller_quit"}
    assert all(r.result.turns[-1].tokens_in > 0 for r in llm)
    # Played one request at a time, the server would never see two requests at once.
    assert in_flight > 1


def test_model_tokens_are_stored_per_episode_and_seat_even_without_the_messages(
    tmp_path: Path,
) -> None:
    from agents.backends import close_backends
    from agents.testing.http_server import ScriptedChatServer

    with ScriptedChatServer(reply_text=quitting_seller) as server:
        spec = f"openai:arena-test?base_url={server.url}&max_retries=1&backoff=0.001&timeout=5"
        config = TournamentConfig.from_dict(
            {"name": "lean-llm", "episodes": 3, "sellers": [spec, "scripted:prober"],
             "buyers": ["scripted:time"], "keep_turns": False}
        )  # fmt: skip
        db = tmp_path / "lean.db"
        run_tournament(config, db, workers=1, progress=False)
    close_backends()
    with Store.open(db) as store:
        turns = store.db.execute("SELECT COUNT(*) FROM turns").fetchone()[0]
        usage = store.db.execute(
            "SELECT e.seller, u.seat, u.agent, u.tokens_in, u.tokens_out FROM episode_usage u "
            "JOIN episodes e ON e.id = u.episode_id"
        ).fetchall()
    assert turns == 0
    assert len(usage) == 3  # one seat with model tokens in each LLM episode; scripted: none
    assert all(row[:3] == (spec, "seller", spec) and row[3] > 0 and row[4] > 0 for row in usage)


def bilateral_under(buyer_reward: str) -> TournamentConfig:
    """A small bilateral tournament named after its buyer reward."""
    return TournamentConfig(
        name=buyer_reward,
        preset="bilateral",
        market={"buyer_reward": buyer_reward},
        sellers=("scripted:prober",),
        buyers=(("scripted:time",),),
        episodes=16,
    )


def test_the_buyer_reward_setting_changes_the_stored_buyer_rewards_and_is_recorded(
    tmp_path: Path,
) -> None:
    """Two bilateral tournaments on the same scenarios, one per buyer reward, into one file:
    the same deals, the seller rewards unchanged, the buyer rewards those of the setting, and
    the names in every episode's row, record and key."""
    db = tmp_path / "rewards.db"
    stored = {}
    for name in ("surplus_extraction", "budget_surplus"):
        run_tournament(bilateral_under(name), db, workers=1, progress=False)
        stored[name] = load_records(db, tournament=name)
    with Store.open(db, read_only=True) as store:
        names = store.db.execute(
            "SELECT tournament_id, seller_reward_name, buyer_reward_name, COUNT(*) FROM episodes "
            "GROUP BY 1, 2, 3 ORDER BY 1"
        ).fetchall()
    assert names == [(1, "surplus_extraction", "surplus_extraction", 16),
                     (2, "surplus_extraction", "budget_surplus", 16)]  # fmt: skip
    old, new = stored["surplus_extraction"], stored["budget_surplus"]
    assert [r.result.deals for r in old] == [r.result.deals for r in new]
    assert [r.result.seller_reward for r in old] == [r.result.seller_reward for r in new]
    deals = [(a, b) for a, b in zip(old, new, strict=True) if a.result.outcome == "deal"]
    assert len(deals) >= 8
    for a, b in deals:
        (deal,) = b.result.deals
        budget, cost = b.scenario.valuations[0][0], b.scenario.products[0].cost
        assert b.result.buyer_rewards[0] == pytest.approx((budget - deal.price) / (budget - cost))
        assert a.result.buyer_rewards[0] != pytest.approx(b.result.buyer_rewards[0])
    assert {r.rewards.buyer for r in new} == {"budget_surplus"}
    assert {r.key for r in old}.isdisjoint(r.key for r in new)
    resumed = run_tournament(bilateral_under("budget_surplus"), db, workers=1, progress=False)
    assert (resumed.played, resumed.skipped) == (0, 16)
