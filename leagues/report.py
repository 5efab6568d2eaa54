"""League sections for ``arena report``: training curves (paper Figures 4-9) and ratings per
generation, as (title, PNG, text) sections for :func:`tournaments.report.write_report`.

    from leagues.report import league_sections
    write_report(db, out, extra_sections=lambda out_dir: league_sections(db, out_dir))

Plots use matplotlib's object API with the Agg canvas, imported inside the functions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from arena.metrics import METRICS, TRAINING, Metric
from leagues.state import league_ratings, leagues_in, training_steps
from tournaments.plots import drawn, interval_bars
from tournaments.report import write_report
from tournaments.store import Store

PHASES = {
    1: "Phase 1, cost-floor internalisation: violations fall",
    2: "Phase 2, concentrated closing: deals rise",
    3: "Phase 3, surplus and rank-1 routing: probing breadth and top-buyer rate rise",
}
"""The paper's training phases (Sec 4.3), by ``Metric.phase``: phase 1 metrics should fall,
the others rise."""

TREND_THRESHOLD = 0.02
"""Smallest change between the first and the last quarter of the steps called a rise or a fall."""


def _curve(metric: Metric) -> tuple[str, str]:
    deal_only = ", deal only" if metric.deal_only else ""
    figure = f", Fig. {metric.figure}" if metric.figure else ""
    return metric.name, f"{metric.header}{deal_only} ({metric.reference}{figure})"


PANEL_ROWS: tuple[tuple[tuple[str, str], ...], ...] = (
    *(
        tuple(
            _curve(m)
            for m in sorted(METRICS.values(), key=lambda m: m.figure or 99)
            if m.phase == phase and (m.name == "reward" or TRAINING in m.groups)
        )
        for phase in PHASES
    ),
    (
        ("loss", "Loss"),
        ("clip_ratio", "Clip ratio"),
        ("zero_advantage_groups", "Zero-advantage groups (equal rewards)"),
        ("sampler_logp_diff", "Sampler/trainer |logprob gap| (vLLM)"),
    ),
)
"""Panels of the training-curve figure, one row per phase (the registry's training metrics and
the reward, by ``Metric.phase``) and a row of training diagnostics."""

CURVES: tuple[tuple[str, str], ...] = tuple(panel for row in PANEL_ROWS for panel in row)
"""(training_steps column, panel title) of every training curve."""

SIDE_COLORS = {"seller": "tab:blue", "buyer": "tab:orange", "self-play": "tab:green"}

Section = tuple[str, Path | None, str]


def _figure(rows: int, cols: int, width: float, height: float) -> tuple[Any, Any]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig, fig.subplots(rows, cols, squeeze=False)


def plot_training_curves(steps: Sequence[dict[str, Any]], path: Path, title: str) -> Path:
    """One row of panels per training phase (and one of diagnostics), each metric over league
    steps; dashed lines mark generation boundaries."""
    from matplotlib.ticker import MaxNLocator

    width = max(len(row) for row in PANEL_ROWS)
    fig, axes = _figure(len(PANEL_ROWS), width, 4.0 * width, 3.2 * len(PANEL_ROWS))
    boundaries = sorted(
        {s["league_step"] - s["step"] for s in steps if s["step"] == 1 and s["league_step"] > 1}
    )
    last = max((s["league_step"] for s in steps), default=1)
    names = [f"Phase {p} ({'falls' if p == 1 else 'rises'} in the paper)" for p in PHASES]
    names.append("diagnostics")
    for r, (row, label) in enumerate(zip(PANEL_ROWS, names, strict=True)):
        for c in range(width):
            ax = axes[r, c]
            if c >= len(row):
                ax.set_axis_off()
                continue
            column, name = row[c]
            _plot_panel(ax, steps, column, boundaries)
            ax.set_xlim(0.5, last + 0.5)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_title(name, fontsize=9)
            ax.set_xlabel("training step", fontsize=8)
            ax.tick_params(labelsize=7)
        axes[r, 0].set_ylabel(label, fontsize=9)
    if axes[0, 0].get_legend_handles_labels()[0]:
        axes[0, 0].legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path)
    return path


def _plot_panel(ax: Any, steps: Sequence[dict[str, Any]], column: str, boundaries: list) -> None:
    plotted = False
    for side, color in SIDE_COLORS.items():
        points = [
            (s["league_step"], s[column])
            for s in steps
            if s["side"] == side and s.get(column) is not None
        ]
        if points:
            ax.plot(*zip(*points, strict=True), marker="o", markersize=3, color=color, label=side)
            plotted = True
    for b in boundaries:
        ax.axvline(b + 0.5, color="grey", linestyle="--", linewidth=0.8)
    if not plotted:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)


def trend(values: Sequence[float]) -> tuple[float, float, str]:
    """(mean of the first quarter, mean of the last quarter, "rises" / "falls" / "flat")."""
    k = max(1, len(values) // 4)
    first, last = math.fsum(values[:k]) / k, math.fsum(values[-k:]) / k
    if last - first > TREND_THRESHOLD:
        return first, last, "rises"
    if first - last > TREND_THRESHOLD:
        return first, last, "falls"
    return first, last, "flat"


def phases_text(steps: Sequence[dict[str, Any]]) -> str:
    """For every side and phase: each phase metric's first and last quarter over the side's
    training steps, and whether it moved the way the paper's phase says (visible) or not."""
    lines = []
    for side in SIDE_COLORS:
        rows = sorted((s for s in steps if s["side"] == side), key=lambda s: s["league_step"])
        if not rows:
            continue
        lines.append(f"{side}, {len(rows)} steps (first quarter -> last quarter):")
        for phase, row in zip(PHASES, PANEL_ROWS, strict=False):
            expected = "falls" if phase == 1 else "rises"
            parts = []
            for column, _ in row:
                values = [s[column] for s in rows if s.get(column) is not None]
                if not values:
                    parts.append(f"{column} -")
                    continue
                first, last, moved = trend(values)
                verdict = "as in the paper" if moved == expected else "not visible"
                parts.append(f"{column} {first:.3f} -> {last:.3f} ({moved}: {verdict})")
            lines.append(f"  {PHASES[phase]}: " + "; ".join(parts))
    return "\n".join(lines)


def plot_generation_ratings(ratings: Sequence[dict[str, Any]], path: Path, title: str) -> Path:
    """Each agent's Bradley-Terry rating after every generation, with its 95% interval."""
    from matplotlib.ticker import MaxNLocator

    fig, axes = _figure(1, 2, 14.0, 5.0)
    for ax, role in zip(axes.flat, ("seller", "buyer"), strict=True):
        agents = sorted(
            {r["label"] for r in ratings if r["role"] == role and r["rating"] is not None}
        )
        for k, label in enumerate(agents):
            rows = sorted(
                (
                    r
                    for r in ratings
                    if r["role"] == role and r["label"] == label and r["rating"] is not None
                ),
                key=lambda r: r["generation"],
            )
            xs = [r["generation"] + (k - len(agents) / 2) * 0.03 for r in rows]
            ys = [r["rating"] for r in rows]
            low, high = interval_bars(rows)
            ax.errorbar(xs, ys, yerr=[low, high], marker="o", capsize=3, label=label)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(f"{role} ratings per generation", fontsize=10)
        ax.set_xlabel("generation (0: before training)", fontsize=8)
        ax.set_ylabel("Bradley-Terry rating (Elo scale)", fontsize=8)
        if agents:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "no ratings", ha="center", va="center", transform=ax.transAxes)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path)
    return path


def ratings_text(ratings: Sequence[dict[str, Any]]) -> str:
    """The ratings of every generation as aligned text lines."""
    lines = []
    for generation in sorted({r["generation"] for r in ratings}):
        lines.append(f"after generation {generation}:")
        for r in ratings:
            if r["generation"] != generation:
                continue
            rating = "-" if r["rating"] is None else f"{r['rating']:7.1f}"
            interval = (
                ""
                if r["ci_low"] is None or r["ci_high"] is None
                else f"[{r['ci_low']:.0f}, {r['ci_high']:.0f}]"
            )
            reward = "-" if r["reward"] is None else f"{r['reward']:+.3f}"
            lines.append(
                f"  {r['role']:<6} {r['label']:<40} {rating} {interval:<14} "
                f"episodes {r['episodes']:<5} mean reward {reward}"
            )
    return "\n".join(lines)


def steps_text(steps: Sequence[dict[str, Any]]) -> str:
    """The last step of every generation, as text."""
    lines = []
    for generation in sorted({s["generation"] for s in steps}):
        last = max((s for s in steps if s["generation"] == generation), key=lambda s: s["step"])
        parts = [f"generation {generation} ({last['side']}), step {last['step']}:"]
        for column, _ in CURVES:
            value = last.get(column)
            if value is not None and not math.isnan(value):
                parts.append(f"{column} {value:.3f}")
        lines.append(" ".join(parts))
    return "\n".join(lines)


def league_sections(
    db_path: str | Path, out_dir: str | Path, league: str | None = None
) -> list[Section]:
    """(title, PNG, text) sections for every league in the database (or the one named)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    sections: list[Section] = []
    with Store.open(db_path, read_only=True) as store:
        names = leagues_in(store) if league is None else [league]
        for name in names:
            safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)
            steps = training_steps(store, name)
            ratings = league_ratings(store, name)
            path = out / f"league_{safe}_training.png"
            curves, curves_note = drawn(
                path,
                lambda steps=steps, path=path, name=name: plot_training_curves(
                    steps, path, f"{name}: training curves"
                ),
            )
            sections.append(
                (
                    f"League {name}: training curves (Figures 4-9)",
                    curves,
                    "Per optimizer step, over the step's rollout batch, one row per training "
                    "phase of the paper (Section 4.3): the learner's reward and the Section 4.1 "
                    "metrics of its episodes; then the loss, the clip ratio, the GRPO groups "
                    "with equal rewards (they train nothing) and, with vLLM, the gap between "
                    "the sampler's and the trainer's token logprobs. Dashed lines separate "
                    "generations."
                    + curves_note
                    + "\n"
                    + phases_text(steps)
                    + "\n"
                    + steps_text(steps),
                )
            )
            path = out / f"league_{safe}_ratings.png"
            board, board_note = drawn(
                path,
                lambda ratings=ratings, path=path, name=name: plot_generation_ratings(
                    ratings, path, f"{name}: ratings per generation"
                ),
            )
            sections.append(
                (
                    f"League {name}: ratings per generation",
                    board,
                    "Bradley-Terry ratings with 95% bootstrap intervals, refitted on every "
                    "league evaluation episode after each generation."
                    + board_note
                    + "\n"
                    + ratings_text(ratings),
                )
            )
    return sections


def write_league_report(
    db_path: str | Path, out_dir: str | Path, league: str | None = None
) -> Path:
    """The project report (tournament sections) with the league sections added."""
    return write_report(
        db_path, out_dir, extra_sections=lambda out: league_sections(db_path, out, league)
    )
