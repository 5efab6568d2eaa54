"""The report's plots: matplotlib's object API with the Agg renderer, imported inside the
functions, so matplotlib stays an optional dependency and no global backend is touched."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from arena.metrics import METRICS
from tournaments.comparisons import RATING_ROLES

SKILL_AXES: tuple[str, ...] = (
    "reward",
    "deal_on_top_buyer_rate",
    "sell_above_cost_accuracy",
    "deal_rate",
    "surplus_extraction_ratio",
)
"""The five metrics of the seller skill profile, clockwise from the top (paper Figure 3);
their labels are the registry's headers (:data:`arena.metrics.METRICS`)."""

ROLE_TITLES = {
    "seller": "Sellers",
    "buyer": "Buyer entries",
    "cross": "Sellers and buyers on one scale (cross-role)",
}


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _save(fig: Any, path: Path) -> Path:
    fig.savefig(path, format="png")
    return path


def _note(fig: Any, text: str) -> None:
    fig.text(0.5, 0.5, text, ha="center", va="center", fontsize=12, color="#666")


def _number(value: Any) -> float:
    return math.nan if value is None else float(value)


def interval_bars(rows: Sequence[dict[str, Any]]) -> tuple[list[float], list[float]]:
    """Error-bar lengths below and above each row's ``rating`` from its ``ci_low``/``ci_high``.

    A percentile bootstrap interval can exclude the point estimate on tiny or lopsided data
    (every game won, or an anchored fit): the bar then stops at the point instead of going
    negative, which matplotlib refuses. A missing bound draws no bar on that side."""
    low, high = [], []
    for r in rows:
        rating = float(r["rating"])
        ci_low = rating if r.get("ci_low") is None else float(r["ci_low"])
        ci_high = rating if r.get("ci_high") is None else float(r["ci_high"])
        low.append(max(0.0, rating - ci_low) if math.isfinite(ci_low) else 0.0)
        high.append(max(0.0, ci_high - rating) if math.isfinite(ci_high) else 0.0)
    return low, high


def drawn(path: Path, draw: Callable[[], object]) -> tuple[Path | None, str]:
    """Run ``draw`` (which writes ``path``); (path, "") or, when it fails, (None, a note).

    A report is the last step of long runs (a league, a tournament): a plot that fails on
    unusual data is skipped with a note naming why, and never fails the run."""
    try:
        draw()
    except Exception as error:  # any plotting failure: the page says so, the run goes on
        return None, f"\n(plot not drawn: {type(error).__name__}: {error})"
    return path, ""


def plot_leaderboard(boards: dict[str, list[dict[str, Any]]], path: Path) -> Path:
    """Ratings with their bootstrap intervals as error bars, one panel per role with ratings."""
    rated = {role: [r for r in rows if r["rating"] is not None] for role, rows in boards.items()}
    roles = [role for role in RATING_ROLES if rated.get(role)]
    height = max(2.5, 0.35 * sum(len(rated[r]) for r in roles) + 1.2 * len(roles))
    fig = _figure(9, height)
    if not roles:
        _note(fig, "no comparisons yet: ratings need two players that met on common scenarios")
        return _save(fig, path)
    axes = fig.subplots(len(roles), 1, squeeze=False)[:, 0]
    for ax, role in zip(axes, roles, strict=True):
        rows = rated[role][::-1]
        ratings = [r["rating"] for r in rows]
        low, high = interval_bars(rows)
        labels = [f"{r['agent']} ({r['role']})" if role == "cross" else r["agent"] for r in rows]
        colors = ["tab:blue" if r["role"] == "seller" else "tab:orange" for r in rows]
        y = list(range(len(rows)))
        ax.errorbar(ratings, y, xerr=[low, high], fmt="none", ecolor="#555", capsize=4)
        ax.scatter(ratings, y, c=colors, zorder=3)
        ax.set_yticks(y, labels)
        ax.set_title(ROLE_TITLES[role])
        ax.set_xlabel("rating (Elo scale)")
        ax.grid(axis="x", alpha=0.3)
    return _save(fig, path)


def plot_payoff(matrix: dict[str, Any], path: Path) -> Path:
    """Heatmap of mean seller reward per (seller, buyer entry), values written in the cells."""
    sellers, buyers = matrix["sellers"], matrix["buyers"]
    fig = _figure(max(5.0, 1.8 * len(buyers) + 3.5), max(3.0, 0.5 * len(sellers) + 1.8))
    if not sellers:
        _note(fig, "no episodes")
        return _save(fig, path)
    values = np.array([[_number(v) for v in row] for row in matrix["mean_seller_reward"]])
    ax = fig.subplots()
    image = ax.imshow(
        values, cmap="viridis", vmin=min(0.0, np.nanmin(values)), vmax=1.0, aspect="auto"
    )
    ax.set_xticks(range(len(buyers)), buyers, rotation=20, ha="right")
    ax.set_yticks(range(len(sellers)), sellers)
    ax.set_xlabel("buyer entry")
    ax.set_ylabel("seller")
    for s in range(len(sellers)):
        for b in range(len(buyers)):
            if not math.isnan(values[s, b]):
                ax.text(b, s, f"{values[s, b]:.3f}", ha="center", va="center", color="w")
    fig.colorbar(image, ax=ax, label="mean seller reward")
    return _save(fig, path)


def plot_skill_profile(sellers: Sequence[dict[str, Any]], path: Path) -> Path:
    """Radar chart of the five seller skills (paper Figure 3), one polygon per seller."""
    fig = _figure(7, 6)
    if not sellers:
        _note(fig, "no sellers")
        return _save(fig, path)
    ax = fig.add_subplot(projection="polar")
    angles = np.linspace(0.0, 2.0 * np.pi, len(SKILL_AXES), endpoint=False)
    ax.set_theta_offset(np.pi / 2.0)
    ax.set_theta_direction(-1)
    for row in sellers:
        values = [min(1.0, max(0.0, _number(row.get(key)))) for key in SKILL_AXES]
        values = [0.0 if math.isnan(v) else v for v in values]
        closed_angles = [*angles, angles[0]]
        ax.plot(closed_angles, [*values, values[0]], label=row["agent"])
        ax.fill(closed_angles, [*values, values[0]], alpha=0.1)
    labels = [textwrap.fill(METRICS[key].header, 16) for key in SKILL_AXES]
    ax.set_xticks(angles, labels)
    ax.set_ylim(0.0, 1.0)
    ax.legend(loc="upper right", bbox_to_anchor=(1.35, 1.12), fontsize=8)
    return _save(fig, path)


def plot_rank_distribution(sellers: Sequence[dict[str, Any]], path: Path) -> Path:
    """Stacked horizontal bars: share of deals per buyer budget rank, one bar per seller
    (paper Figure 10); shares of 5% or more are written in their segment."""
    import matplotlib as mpl

    shares = [row.get("deal_buyer_rank_distribution") or [] for row in sellers]
    ranks = max((len(s) for s in shares), default=0)
    fig = _figure(9, max(2.5, 0.45 * len(sellers) + 1.5))
    if ranks == 0:
        _note(fig, "no deals")
        return _save(fig, path)
    ax = fig.subplots()
    blues = mpl.colormaps["Blues"]
    colors = [blues(0.9 - 0.5 * k / max(1, ranks - 2)) for k in range(ranks - 1)] + ["#bbbbbb"]
    if ranks == 1:
        colors = [blues(0.9)]
    y = list(range(len(sellers)))[::-1]
    left = [0.0] * len(sellers)
    for k in range(ranks):
        widths = [s[k] if k < len(s) else 0.0 for s in shares]
        ax.barh(y, widths, left=left, color=colors[k], label=f"rank {k + 1}")
        for yi, x0, w in zip(y, left, widths, strict=True):
            if w >= 0.05:
                color = "w" if k < ranks - 1 else "#222"
                ax.text(x0 + w / 2, yi, f"{100 * w:.1f}", ha="center", va="center", color=color)
        left = [a + w for a, w in zip(left, widths, strict=True)]
    ax.set_yticks(y, [row["agent"] for row in sellers])
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel("share of deals (deal episodes only)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=ranks, fontsize=8)
    return _save(fig, path)


def plot_ratings_over_time(over_time: dict[str, dict[str, Any]], path: Path) -> Path:
    """Ratings fitted on growing scenario prefixes, one panel per role with ratings."""
    roles = [
        role
        for role in RATING_ROLES
        if any(v is not None for s in over_time[role]["series"] for v in s["ratings"])
    ]
    fig = _figure(9, max(2.5, 3.0 * len(roles)))
    if not roles:
        _note(fig, "no comparisons yet")
        return _save(fig, path)
    axes = fig.subplots(len(roles), 1, squeeze=False)[:, 0]
    for ax, role in zip(axes, roles, strict=True):
        x = over_time[role]["scenarios"]
        for series in over_time[role]["series"]:
            y = [_number(v) for v in series["ratings"]]
            label = f"{series['agent']} ({series['role']})" if role == "cross" else series["agent"]
            style = "-" if series["role"] == "seller" else "--"
            ax.plot(x, y, style, marker="o", markersize=3, label=label)
        ax.set_title(ROLE_TITLES[role])
        ax.set_xlabel("scenarios included")
        ax.set_ylabel("rating (Elo scale)")
        ax.grid(alpha=0.3)
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
    return _save(fig, path)
