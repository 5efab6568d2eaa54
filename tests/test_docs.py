"""The docs follow the code: their settings tables are the config classes' help texts, and the
presets page names every preset with its sizes, the metrics, agent and architecture pages list
what the code has, and the README shows every command."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest
import typer

from agents.backends import BACKENDS, SAMPLING_KEYS
from agents.llm import LLMAgentConfig
from arena.config import MarketConfig, get_preset, preset_names
from arena.metrics import METRICS
from arena.settings import markdown_table
from arena_cli.app import app
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


@pytest.mark.parametrize("package", ["arena", "agents", "tournaments", "leagues", "arena_cli"])
def test_the_architecture_page_names_every_module_of_a_package(package: str) -> None:
    text = (DOCS / "architecture.md").read_text()
    section = text[text.index(f"## {package}/") :]
    section = section[: section.index("\n## ", 3)]
    root = DOCS.parent / package
    for path in sorted(root.rglob("*.py")):
        if path.name in ("__init__.py", "__main__.py"):
            continue
        name = path.relative_to(root).as_posix()
        assert f"`{name}`" in section, f"docs/architecture.md, {package}/: no `{name}`"


def test_the_agent_pages_key_tables_are_the_agent_and_sampling_settings() -> None:
    text = (DOCS / "agents.md").read_text()
    agent = _table_after(text, "**Agent**")
    sampling = _table_after(text, "**Sampling**")
    assert [row[0].strip("`") for row in agent] == [f.name for f in fields(LLMAgentConfig)]
    assert [row[0].strip("`") for row in sampling] == list(SAMPLING_KEYS)


@pytest.mark.parametrize("kind", sorted(BACKENDS))
def test_the_agent_page_lists_every_back_end_parameter_in_order(kind: str) -> None:
    text = (DOCS / "agents.md").read_text()
    listing = " ".join(text[text.index("**Back-end**") :].split("\n\n")[0].split())
    after = listing[listing.index(f"`{kind}`:") :]
    names = [f.name for f in fields(BACKENDS[kind][0])]
    positions = [after.find(f"`{name}`") for name in names]
    assert -1 not in positions and positions == sorted(positions), (kind, names)
    following = [after.find(f"`{other}`:") for other in BACKENDS if other != kind]
    end = min([p for p in following if p > 0], default=len(after))
    assert max(positions) < end, f"{kind}'s parameters run into another back-end's list"


def test_the_presets_table_gives_each_presets_sizes() -> None:
    rows = _table_after((DOCS / "presets.md").read_text(), "## The presets")
    for name, n, t, k, m, *_ in rows:
        config = get_preset(name.split("`")[1])
        sizes = (config.num_buyers, config.total_turns, config.per_buyer_cap, config.num_products)
        assert tuple(int(v) for v in (n, t, k, m)) == sizes, name


def test_the_readme_shows_every_command() -> None:
    text = (DOCS.parent / "README.md").read_text()
    group = typer.main.get_command(app)
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        subcommands = getattr(command, "commands", {})
        for full in [f"arena {name} {sub}" for sub in subcommands] or [f"arena {name}"]:
            assert full in text, f"README.md shows no `{full}`"
