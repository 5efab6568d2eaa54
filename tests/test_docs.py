"""The docs follow the code: their settings tables are the config classes' help texts, and the
presets page names every preset."""

from __future__ import annotations

from pathlib import Path

import pytest

from arena.config import MarketConfig, preset_names
from arena.metrics import METRICS
from arena.settings import markdown_table
from leagues.config import LeagueConfig
from tournaments.config import TournamentConfig

DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.mark.parametrize(
    ("page", "config"),
    [
        ("presets.md", MarketConfig),
        ("tournaments.md", TournamentConfig),
        ("training.md", LeagueConfig),
    ],
)
def test_a_settings_table_in_the_docs_is_the_config_classes_help(page: str, config: type) -> None:
    table = markdown_table(config)
    assert table in (DOCS / page).read_text(), (
        f"docs/{page} lacks the current {config.__name__} table; paste "
        f"arena.settings.markdown_table({config.__name__}) in"
    )


def test_the_presets_page_lists_every_preset() -> None:
    text = (DOCS / "presets.md").read_text()
    assert all(f"| `{name}`" in text for name in preset_names())


def test_the_metrics_page_documents_every_registered_metric() -> None:
    text = (DOCS / "metrics.md").read_text()
    assert all(f"`{name}`" in text for name in METRICS)
    assert f"the {len(METRICS)} estimates" in text


def _table_after(text: str, heading: str) -> list[list[str]]:
    """The cells of the first Markdown table after ``heading``, header and rule left out."""
    lines = text[text.index(heading) :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_the_metrics_registry_table_is_the_registry_in_its_order() -> None:
    rows = _table_after((DOCS / "metrics.md").read_text(), "## The registry")
    assert [name.strip("`") for name, _, _ in rows] == list(METRICS)
    for name, groups, deal_only in rows:
        metric = METRICS[name.strip("`")]
        listed = groups.split(" (")[0]
        assert set(listed.split(", ")) - {"summary only"} == set(metric.groups), name
        assert deal_only.startswith("yes") == metric.deal_only, name
