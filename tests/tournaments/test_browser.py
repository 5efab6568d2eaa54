"""The report's episode browser in a real headless Chromium (file:// URLs, no server): a person
clicks from the leaderboard to a pairing, filters and sorts its episodes, and opens one with its
transcript, private values and bargaining-zone chart. Plus the sampling that keeps big
databases fast."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arena.money import format_price
from tests.chromium import SKIP_REASON, Chromium, find_chromium
from tournaments.browser import sample
from tournaments.config import TournamentConfig
from tournaments.episodes import load_episode
from tournaments.report import write_report
from tournaments.runner import run_tournament
from tournaments.store import Store, load_records

SELLERS = ("scripted:satisficer", "scripted:prober", "scripted:time?e=0.3")
BUYERS = (("scripted:time",), ("scripted:time", "scripted:tit-for-tat"))
EPISODES, CAP = 30, 12
needs_chromium = pytest.mark.skipif(find_chromium() is None, reason=SKIP_REASON)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A 3x2 scripted tournament and its report, at most CAP episodes a pairing."""
    folder = tmp_path_factory.mktemp("browser")
    db = folder / "demo.db"
    run_tournament(TournamentConfig("demo", SELLERS, BUYERS, episodes=EPISODES), db,
                   progress=False)  # fmt: skip
    return db, write_report(db, folder / "site", episodes_per_pairing=CAP)


@pytest.fixture(scope="module")
def browser():
    if find_chromium() is None:
        pytest.skip(SKIP_REASON)
    with Chromium(width=1200, height=900) as chromium:
        yield chromium


def data_file(path: Path) -> object:
    """The value a data file assigns (``window.arenaData... = VALUE;``)."""
    text = path.read_text(encoding="utf-8").splitlines()[1]
    return json.loads(text.split(" = ", 1)[1].rstrip(";"))


@needs_chromium
def test_a_click_path_from_the_leaderboard_to_an_episode_shows_transcript_and_chart(
    site, browser
) -> None:
    db, page = site
    browser.open(page.as_uri())
    browser.click('table a[href^="episodes.html#seller="]')  # the top seller of the leaderboard
    browser.wait_for("document.querySelector('table.pairings')")
    top = browser.evaluate("document.querySelector('h1').textContent")
    assert top.startswith("Seller scripted:")
    assert browser.evaluate("document.querySelectorAll('table.pairings tbody tr').length") == 2
    browser.click("table.pairings tbody tr a[href^='#pairing=']")
    browser.wait_for("document.querySelector('table.episodes')")
    note = browser.evaluate("document.querySelector('.note').textContent")
    assert f"a sample of {CAP} of the {EPISODES} stored episodes" in note
    assert browser.evaluate("document.querySelectorAll('table.episodes tbody tr').length") == CAP
    browser.click("table.episodes tbody a")
    browser.wait_for("document.querySelector('svg.zone-chart')")

    episode_id = int(browser.evaluate("location.hash.split('episode=')[1]"))
    with Store.open(db) as store:
        record = load_episode(store, episode_id).record
    assert browser.evaluate("document.querySelector('h1').textContent") == f"Episode {episode_id}"
    assert top.endswith(record.seller)
    items = browser.evaluate(
        "Array.from(document.querySelectorAll('ol.transcript li pre')).map(e => e.textContent)"
    )
    assert items == [t.text for t in record.result.turns]
    private = browser.evaluate(
        "Array.from(document.querySelectorAll('table.players tbody tr'))"
        ".map(r => r.children[2].textContent)"
    )
    sc = record.scenario
    assert private == [f"cost {format_price(sc.costs[0])}",
                       *(f"budget {format_price(v[0])}" for v in sc.valuations)]  # fmt: skip
    budgets = browser.evaluate(
        "Array.from(document.querySelectorAll('svg.zone-chart line.budget'))"
        ".map(e => e.getAttribute('data-price'))"
    )
    assert budgets == [f"{v[0]:.2f}" for v in sc.valuations]
    marks = browser.evaluate("document.querySelectorAll('svg.zone-chart .mark').length")
    assert marks == sum(t.price is not None for t in record.result.turns)
    assert browser.evaluate("document.querySelectorAll('svg.zone-chart .deal').length") == len(
        record.result.deals
    )
    box = browser.evaluate("document.querySelector('svg.zone-chart').getBoundingClientRect().width")
    assert box > 300  # drawn, not collapsed
    assert browser.errors == []


@needs_chromium
def test_episodes_filter_by_outcome_and_sort_by_reward(site, browser) -> None:
    _, page = site
    browser.open(page.parent.joinpath("episodes.html").as_uri() + "#pairing=0")
    browser.wait_for("document.querySelector('table.episodes')")
    listed = "Array.from(document.querySelectorAll('table.episodes tbody tr'))"

    def choose(name: str, value: str) -> None:
        browser.evaluate(
            f"(function () {{ var s = document.getElementById('{name}'); s.value = '{value}';"
            " s.dispatchEvent(new Event('change')); })()"
        )

    choose("outcome", "deal")
    browser.wait_for("location.hash.indexOf('outcome=deal') > 0")
    outcomes = browser.evaluate(f"{listed}.map(r => r.children[3].textContent)")
    assert outcomes and set(outcomes) == {"deal"}
    choose("sort", "reward")
    browser.wait_for("location.hash.indexOf('sort=reward') > 0")
    rewards = browser.evaluate(f"{listed}.map(r => Number(r.children[4].textContent))")
    assert rewards == sorted(rewards) and len(rewards) == len(outcomes)
    choose("outcome", "")
    browser.wait_for("location.hash.indexOf('outcome=') < 0")
    assert browser.evaluate(f"{listed}.length") == CAP


@needs_chromium
def test_a_payoff_cell_opens_its_pairing(site, browser) -> None:
    _, page = site
    browser.open(page.as_uri())
    href = browser.evaluate("document.querySelectorAll('a[href*=\"#pairing=\"]')[3].href")
    cell = browser.evaluate(
        "(function () { var a = document.querySelectorAll('a[href*=\"#pairing=\"]')[3];"
        " var row = a.closest('tr'), table = a.closest('table');"
        " var column = Array.from(row.children).indexOf(a.parentNode);"
        " return [row.children[0].textContent,"
        " table.querySelectorAll('th')[column].textContent]; })()"
    )
    browser.click(f'a[href="{href.split("/")[-1]}"]')
    browser.wait_for("document.querySelector('table.episodes')")
    assert browser.evaluate("document.querySelector('h1').textContent") == " vs ".join(cell)


@needs_chromium
def test_a_multi_product_episode_has_a_chart_per_product(tmp_path: Path, browser) -> None:
    db = tmp_path / "multi.db"
    config = TournamentConfig("multi", ("scripted:prober",), (("scripted:time",),),
                              preset="multi-product", episodes=3)  # fmt: skip
    run_tournament(config, db, progress=False)
    page = write_report(db, tmp_path / "site")
    record = load_records(db)[0]
    browser.open(page.parent.joinpath("episodes.html").as_uri() + "#pairing=0&episode=1")
    browser.wait_for("document.querySelector('svg.zone-chart')")
    products = browser.evaluate(
        "Array.from(document.querySelectorAll('svg.zone-chart'))"
        ".map(s => s.getAttribute('data-product'))"
    )
    assert products == [str(p + 1) for p in range(record.scenario.num_products)]
    assert len(products) > 1 and browser.errors == []


def test_a_pairing_over_the_cap_is_sampled_and_says_so(site) -> None:
    db, page = site
    index = data_file(page.parent / "data" / "pairings.js")
    assert index["cap"] == CAP and len(index["pairings"]) == 6
    for pairing in index["pairings"]:
        assert (pairing["episodes"], pairing["sampled"]) == (EPISODES, CAP)
        rows = data_file(page.parent / "data" / f"pairing-{pairing['id']}.js")
        assert len(rows) == CAP
        assert {row["outcome"] for row in rows} == set(pairing["outcomes"])
        for row in rows:
            assert (page.parent / "data" / f"episode-{row['id']}.js").is_file()
    written = list((page.parent / "data").glob("episode-*.js"))
    assert len(written) <= 6 * CAP < len(load_records(db))


def test_the_sample_keeps_every_outcome_and_the_reward_extremes() -> None:
    items = (
        [("deal", r / 100) for r in range(180)]
        + [("no_deal", 0.0)] * 15
        + [("violation", -1.0)] * 2
    )
    picked = sample(items, 20, lambda i: i[0], lambda i: i[1])
    assert len(picked) == 20
    sizes = {o: sum(i[0] == o for i in items) for o in ("deal", "no_deal", "violation")}
    counts = {o: sum(p[0] == o for p in picked) for o in sizes}
    for outcome, size in sizes.items():
        share = 20 * size / len(items)  # in proportion, every outcome at least once
        assert counts[outcome] >= 1 and abs(counts[outcome] - max(1.0, share)) < 2, outcome
    assert sorted(counts, key=counts.get) == sorted(sizes, key=sizes.get)
    deals = [p[1] for p in picked if p[0] == "deal"]
    assert min(deals) == 0.0 and max(deals) == 1.79
    assert sample(items, 20, lambda i: i[0], lambda i: i[1]) == picked
    assert sample(items[:5], 20, lambda i: i[0], lambda i: i[1]) == items[:5]
