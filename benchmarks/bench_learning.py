"""Evidence that GRPO learns: a tiny seller, warmed up on a scripted seller's transcripts, trained
against scripted buyers on CPU, evaluated on held-out scenarios before and after.

The run is a one-learner league (:mod:`leagues.league`), so everything lands in one database:

1. build the project's tiny chat model (``--hidden``, ``--layers``) with a long context;
2. warm start: fit it on ``--sft-episodes`` transcripts of ``--warm-start`` (default the
   scripted time-concession seller) for ``--sft-steps`` steps (:mod:`agents.finetune`);
3. generation 0: the warmed-up model (``base``) and the scripted sellers play the held-out
   evaluation scenarios (test split of the catalogue, their own seed) against the buyers;
4. ``--generations`` generations of ``--steps`` GRPO steps each against the scripted buyers, each
   checkpoint evaluated on the same held-out scenarios (paired with the base's episodes).

Then it writes ``learning_curves.png`` (reward and the Section 4.1 metrics per training step),
``held_out.png`` (held-out mean reward per generation with standard errors) and
``bench_learning.json``, and prints the held-out reward gain of the last checkpoint over the base
(target: at least +0.1).

The market is the paper's in-distribution market with ``--total-turns`` seller messages
(default 2 instead of 7): the tiny model rarely writes seven valid messages in a row, and with
every episode ending in a violation the groups would hold equal rewards and no advantage.

    python benchmarks/bench_learning.py --out runs/bench-learning            # ~40 min, 2 cores
    python benchmarks/bench_learning.py --out /tmp/b --sft-steps 20 --generations 1 --steps 2 \\
        --eval-episodes 8                                                     # a smoke run

Re-running with the same ``--out`` resumes (the league is resumable) and only redoes the plots.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

from arena.metrics import estimate
from leagues.config import LeagueConfig
from leagues.league import league_ratings, league_records, run_league, training_steps
from leagues.models import ensure_tiny_model
from leagues.report import CURVES
from tournaments.store import Store

NAME = "bench-learning"


def league_config(args: argparse.Namespace, model: Path) -> LeagueConfig:
    """The one-learner league the benchmark runs."""
    data: dict[str, Any] = {
        "name": NAME,
        "preset": "in-distribution",
        "market": {"total_turns": args.total_turns, "seller_temperature": args.temperature},
        "generations": args.generations,
        "seed": args.seed,
        "sellers": ["scripted:time", "scripted:satisficer", "scripted:prober"],
        "buyers": ["scripted:time", "scripted:tit-for-tat"],
        "cpu_threads": args.threads,
        "bootstrap_rounds": 100,
        "folder": str(args.out / "league"),
        "learner": {
            "model": str(model),
            "side": "seller",
            "steps_per_generation": args.steps,
            "opponents": "uniform",
            "eval_episodes": args.eval_episodes,
            "warm_start": args.warm_start,
            "warm_start_episodes": args.sft_episodes,
            "warm_start_steps": args.sft_steps,
            "train": {
                "batch_size": args.batch_size,
                "group_size": args.group_size,
                "micro_batch_size": args.group_size,
                "learning_rate": args.lr,
                "temperature": args.temperature,
                "max_new_tokens": args.max_new_tokens,
            },
        },
    }
    return LeagueConfig.from_dict(data)


def held_out(store: Store) -> list[dict[str, Any]]:
    """Mean held-out reward of every seller, and its paired gain over the base (the warmed-up
    model) on the same scenarios against the same buyers."""
    records, _ = league_records(store, NAME)
    rewards: dict[str, dict[tuple, float]] = {}
    for record in records:
        key = (record.scenario.seed, record.scenario.index, record.buyers)
        rewards.setdefault(record.seller, {})[key] = record.result.seller_reward
    agents = {a["spec"]: a for a in store.db.query("SELECT spec, label, generation FROM agents")}
    base = next(spec for spec, agent in agents.items() if agent["label"] == "base")
    rows = []
    for spec, by_key in rewards.items():
        mean = estimate(by_key.values())
        gain = estimate(v - rewards[base][k] for k, v in by_key.items() if k in rewards[base])
        rows.append(
            {
                "agent": agents[spec]["label"],
                "generation": agents[spec]["generation"],
                "episodes": mean.n,
                "mean_reward": mean.mean,
                "se": mean.se,
                "gain_over_base": gain.mean,
                "gain_se": gain.se,
            }
        )
    return sorted(rows, key=lambda r: (r["generation"] is None, r["generation"] or 0, r["agent"]))


def plot_curves(steps: list[dict[str, Any]], path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(16, 3.5 * ((len(CURVES) + 3) // 4)), dpi=100)
    FigureCanvasAgg(fig)
    axes = fig.subplots((len(CURVES) + 3) // 4, 4)
    for ax in axes.flat[len(CURVES) :]:
        ax.set_axis_off()
    for ax, (column, title) in zip(axes.flat, CURVES, strict=False):
        points = [(s["league_step"], s[column]) for s in steps if s[column] is not None]
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, color="tab:blue", alpha=0.35, marker="o", markersize=2)
            window = 5
            smooth = [
                sum(ys[max(0, i - window + 1) : i + 1]) / len(ys[max(0, i - window + 1) : i + 1])
                for i in range(len(ys))
            ]
            ax.plot(xs, smooth, color="tab:blue", label=f"mean of last {window}")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("GRPO step", fontsize=8)
        ax.tick_params(labelsize=7)
    axes.flat[0].legend(fontsize=7)
    fig.suptitle("bench_learning: tiny seller vs scripted buyers, per training step")
    fig.tight_layout()
    fig.savefig(path)


def plot_held_out(rows: list[dict[str, Any]], path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(8, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    learner = [r for r in rows if r["generation"] is not None]
    ax.errorbar(
        [r["generation"] for r in learner],
        [r["mean_reward"] for r in learner],
        yerr=[r["se"] for r in learner],
        marker="o",
        capsize=4,
        label="tiny seller (0: after warm start)",
    )
    styles = iter(["--", ":", "-.", (0, (1, 4))])
    for r in rows:
        if r["generation"] is None:
            style = next(styles, "--")
            ax.axhline(
                r["mean_reward"], linestyle=style, linewidth=0.8, color="grey", label=r["agent"]
            )
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("generation")
    ax.set_ylabel("held-out mean seller reward")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/bench-learning"))
    parser.add_argument("--hidden", type=int, default=64, help="tiny model width")
    parser.add_argument("--layers", type=int, default=2, help="tiny model depth")
    parser.add_argument("--warm-start", default="scripted:time", help="scripted seller to imitate")
    parser.add_argument("--sft-episodes", type=int, default=256)
    parser.add_argument("--sft-steps", type=int, default=300)
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--steps", type=int, default=25, help="GRPO steps per generation")
    parser.add_argument("--batch-size", type=int, default=16, help="episodes per GRPO step")
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--temperature", type=float, default=0.7, help="training and evaluation")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--total-turns", type=int, default=2, help="T of the market")
    parser.add_argument("--eval-episodes", type=int, default=64, help="per buyer, held out")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    model = ensure_tiny_model(args.out / "tiny-model", args.seed, args.hidden, args.layers)
    config = league_config(args, model)
    db = args.out / "bench.db"
    started = time.perf_counter()
    run_league(config, db, report=False)
    seconds = time.perf_counter() - started
    with Store.open(db) as store:
        steps = training_steps(store, NAME)
        rows = held_out(store)
        ratings = league_ratings(store, NAME)
    plot_curves(steps, args.out / "learning_curves.png")
    plot_held_out(rows, args.out / "held_out.png")
    last = max((r for r in rows if r["generation"]), key=lambda r: r["generation"], default=None)
    result = {
        "config": config.to_dict(),
        "seconds_this_run": seconds,
        "held_out": rows,
        "training_steps": [
            {k: s[k] for k in ("league_step", *[c for c, _ in CURVES], "seconds")} for s in steps
        ],
        "ratings_last_generation": [r for r in ratings if r["generation"] == args.generations],
        "gain_of_last_checkpoint": None if last is None else last["gain_over_base"],
    }
    (args.out / "bench_learning.json").write_text(json.dumps(result, indent=2))
    print(f"{'agent':<28} {'gen':>4} {'episodes':>8} {'held-out reward':>18} {'gain vs base':>16}")
    for r in rows:
        gen = "-" if r["generation"] is None else str(r["generation"])
        gain = (
            ""
            if math.isnan(r["gain_over_base"])
            else f"{r['gain_over_base']:+.3f} ± {r['gain_se']:.3f}"
        )
        reward = f"{r['mean_reward']:+.3f} ± {r['se']:.3f}"
        print(f"{r['agent']:<28} {gen:>4} {r['episodes']:>8} {reward:>18} {gain:>16}")
    if last is not None:
        verdict = "met" if last["gain_over_base"] >= 0.1 else "NOT met"
        print(f"target (+0.1 held-out reward over the warm start): {verdict}")
    print(f"wrote {args.out / 'bench_learning.json'}, learning_curves.png, held_out.png")


if __name__ == "__main__":
    main()
