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
import contextlib
import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from arena.estimates import estimate
from leagues.config import LeagueConfig
from leagues.evaluation import coevolving, held_out, targets
from leagues.report import CURVES
from leagues.seeds import across_seeds, holding, run_seeds, seed_configs, seeds_table
from leagues.state import training_steps
from tournaments.store import Store

STEP_KEYS = ("league_step", *[column for column, _ in CURVES], "seconds")


def step_seconds(steps: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Wall seconds per optimizer step: mean and standard error over the league's steps."""
    est = estimate(s["seconds"] for s in steps if s["seconds"] is not None)
    return {"mean": est.mean, "se": est.se, "steps": est.n}


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


def shown(agent: str) -> str:
    """A row's name: another league's checkpoint (a spec with ``lora=<folder>/<gen>/adapter``)
    by its league folder and generation, since its spec is a path."""
    if agent.startswith("hf:") and "lora=" in agent:
        parts = Path(agent.split("lora=", 1)[1].split("&", 1)[0]).parts
        return "/".join(parts[-3:-1]) if parts[-1] == "adapter" else "/".join(parts[-2:])
    return agent


def fmt(figure: dict[str, float], gain: bool = True) -> str:
    text = f"{figure['mean']:+.3f} ± {figure['se']:.3f}"
    if gain and not math.isnan(figure["gain"]):
        text += f" ({figure['gain']:+.3f} ± {figure['gain_se']:.3f})"
    return text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=Path("examples/learning-league.toml"))
    parser.add_argument("--db", type=Path, action="append", default=None,
                        help="the league database (default runs/learning.db); repeat it for seeds "
                        "run in parallel into one database each")  # fmt: skip
    parser.add_argument("--no-run", dest="run", action="store_false",
                        help="only read the database back")  # fmt: skip
    parser.add_argument("--role", choices=("seller", "buyer"), default="seller",
                        help="whose held-out figures and ratings to report")  # fmt: skip
    parser.add_argument("--opponents", action="append", default=[],
                        help="only the held-out episodes facing these opponents (label or "
                        "spec, shell patterns: 'hf:*'), ratings refitted; repeatable")  # fmt: skip
    parser.add_argument("--reference", default="base",
                        help="the agent (label or spec) gains are paired against")  # fmt: skip
    parser.add_argument(
        "--seeds",
        type=lambda t: [int(x) for x in t.split(",")],
        default=None,
        help="league seeds, e.g. 0,1,2 (default: the config's seeds, else its seed)",
    )
    args = parser.parse_args(argv)
    dbs = args.db or [Path("runs/learning.db")]
    config = LeagueConfig.from_toml(args.config)
    role = args.role
    leagues = seed_configs(config, args.seeds)
    started = time.perf_counter()
    if args.run:
        if len(dbs) > 1:
            parser.error("--db more than once reads seeds run in parallel: add --no-run")
        run_seeds(config, dbs[0], args.seeds, report=False)
    seconds = time.perf_counter() - started
    out = dbs[0].parent
    names = [league.name for league in leagues]
    with contextlib.ExitStack() as stack:
        stores = [stack.enter_context(Store.open(db, read_only=True)) for db in dbs]
        view = {"opponents": args.opponents, "reference": args.reference}
        results = [report_league(holding(stores, league.name), league, role, out,
                                 len(leagues) > 1, **view) for league in leagues]  # fmt: skip
        across = across_seeds(stores, names, role, **view) if len(leagues) > 1 else None
    if across is not None:
        Console().print(seeds_table(dbs, names, role, **view))
    suffix = "" if role == "seller" else f"-{role}"
    path = out / f"bench_learning{suffix}.json"
    config_path = str(args.config)
    summary = {"config": config_path, "role": role, "seconds_this_run": seconds,
               **view, "leagues": results, "across_seeds": across}  # fmt: skip
    path.write_text(json.dumps(summary, indent=2, default=str))
    print(f"this run {seconds:.0f} s; wrote {path}")


def report_league(
    store: Store,
    config: LeagueConfig,
    role: str,
    out: Path,
    tagged: bool,
    opponents: Sequence[str] = (),
    reference: str = "base",
) -> dict[str, Any]:
    """Print one league's table and targets; draw its curves; return its figures."""
    steps = [s for s in training_steps(store, config.name) if s.get("side") in (None, role)]
    rows = held_out(store, config.name, role, opponents, reference)
    tag = (f"-{config.name}" if tagged else "") + ("" if role == "seller" else f"-{role}")
    plot_curves(steps, out / f"learning_curves{tag}.png")
    plot_held_out(rows, role, out / f"held_out{tag}.png")
    print(f"league {config.name}" + (f", facing {', '.join(opponents)} only" if opponents else ""))
    gain = f"reward (gain vs {reference})"
    print(f"{'agent':<22} {'gen':>3} {'rating [95%]':>18} {gain:>30} "
          f"{'deal rate (gain)':>30} {'violations (gain)':>30}")  # fmt: skip
    for r in rows:
        rating = r["rating"]
        interval = (
            "-"
            if rating["rating"] is None
            else f"{rating['rating']:.0f} [{rating['ci_low']:.0f}, {rating['ci_high']:.0f}]"
        )
        gen = "-" if r["generation"] is None else str(r["generation"])
        violations = fmt(r["violation_rate"]) if "violation_rate" in r else "-"
        print(f"{shown(r['agent']):<22} {gen:>3} {interval:>18} {fmt(r['reward']):>30} "
              f"{fmt(r['deal_rate']):>30} {violations:>30}")  # fmt: skip
    per_step = step_seconds(steps)
    print(f"wall time per GRPO step: {per_step['mean']:.1f} ± {per_step['se']:.1f} s "
          f"({per_step['steps']} steps)")  # fmt: skip
    # the targets are over the base; a co-evolution league's lineages have their own bar
    met = targets(rows, role, coevolving(store, config.name)) if reference == "base" else {}
    for name, ok in met.items():
        print(f"target {name}: {'met' if ok else 'NOT met'}")
    return {
        "league": config.name,
        "seconds_per_step": per_step,
        "held_out": rows,
        "targets": met,
        "training_steps": [{k: s.get(k) for k in STEP_KEYS} for s in steps],
    }


if __name__ == "__main__":
    main()
