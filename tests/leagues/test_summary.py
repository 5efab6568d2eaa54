"""The league summary printed by ``arena league run``."""

from __future__ import annotations

from rich.console import Console

from leagues.summary import LeagueSummary


def test_names_specs_and_paths_are_printed_verbatim_never_as_markup() -> None:
    """A checkpoint label or spec rich would read as markup ([/x]) is printed as written."""
    summary = LeagueSummary(
        name="[/league]",
        db_path="/runs/[b]x[/b].db",
        folder="/runs/[/x]",
        report=None,
        generations=(
            {
                "generation": 1,
                "side": "seller",
                "label": "gen-1-[/s]",
                "parent": "base",
                "opponents": "scripted:time?e=[1]:1.00",
                "train_reward": "-0.100 -> +0.200",
                "zero_advantage": "3/8",
            },
        ),
        ratings=(
            {
                "role": "seller",
                "label": "[bold]gen-1",
                "rating": 1010.0,
                "ci_low": 990.0,
                "ci_high": 1030.0,
                "episodes": 32,
                "reward": 0.25,
            },
        ),
    )
    console = Console(width=200, record=True)
    console.print(summary)
    text = console.export_text()
    for shown in ("[/league]", "gen-1-[/s]", "scripted:time?e=[1]:1.00", "[bold]gen-1",
                  "database: /runs/[b]x[/b].db", "files: /runs/[/x]", "[990, 1030]"):  # fmt: skip
        assert shown in text, shown
