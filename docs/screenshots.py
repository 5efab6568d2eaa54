"""Take the screenshots of docs/tournaments.md: the report's episode browser as a person sees it.

Run from the repository root (needs Debian's chromium):

    PYTHONPATH=. python docs/screenshots.py

Plays the 3x2 scripted tournament of the docs and a small multi-product one, writes their
reports into a temporary folder, opens them in headless Chromium (tests/chromium.py) and saves
PNGs into docs/images/.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from tests.chromium import Chromium
from tournaments.config import TournamentConfig
from tournaments.report import write_report
from tournaments.runner import run_tournament

IMAGES = Path(__file__).resolve().parent / "images"
SELLERS = ("scripted:satisficer", "scripted:prober", "scripted:time?e=0.3")
BUYERS = (("scripted:time",), ("scripted:time", "scripted:tit-for-tat"))


def site(folder: Path, config: TournamentConfig) -> Path:
    db = folder / f"{config.name}.db"
    run_tournament(config, db, progress=False)
    return write_report(db, folder / config.name)


def main() -> None:
    IMAGES.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        demo = site(folder, TournamentConfig("scripted-demo", SELLERS, BUYERS, episodes=64))
        multi = site(folder, TournamentConfig("multi", ("scripted:prober",), (("scripted:time",),),
                                              preset="multi-product", episodes=4))  # fmt: skip
        with Chromium(width=1280, height=640) as browser:
            browser.open(demo.as_uri())
            browser.evaluate("document.querySelector('h3').scrollIntoView()")
            browser.screenshot(IMAGES / "report-leaderboard-links.png", full_page=False)
            browser.width, browser.height = 1100, 760
            browser.click('table a[href^="episodes.html#seller="]')
            browser.wait_for("document.querySelector('table.pairings')")
            browser.height = 240
            browser.screenshot(IMAGES / "browser-seller.png", full_page=False)
            browser.height = 760
            browser.click("table.pairings tbody tr a[href^='#pairing=']")
            browser.wait_for("document.querySelector('table.episodes')")
            browser.screenshot(IMAGES / "browser-pairing.png", full_page=False)
            browser.click("table.episodes tbody a")
            browser.wait_for("document.querySelector('svg.zone-chart')")
            browser.height = 1250
            browser.screenshot(IMAGES / "browser-episode.png", full_page=False)
            browser.open(multi.parent.joinpath("episodes.html").as_uri() + "#pairing=0&episode=2")
            browser.wait_for("document.querySelector('svg.zone-chart')")
            browser.evaluate("document.querySelectorAll('h2')[1].scrollIntoView()")
            browser.height = 820
            browser.screenshot(IMAGES / "browser-multi-product.png", full_page=False)
            if browser.errors:
                raise RuntimeError(f"the page reported errors: {browser.errors}")
    for png in sorted(IMAGES.glob("*.png")):
        print(f"wrote {png} ({png.stat().st_size / 1e3:.0f} kB)")


if __name__ == "__main__":
    main()
