from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tournaments.config import TournamentConfig
from tournaments.leaderboard import leaderboard, payoff_matrix, stored_anchor, stored_buyer_entries
from tournaments.ratings import RatingConfig
from tournaments.report import PNG_SIGNATURE, write_report
from tournaments.runner import run_tournament
from tournaments.store import Store, load_records

AMPERSAND_SELLER = "scripted:time?e=0.3&margin=0.1"
STANDARD_IMAGES = {
    "leaderboard.png",
    "payoff.png",
    "skill_profile.png",
    "rank_distribution.png",
    "ratings_over_time.png",
}


class Page(HTMLParser):
    """Image sources, JSON data blocks by id, and headings of a report page."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.images: list[str] = []
        self.data: dict[str, object] = {}
        self.headings: list[str] = []
        self._script: str | None = None
        self._heading = False
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "img":
            self.images.append(values["src"] or "")
        elif tag == "script" and values.get("type") == "application/json":
            self._script = values["id"]
        elif tag == "h2":
            self._heading = True

    def handle_endtag(self, tag: str) -> None:
        self._script = None if tag == "script" else self._script
        self._heading = False if tag == "h2" else self._heading

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            self.data[self._script] = json.loads(data)
        if self._heading:
            self.headings.append(data)


def run(tmp: Path, name: str, sellers: tuple[str, ...], buyers: tuple, episodes: int) -> Path:
    db = tmp / f"{name}.db"
    config = TournamentConfig(name=name, sellers=sellers, buyers=buyers, episodes=episodes)
    run_tournament(config, db, progress=False)
    return db


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sellers = ("scripted:satisficer", "scripted:prober", AMPERSAND_SELLER)
    buyers = (("scripted:time",), ("scripted:time", "scripted:tit-for-tat"))
    return run(tmp_path_factory.mktemp("db"), "demo", sellers, buyers, 48)


@pytest.fixture(scope="module")
def report(db: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Page]:
    out = tmp_path_factory.mktemp("report") / "site"
    path = write_report(db, out)
    text = path.read_text(encoding="utf-8")
    return path, text, Page(text)


def assert_valid_png(path: Path) -> None:
    from matplotlib.image import imread

    assert path.is_file(), path
    with path.open("rb") as handle:
        assert handle.read(8) == PNG_SIGNATURE
    pixels = imread(path)
    assert pixels.ndim == 3 and pixels.shape[0] > 50 and pixels.shape[1] > 50


def test_page_numbers_are_the_leaderboards_of_the_database(db: Path, report) -> None:
    path, _, page = report
    assert path.name == "index.html"
    records = load_records(db)
    entries = stored_buyer_entries(db)
    expected = {
        role: leaderboard(records, role, RatingConfig(), entries, stored_anchor(db, role))
        for role in page.data["leaderboard"]
    }
    assert set(expected) == {"seller", "buyer", "cross"}
    assert page.data["leaderboard"] == json.loads(json.dumps(expected))
    assert page.data["payoff"] == json.loads(json.dumps(payoff_matrix(records, entries)))
    sellers = [row["agent"] for row in page.data["leaderboard"]["seller"]]
    assert sellers[0] == "scripted:prober"
    assert set(sellers) == {"scripted:satisficer", "scripted:prober", AMPERSAND_SELLER}
    # Pinned at 1000: the first scripted seller the tournaments list, not the first by name.
    assert stored_anchor(db, "seller") == "scripted:satisficer"
    anchors = [r for r in page.data["leaderboard"]["seller"] if r["anchor"]]
    assert [(r["agent"], r["rating"]) for r in anchors] == [(stored_anchor(db, "seller"), 1000.0)]


def test_every_image_the_page_references_is_a_valid_png(report) -> None:
    path, _, page = report
    assert set(page.images) == STANDARD_IMAGES
    for src in page.images:
        assert_valid_png(path.parent / src)


def test_text_on_the_page_is_escaped(report) -> None:
    _, text, page = report
    assert "e=0.3&amp;margin=0.1" in text
    assert "e=0.3&margin=0.1" not in text
    seller_rows = page.data["leaderboard"]["seller"]
    assert AMPERSAND_SELLER in [row["agent"] for row in seller_rows]
    assert page.headings[:6] == [
        "Episodes",
        "Leaderboard",
        "Seller x buyer payoffs",
        "Seller skill profile",
        "Deal-buyer rank distribution",
        "Ratings over time",
    ]


def test_extra_sections_are_appended_with_their_images_copied(db: Path, tmp_path: Path) -> None:
    from matplotlib.figure import Figure

    curve = tmp_path / "curve.png"
    fig = Figure(figsize=(3, 2))
    fig.subplots().plot([0, 1, 2], [0.1, 0.4, 0.5])
    fig.savefig(curve, format="png")

    def training(out: Path) -> list[tuple[str, Path | None, str]]:
        drawn = out / "drawn.png"
        drawn.write_bytes(curve.read_bytes())
        return [("Drawn <here>", drawn, "in place"), ("Notes", None, "a < b & c")]

    out = tmp_path / "site"
    write_report(db, out, extra_sections=[("Training <curves> & more", curve, "reward 1 > 0")])
    text = (out / "index.html").read_text(encoding="utf-8")
    page = Page(text)
    assert page.headings[-1] == "Training <curves> & more"
    assert "<h2>Training &lt;curves&gt; &amp; more</h2>" in text
    assert "reward 1 &gt; 0" in text
    assert set(page.images) == STANDARD_IMAGES | {"extra_0_curve.png"}
    assert_valid_png(out / "extra_0_curve.png")

    page = Page(write_report(db, out, extra_sections=training).read_text(encoding="utf-8"))
    assert page.headings[-2:] == ["Drawn <here>", "Notes"]
    assert set(page.images) == STANDARD_IMAGES | {"drawn.png"}


def test_an_extra_section_image_that_is_not_a_png_is_refused(db: Path, tmp_path: Path) -> None:
    fake = tmp_path / "fake.png"
    fake.write_text("not an image")
    with pytest.raises(ValueError, match="is not a PNG"):
        write_report(db, tmp_path / "site", extra_sections=[("Bad", fake, "")])
    with pytest.raises(FileNotFoundError, match="does not exist"):
        write_report(db, tmp_path / "site", extra_sections=[("Gone", tmp_path / "gone.png", "")])


def test_a_tournament_without_comparisons_still_gets_a_page(tmp_path: Path) -> None:
    db = run(tmp_path, "lone", ("scripted:prober",), (("scripted:time",),), 8)
    page = Page(write_report(db, tmp_path / "site").read_text(encoding="utf-8"))
    [seller] = page.data["leaderboard"]["seller"]
    assert seller["agent"] == "scripted:prober" and seller["rating"] is None
    assert seller["episodes"] == 8
    # The cross board still rates the seller against its one buyer entry.
    assert {row["role"] for row in page.data["leaderboard"]["cross"]} == {"seller", "buyer"}
    for src in page.images:
        assert_valid_png(tmp_path / "site" / src)


def test_an_empty_or_missing_database_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    Store.open(empty).close()
    with pytest.raises(ValueError, match="no episodes stored"):
        write_report(empty, tmp_path / "site")
    with pytest.raises(FileNotFoundError):
        write_report(tmp_path / "missing.db", tmp_path / "site")


def test_the_page_names_the_rewards_its_episodes_were_played_under(tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    config = TournamentConfig(
        name="b",
        preset="bilateral",
        market={"buyer_reward": "budget_surplus"},
        sellers=("scripted:prober", "scripted:satisficer"),
        buyers=(("scripted:time",),),
        episodes=4,
    )
    run_tournament(config, db, progress=False)
    text = write_report(db, tmp_path / "site").read_text(encoding="utf-8")
    assert Page(text).data["rewards"] == {"seller": "surplus_extraction", "buyer": "budget_surplus"}
    assert "Rewards: seller surplus_extraction, buyer budget_surplus" in text


def test_the_default_page_names_the_default_rewards(report) -> None:
    _, _, page = report
    assert page.data["rewards"] == {"seller": "surplus_extraction", "buyer": "surplus_extraction"}
