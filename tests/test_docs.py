"""The docs follow the code: their settings tables are the config classes' help texts, and the
presets page names every preset."""

from __future__ import annotations

import json
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


def test_the_training_page_lists_the_grpo_defaults_the_fields_the_league_sets_and_the_renames():
    from leagues.train_config import GRPO_DEFAULTS, LEAGUE_SETS, RENAMED

    text = (DOCS / "training.md").read_text()
    for key, value in GRPO_DEFAULTS.items():
        assert f"| `learner.train.{key}` | `{json.dumps(value)}` |" in text, key
    assert all(f"| `{key}` | {reason} |" in text for key, reason in LEAGUE_SETS.items())
    assert all(f"| `{old}` | `{new}` |" in text for old, new in RENAMED.items())


def test_the_presets_page_lists_every_preset() -> None:
    text = (DOCS / "presets.md").read_text()
    assert all(f"| `{name}`" in text for name in preset_names())


def test_the_metrics_page_documents_every_registered_metric() -> None:
    text = (DOCS / "metrics.md").read_text()
    assert all(f"`{name}`" in text for name in METRICS)
    assert f"the {len(METRICS)} estimates" in text
