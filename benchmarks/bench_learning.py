"""Does the league learn? Per checkpoint: held-out reward, deal rate and top-buyer rate with
paired standard errors against the warm-started base, its rating, and the wall time per step.

It runs (or resumes) a league from its TOML file, by default examples/learning-league.toml, then
reads everything back from the league's database:

* held-out figures come from the league's evaluation tournaments: every seller (the base, each
  checkpoint, the scripted sellers) played the same held-out scenarios against the same buyer
  entries, so a checkpoint's gain over the base is a mean of paired differences;
* ratings are the league's own (Bradley-Terry, 95% bootstrap interval) after the last generation;
* per-step figures (reward, violations, deals, probing breadth, top-buyer rate, wall seconds)
  come from ``training_steps``.

    python benchmarks/bench_learning.py                                  # the learning league
    python benchmarks/bench_learning.py --config my.toml --db runs/my.db --no-run   # read only

    python benchmarks/bench_learning.py --config examples/coevolution-league.toml \
        --db runs/coevolution.db --role buyer                           # the buyer lineage

With ``--role buyer`` the rows are the buyers (a buyer entry that fills every buyer seat: the
base and each buyer checkpoint, and the scripted buyers), their figure the buyer side's reward
(mean over the seats) against the same sellers on the same scenarios.

It writes ``bench_learning[-buyer].json`` (and ``learning_curves.png``, ``held_out[-buyer].png``)
next to the database and prints the table docs/training.md quotes, with the issue's targets
checked.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from arena.buyer_metrics import episode_buyer_side_reward
from arena.estimates import estimate
from arena.metrics import episode_deal, episode_deal_on_top_buyer
from arena.records import EpisodeRecord
from leagues.config import LeagueConfig
from leagues.league import run_league
from leagues.report import CURVES
from leagues.state import league_ratings, league_records, training_steps
from tournaments.store import Store

EpisodeMetric = Callable[[EpisodeRecord], float | None]
FIGURES: dict[str, dict[str, EpisodeMetric]] = {
    "seller": {
        "reward": lambda r: r.result.seller_reward,
        "deal_rate": episode_deal,
        "top_buyer_rate": episode_deal_on_top_buyer,
    },
    "buyer": {
        "reward": episode_buyer_side_reward,
        "deal_rate": episode_deal,
        "top_buyer_rate": episode_deal_on_top_buyer,
    },
}
"""Held-out figures per role (the top-buyer rate counts deals only)."""
STEP_KEYS = ("league_step", *[column for column, _ in CURVES], "seconds")


def by_agent(records: Sequence[EpisodeRecord], role: str) -> dict[str, dict[tuple, EpisodeRecord]]:
    """Each agent's evaluation episodes, keyed so that two agents' keys pair the same scenario
    and the same opponents: a seller by (scenario, buyer lineup); a buyer (filling every buyer
    seat) by (scenario, seller)."""
    out: dict[str, dict[tuple, EpisodeRecord]] = {}
    for record in records:
        if record.result.outcome == "error":
            continue
        scenario = (record.scenario.seed, record.scenario.index)
        if role == "seller":
            out.setdefault(record.seller, {})[(*scenario, record.buyers)] = record
        elif len(set(record.buyers)) == 1:
            out.setdefault(record.buyers[0], {})[(*scenario, record.seller)] = record
    return out


def paired(
    mine: dict[tuple, EpisodeRecord], base: dict[tuple, EpisodeRecord], metric: EpisodeMetric
) -> dict[str, float]:
    """A seller's mean of ``metric`` and its gain over the base on the episodes both played
    (where the metric applies to both), each with its standard error."""
    own = estimate(v for v in map(metric, mine.values()) if v is not None)
    diffs = []
    for key, record in mine.items():
        if key in base:
            a, b = metric(record), metric(base[key])
            if a is not None and b is not None:
                diffs.append(a - b)
    gain = estimate(diffs)
    return {"mean": own.mean, "se": own.se, "n": own.n, "gain": gain.mean, "gain_se": gain.se}


def held_out(store: Store, league: str, role: str = "seller") -> list[dict[str, Any]]:
    """One row per agent of ``role`` in the league: its held-out figures, paired against the
    base."""
    records, _ = league_records(store, league)
    players = by_agent(records, role)
    agents = {
        a["spec"]: a
        for a in store.db.query("SELECT spec, label, generation FROM agents WHERE role = ?", [role])
    }
    base = next(spec for spec in players if agents.get(spec, {}).get("label") == "base")
    rows = []
    for spec, episodes in players.items():
        agent = agents.get(spec, {"label": spec, "generation": None})
        row: dict[str, Any] = {
            "agent": agent["label"],
            "spec": spec,
            "generation": agent["generation"],
        }
        for name, metric in FIGURES[role].items():
            row[name] = paired(episodes, players[base], metric)
        rows.append(row)
    return sorted(rows, key=lambda r: (r["generation"] is None, r["generation"] or 0, r["agent"]))


def ratings_after(store: Store, league: str, generation: int, role: str) -> dict[str, Any]:
    """Ratings of ``role`` after ``generation``, by agent spec (a buyer by its entry label,
    which for an entry of one spec is the spec)."""
    return {
        r["agent"]: r
        for r in league_ratings(store, league)
        if r["generation"] == generation and r["role"] == role
    }


def step_seconds(steps: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Wall seconds per optimizer step: mean and standard error over the league's steps."""
    est = estimate(s["seconds"] for s in steps if s["seconds"] is not None)
    return {"mean": est.mean, "se": est.se, "steps": est.n}


def targets(
    rows: Sequence[dict[str, Any]], ratings: dict[str, dict[str, Any]], role: str
) -> dict[str, Any]:
    """The issue's bar: the last checkpoint +0.10 over the base, deal rate >= 0.3 (sellers),
    its rating interval above the base's, ratings rising by generation, the newest checkpoint
    above its parent; and the sellers' stretch: above satisficer."""
    learner = sorted((r for r in rows if r["generation"]), key=lambda r: r["generation"])
    if not learner:
        return {}
    last = learner[-1]
    parent = learner[-2] if len(learner) > 1 else next(r for r in rows if r["agent"] == "base")
    base = next(r for r in rows if r["agent"] == "base")

    def rating(row: dict[str, Any]) -> float | None:
        return ratings.get(row["spec"], {}).get("rating")

    rises = [rating(base), *map(rating, learner)]
    out = {
        "gain_over_base": last["reward"]["gain"] >= 0.10,
        "interval_above_base": (ratings.get(last["spec"], {}).get("ci_low") or -math.inf)
        > (ratings.get(base["spec"], {}).get("ci_high") or math.inf),
        "ratings_rise": all(
            a is not None and b is not None and b > a for a, b in itertools.pairwise(rises)
        ),
        "newest_above_parent": (rating(last) or -math.inf) > (rating(parent) or math.inf),
    }
    if role == "seller":
        satisficer = next((r for r in rows if r["spec"] == "scripted:satisficer"), None)
        out["deal_rate"] = last["deal_rate"]["mean"] >= 0.3
        out["above_satisficer"] = satisficer is not None and (rating(last) or -math.inf) > (
            rating(satisficer) or math.inf
        )
    return out


def plot_curves(steps: Sequence[dict[str, Any]], path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows = (len(CURVES) + 3) // 4
    fig = Figure(figsize=(16, 3.5 * rows), dpi=100)
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, 4)
    for ax in axes.flat[len(CURVES) :]:
        ax.set_visible(False)
    for ax, (column, title) in zip(axes.flat, CURVES, strict=False):
        points = [(s["league_step"], s[column]) for s in steps if s.get(column) is not None]
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, color="tab:blue", marker="o", markersize=2)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("GRPO step", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.suptitle("per training step (the paper's Figures 4-9)")
    fig.tight_layout()
    fig.savefig(path)


def plot_held_out(rows: Sequence[dict[str, Any]], role: str, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(8, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    learner = [r for r in rows if r["generation"] is not None]
    ax.errorbar(
        [r["generation"] for r in learner],
        [r["reward"]["mean"] for r in learner],
        yerr=[r["reward"]["se"] for r in learner],
        marker="o",
        capsize=4,
        label="learner (0: the warm-started base)",
    )
    for style, r in zip(("--", ":", "-.", "--"), (r for r in rows if r["generation"] is None),
                        strict=False):  # fmt: skip
        ax.axhline(r["reward"]["mean"], linestyle=style, linewidth=0.8, color="grey",
                   label=r["agent"])  # fmt: skip
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("generation")
    ax.set_ylabel(f"held-out mean {role} reward")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)


def fmt(figure: dict[str, float], gain: bool = True) -> str:
    text = f"{figure['mean']:+.3f} ± {figure['se']:.3f}"
    if gain and not math.isnan(figure["gain"]):
        text += f" ({figure['gain']:+.3f} ± {figure['gain_se']:.3f})"
    return text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=Path("examples/learning-league.toml"))
    parser.add_argument("--db", type=Path, default=Path("runs/learning.db"))
    parser.add_argument("--no-run", dest="run", action="store_false",
                        help="only read the database back")  # fmt: skip
    parser.add_argument("--role", choices=("seller", "buyer"), default="seller",
                        help="whose held-out figures and ratings to report")  # fmt: skip
    args = parser.parse_args(argv)
    config = LeagueConfig.from_toml(args.config)
    role = args.role
    started = time.perf_counter()
    if args.run:
        run_league(config, args.db, report=False)
    seconds = time.perf_counter() - started
    with Store.open(args.db, read_only=True) as store:
        steps = [s for s in training_steps(store, config.name) if s.get("side") in (None, role)]
        rows = held_out(store, config.name, role)
        ratings = ratings_after(store, config.name, config.generations, role)
    for row in rows:
        row["rating"] = {k: ratings.get(row["spec"], {}).get(k) for k in ("rating", "ci_low",
                                                                        "ci_high")}  # fmt: skip
    out = args.db.parent
    suffix = "" if role == "seller" else f"-{role}"
    plot_curves(steps, out / f"learning_curves{suffix}.png")
    plot_held_out(rows, role, out / f"held_out{suffix}.png")
    result = {
        "config": str(args.config),
        "role": role,
        "seconds_this_run": seconds,
        "seconds_per_step": step_seconds(steps),
        "held_out": rows,
        "targets": targets(rows, ratings, role),
        "training_steps": [{k: s.get(k) for k in STEP_KEYS} for s in steps],
    }
    (out / f"bench_learning{suffix}.json").write_text(json.dumps(result, indent=2, default=str))
    print(f"{'agent':<22} {'gen':>3} {'rating [95%]':>18} {'reward (gain vs base)':>30} "
          f"{'deal rate (gain)':>30} {'top buyer (gain)':>30}")  # fmt: skip
    for r in rows:
        rating = r["rating"]
        interval = (
            "-"
            if rating["rating"] is None
            else f"{rating['rating']:.0f} [{rating['ci_low']:.0f}, {rating['ci_high']:.0f}]"
        )
        gen = "-" if r["generation"] is None else str(r["generation"])
        print(f"{r['agent']:<22} {gen:>3} {interval:>18} {fmt(r['reward']):>30} "
              f"{fmt(r['deal_rate']):>30} {fmt(r['top_buyer_rate']):>30}")  # fmt: skip
    per_step = result["seconds_per_step"]
    print(f"wall time per GRPO step: {per_step['mean']:.1f} ± {per_step['se']:.1f} s "
          f"({per_step['steps']} steps); this run {seconds:.0f} s")  # fmt: skip
    for name, met in result["targets"].items():
        print(f"target {name}: {'met' if met else 'NOT met'}")
    print(f"wrote {out / f'bench_learning{suffix}.json'}, learning_curves{suffix}.png, "
          f"held_out{suffix}.png")  # fmt: skip


if __name__ == "__main__":
    main()
