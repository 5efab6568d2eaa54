"""``arena report``: one static HTML page with PNG plots, rebuilt from the results database.

Every number on the page comes from :mod:`tournaments.leaderboard` (the same functions as
``arena ratings``), and the page embeds them as JSON (``<script type="application/json"
id="leaderboard">``, plus ``id="payoff"``, ``id="ratings-over-time"`` and ``id="rewards"``, the
reward names the episodes were played under) so a test or a notebook
can read the exact values back. The plots are :mod:`tournaments.plots`.
All text written into the page goes through :func:`html.escape`.
"""

from __future__ import annotations

import html
import json
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arena.records import EpisodeRecord
from arena.rewards import Rewards
from tournaments.browser import DEFAULT_CAP, Links, check_cap, write_browser
from tournaments.comparisons import RATING_ROLES, BuyerEntries, reward_setting
from tournaments.leaderboard import (
    AUTO,
    columns,
    default_anchor,
    leaderboard,
    payoff_matrix,
    ratings_over_time,
    stored_lineups,
)
from tournaments.plots import (
    ROLE_TITLES,
    drawn,
    plot_leaderboard,
    plot_payoff,
    plot_rank_distribution,
    plot_ratings_over_time,
    plot_skill_profile,
)
from tournaments.ratings import RatingConfig
from tournaments.store import load_records
from tournaments.usage import Price, add_usage, check_prices, stored_usage

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

ExtraSection = tuple[str, str | Path | None, str]
"""(title, PNG path or None, text) of a section added after the standard ones."""
ExtraSections = Sequence[ExtraSection] | Callable[[Path], Iterable[ExtraSection]]


@dataclass(frozen=True)
class Section:
    """One block of the page: a heading, an optional image in the output folder, plain text
    (escaped on output) and optional ready-made HTML built here from escaped parts."""

    title: str
    image: str | None
    text: str
    table_html: str = ""


def write_report(
    db_path: str | Path,
    out_dir: str | Path,
    extra_sections: ExtraSections = (),
    config: RatingConfig = RatingConfig(),
    prices: Mapping[str, Price] | None = None,
    episodes_per_pairing: int = DEFAULT_CAP,
) -> Path:
    """Write ``out_dir/index.html``, its PNGs and the episode browser (:mod:`tournaments.browser`,
    at most ``episodes_per_pairing`` episodes a pairing) for the database at ``db_path``;
    returns the page's path. ``prices`` (spec -> :class:`tournaments.usage.Price`) adds the
    cost of model tokens.

    ``extra_sections`` adds blocks after the standard ones: a list of (title, png, text) or a
    callable that receives ``out_dir`` (to draw its PNGs there) and returns such a list. A PNG
    outside ``out_dir`` is copied in; text is escaped, never read as HTML.
    """
    check_cap(episodes_per_pairing)
    db = Path(db_path)
    records = load_records(db)
    if not records:
        raise ValueError(f"no episodes stored in {db}; run a tournament into it first")
    sellers, entries = stored_lineups(db)
    labels = ["|".join(entry) for entry in entries]
    anchors = {role: default_anchor(role, sellers, labels) for role in RATING_ROLES}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    # Extra sections first: a bad one fails before the slow plotting.
    extras = extra_sections(out) if callable(extra_sections) else extra_sections
    added = [_extra_section(k, item, out) for k, item in enumerate(extras)]
    data = report_data(records, config, entries, anchors)
    usage, priced = stored_usage(db), dict(prices or {})
    check_prices(priced, usage)
    for role in RATING_ROLES:
        add_usage(data["leaderboard"][role], records, role, entries, usage, priced)
    links = write_browser(db, out, records, entries, usage, priced, episodes_per_pairing)
    sections = standard_sections(data, out, links) + added
    page = out / "index.html"
    page.write_text(render_page(db, len(records), sections, data), encoding="utf-8")
    return page


def report_data(
    records: Sequence[EpisodeRecord],
    config: RatingConfig = RatingConfig(),
    buyer_entries: BuyerEntries | None = None,
    anchors: Mapping[str, str | None] | None = None,
) -> dict[str, Any]:
    """Every number the page shows: leaderboards per role, the payoff matrix, ratings over time.
    ``anchors`` names each role's rating anchor (default: the role's first scripted agent)."""
    pinned = {role: AUTO for role in RATING_ROLES} if anchors is None else anchors
    return {
        "rewards": reward_setting(records)._asdict(),
        "leaderboard": {
            role: leaderboard(records, role, config, buyer_entries, pinned[role])
            for role in RATING_ROLES
        },
        "payoff": payoff_matrix(records, buyer_entries),
        "ratings_over_time": {
            role: ratings_over_time(records, role, 10, config, buyer_entries, pinned[role])
            for role in RATING_ROLES
        },
    }


def standard_sections(data: dict[str, Any], out: Path, links: Links | None = None) -> list[Section]:
    """Draw the five standard plots into ``out`` and describe them; with the browser's
    ``links``, agents and payoff cells link to their episodes."""
    boards = data["leaderboard"]
    sellers = boards["seller"]
    plots = {
        "leaderboard": lambda path: plot_leaderboard(boards, path),
        "payoff": lambda path: plot_payoff(data["payoff"], path),
        "skill_profile": lambda path: plot_skill_profile(sellers, path),
        "rank_distribution": lambda path: plot_rank_distribution(sellers, path),
        "ratings_over_time": lambda path: plot_ratings_over_time(data["ratings_over_time"], path),
    }
    image: dict[str, str | None] = {}
    note: dict[str, str] = {}
    for name, plot in plots.items():
        path = out / f"{name}.png"
        made, note[name] = drawn(path, lambda plot=plot, path=path: plot(path))
        image[name] = None if made is None else made.name
    tables = "".join(
        f"<h3>{html.escape(ROLE_TITLES[role])}</h3>\n{leaderboard_html(boards[role], links)}"
        for role in RATING_ROLES
    )
    browse = (
        '<p><a id="browse-episodes" href="episodes.html#all">Browse the episodes</a>: every '
        "pairing's episodes by outcome and reward, each with its transcript and "
        "bargaining-zone chart. Agents and payoff cells below link to theirs.</p>\n"
    )
    return [
        Section("Episodes", None, "", browse if links is not None else ""),
        Section(
            "Leaderboard",
            image["leaderboard"],
            "Bradley-Terry ratings on the Elo scale with bootstrap 95% intervals (error bars), "
            "from paired comparisons on common scenarios; Elo is the online rating in play order."
            + note["leaderboard"],
            tables,
        ),
        Section(
            "Seller x buyer payoffs",
            image["payoff"],
            "Mean seller reward of every seller against every buyer entry." + note["payoff"],
            payoff_html(data["payoff"], links),
        ),
        Section(
            "Seller skill profile",
            image["skill_profile"],
            "Five axes of paper Figure 3, one polygon per seller; undefined values "
            "(e.g. surplus extraction without any deal) and negative rewards are drawn at 0."
            + note["skill_profile"],
        ),
        Section(
            "Deal-buyer rank distribution",
            image["rank_distribution"],
            "Share of deals closed with the buyer of each budget rank (rank 1 = highest budget), "
            "deal episodes only (paper Figure 10)." + note["rank_distribution"],
        ),
        Section(
            "Ratings over time",
            image["ratings_over_time"],
            "Bradley-Terry ratings fitted on growing prefixes of the scenario list."
            + note["ratings_over_time"],
        ),
    ]


def _extra_section(k: int, item: ExtraSection, out: Path) -> Section:
    if not (isinstance(item, tuple) and len(item) == 3):
        raise ValueError(
            f"extra section {k} must be a (title, png path or None, text) tuple; got {item!r}"
        )
    title, png, text = item
    if png is None:
        return Section(str(title), None, str(text))
    source = Path(png)
    if not source.is_file():
        raise FileNotFoundError(f"extra section {title!r}: image {source} does not exist")
    with source.open("rb") as handle:
        if handle.read(8) != PNG_SIGNATURE:
            raise ValueError(f"extra section {title!r}: {source} is not a PNG file")
    if source.resolve().parent == out.resolve():
        name = source.name
    else:
        name = f"extra_{k}_{source.name}"
        shutil.copyfile(source, out / name)
    return Section(str(title), name, str(text))


# HTML ----------------------------------------------------------------------------------------


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


Cell = str | tuple[str, str | None]
"""A table cell: text, or (text, link target)."""


def _cell(cell: Cell) -> str:
    if isinstance(cell, str):
        return html.escape(cell)
    text, href = cell
    if href is None:
        return html.escape(text)
    return f'<a href="{html.escape(href, quote=True)}">{html.escape(text)}</a>'


def _table(headers: Sequence[str], rows: Iterable[Sequence[Cell]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{_cell(cell)}</td>" for cell in row) + "</tr>\n" for row in rows
    )
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody>\n</table>\n"


def leaderboard_html(rows: Sequence[dict[str, Any]], links: Links | None = None) -> str:
    """A leaderboard as an HTML table (escaped), with the metric columns any row has; with
    ``links``, each agent links to its page in the episode browser."""
    if not rows:
        return "<p>No episodes.</p>\n"
    shown = [(key, header) for key, header in columns() if any(key in row for row in rows)]
    headers = ["#", "Agent", "Role", "Rating", "CI low", "CI high", "Elo", "Games", "Episodes"]
    headers += [header for _, header in shown]
    cells = []
    for rank, row in enumerate(rows, start=1):
        href = None if links is None else links.agent(row["role"], row["agent"])
        line: list[Cell] = [str(rank), (row["agent"], href), row["role"]]
        line += [_fmt(row[key], 1) for key in ("rating", "ci_low", "ci_high", "elo")]
        line += [str(row["games"]), str(row["episodes"])]
        line += [_fmt(row.get(key)) if key in row else "" for key, _ in shown]
        cells.append(line)
    return _table(headers, cells)


def payoff_html(matrix: dict[str, Any], links: Links | None = None) -> str:
    """The payoff matrix as an HTML table: mean seller reward (episodes); with ``links``,
    each cell links to the pairing's episodes."""
    rows = []
    for s, seller in enumerate(matrix["sellers"]):
        line: list[Cell] = [(seller, None if links is None else links.agent("seller", seller))]
        for b, buyers in enumerate(matrix["buyers"]):
            mean, n = matrix["mean_seller_reward"][s][b], matrix["episodes"][s][b]
            href = None if links is None else links.pairings.get((seller, buyers))
            line.append((f"{_fmt(mean)} ({n})", href))
        rows.append(line)
    return _table(["Seller \\ buyers", *matrix["buyers"]], rows)


def _json_block(element_id: str, value: Any) -> str:
    """A JSON data block; "<", ">" and "&" are written as \\u escapes so no text can close the
    script element, and the JSON still decodes to the same values."""
    text = json.dumps(value, allow_nan=False, sort_keys=True)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="{element_id}">{text}</script>\n'


STYLE = """
body { font-family: sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
td:nth-child(2), th:nth-child(2) { text-align: left; }
img { max-width: 100%; }
"""


def render_page(db: Path, episodes: int, sections: Sequence[Section], data: dict[str, Any]) -> str:
    """The whole HTML page."""
    parts = [
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n',
        "<title>bargain-arena report</title>\n",
        f"<style>{STYLE}</style>\n</head>\n<body>\n",
        "<h1>bargain-arena report</h1>\n",
        f"<p>Database {html.escape(str(db))}: {episodes} stored episodes.</p>\n",
        f"<p>Rewards: {html.escape(Rewards(**data['rewards']).describe())} "
        "(docs/metrics.md).</p>\n",
    ]
    for section in sections:
        parts.append(f"<h2>{html.escape(section.title)}</h2>\n")
        if section.text:
            parts.append(f"<p>{html.escape(section.text)}</p>\n")
        if section.image is not None:
            src = html.escape(section.image, quote=True)
            alt = html.escape(section.title, quote=True)
            parts.append(f'<p><img src="{src}" alt="{alt}"></p>\n')
        parts.append(section.table_html)
    parts.append(_json_block("rewards", data["rewards"]))
    parts.append(_json_block("leaderboard", data["leaderboard"]))
    parts.append(_json_block("payoff", data["payoff"]))
    parts.append(_json_block("ratings-over-time", data["ratings_over_time"]))
    parts.append("</body>\n</html>\n")
    return "".join(parts)
