"""What a league run leaves, as one object: per-generation rows, the latest ratings, the files;
printed by ``arena league run`` as rich tables."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from leagues.config import LeagueConfig
from leagues.state import generations, league_ratings, training_steps
from tournaments.store import Store


@dataclass(frozen=True)
class LeagueSummary:
    """What a league run leaves: per-generation rows, ratings, and where the files are."""

    name: str
    db_path: str
    folder: str
    report: str | None
    generations: tuple[dict[str, Any], ...]
    ratings: tuple[dict[str, Any], ...]
    """Ratings after the last generation."""

    def __rich__(self) -> Any:
        # Names, specs and paths are shown verbatim (Text), never read as rich markup.
        gens = Table(title=Text(f"league {self.name}: generations"))
        headers = ("gen", "side", "checkpoint", "parent", "opponents", "train reward",
                   "zero-advantage groups")  # fmt: skip
        for header in headers:
            gens.add_column(header)
        for row in self.generations:
            keys = ("generation", "side", "label", "parent", "opponents", "train_reward",
                    "zero_advantage")  # fmt: skip
            gens.add_row(*(Text(str(row[key])) for key in keys))
        board = Table(title="ratings after the last generation (Bradley-Terry, 95% interval)")
        for header in ("role", "agent", "rating", "interval", "episodes", "mean reward"):
            board.add_column(header)
        for row in self.ratings:
            interval = (
                "-"
                if row["ci_low"] is None or row["ci_high"] is None
                else f"[{row['ci_low']:.0f}, {row['ci_high']:.0f}]"
            )
            board.add_row(
                row["role"],
                Text(row["label"]),
                _fmt(row["rating"], 0),
                interval,
                str(row["episodes"]),
                _fmt(row["reward"], 3),
            )
        parts: list[Any] = [
            gens,
            board,
            Text(f"database: {self.db_path}"),
            Text(f"files: {self.folder}"),
        ]
        if self.report:
            parts.append(Text(f"report: {self.report}"))
        return Group(*parts)


def _fmt(value: Any, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def summarize(
    store: Store, config: LeagueConfig, folder: Path, report: Path | None, labels: dict[str, str]
) -> LeagueSummary:
    """The summary of everything stored for the league."""
    steps = training_steps(store, config.name)
    per_step = config.learner.train.scenarios_per_step
    rows = []
    for g, stage, plan in generations(store, config.name):
        if not 1 <= g <= config.generations:
            continue
        mine = [s for s in steps if s["generation"] == g]
        rewards = [s["reward"] for s in mine if s["reward"] is not None]
        zero = [s["zero_advantage_groups"] for s in mine if s["zero_advantage_groups"] is not None]
        resampled = sum(s.get("resampled_groups") or 0 for s in mine)
        mixture = ", ".join(
            f"{labels.get(spec, spec)}:{w:.2f}"
            for spec, w in zip(plan.opponents, plan.weights, strict=True)
        )
        rows.append(
            {
                "generation": g,
                "side": plan.side,
                "label": plan.label,
                "parent": plan.parent_label,
                "opponents": mixture or "itself",
                "train_reward": "-" if not rewards else f"{rewards[0]:+.3f} -> {rewards[-1]:+.3f}",
                # Groups that trained nothing (equal rewards), of all the generation's groups.
                "zero_advantage": "-"
                if not zero
                else f"{sum(zero):.0f}/{len(zero) * per_step}"
                + (f" ({resampled:.0f} resampled)" if resampled else ""),
                "stage": stage,
            }
        )
    ratings = [r for r in league_ratings(store, config.name) if r["generation"] == len(rows)]
    return LeagueSummary(
        name=config.name,
        db_path=str(store.path),
        folder=str(folder),
        report=None if report is None else str(report),
        generations=tuple(rows),
        ratings=tuple(ratings),
    )
