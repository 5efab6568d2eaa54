"""Several seeds as one run: the same league recipe under each seed, and its figures across them.

One good run of an RL recipe is an anecdote (Henderson et al. 2018): ``arena league run
CONFIG --seeds 0,1,2`` (or ``seeds = [0, 1, 2]`` in ``[league]``) runs the league once per seed
into one database, as leagues named ``<name>-seed<k>`` (their files in ``<folder>/seed-<k>``),
each with ``seed = k`` and everything else equal: its own base model (tiny model, copy
pretraining and warm start are seeded by it), training scenarios, opponent draws, rollouts and
LoRA initialisation. Evaluation scenarios are the same for every seed (``eval_seed``, by default
derived from the config's ``seed``) so that the seeds are compared on one held-out set.

Across the seeds (:func:`across_seeds`): each seed's last checkpoint's paired gain over its own
base, and the mean gain with a 95% bootstrap interval over the runs (the runs resampled with
replacement; with few runs the interval is wide, which is the point), its interquartile mean
(rliable's IQM, Agarwal et al. 2021), and each learning target met on how many seeds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Group
from rich.table import Table
from rich.text import Text

from leagues.config import LeagueConfig
from leagues.evaluation import coevolving, held_out, targets
from leagues.league import run_league
from leagues.summary import LeagueSummary
from tournaments.store import Store

BOOTSTRAP_ROUNDS = 10_000
"""Resamples of the runs for the interval across seeds."""


def seed_configs(config: LeagueConfig, seeds: Sequence[int] | None = None) -> list[LeagueConfig]:
    """One league config per seed (``seeds``, else ``config.seeds``; neither: the config as is).

    Each is named ``<name>-seed<k>``, seeded ``k``, its files in its own ``seed-<k>`` folder
    (under ``folder`` when set), and evaluated on the held-out scenarios of the config's own
    ``seed`` (or ``eval_seed``): the same for every seed, however the seeds are split across
    runs (``--seeds 1`` alone evaluates on the same set as ``--seeds 0,1,2``)."""
    chosen = list(config.seeds if seeds is None else seeds)
    if not chosen:
        return [config]
    if len(set(chosen)) != len(chosen) or any(not isinstance(s, int) or s < 0 for s in chosen):
        raise ValueError(f"--seeds / league.seeds must be distinct integers >= 0, got {chosen}")
    eval_seed = config.evaluation_seed  # from the config's own seed, whichever seeds are run
    return [
        dataclasses.replace(
            config,
            name=f"{config.name}-seed{seed}",
            seed=seed,
            seeds=(),
            eval_seed=eval_seed,
            folder=str(Path(config.folder) / f"seed-{seed}") if config.folder else "",
        )
        for seed in chosen
    ]


def run_seeds(
    config: LeagueConfig,
    db_path: str | Path,
    seeds: Sequence[int] | None = None,
    log: Callable[[str], None] | None = None,
    report: bool = True,
) -> list[LeagueSummary]:
    """Run (or resume) the league under each seed, one after the other, into one database."""
    summaries = []
    for league in seed_configs(config, seeds):
        kwargs = {} if log is None else {"log": log}
        summaries.append(run_league(league, db_path, report=report, **kwargs))
    return summaries


def interval_across_runs(
    values: Sequence[float], rounds: int = BOOTSTRAP_ROUNDS, seed: int = 0
) -> dict[str, float]:
    """Mean, interquartile mean and a 95% percentile-bootstrap interval of the mean over runs."""
    xs = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    if xs.size == 0:
        return {"n": 0, "mean": math.nan, "iqm": math.nan, "ci_low": math.nan,
                "ci_high": math.nan}  # fmt: skip
    rng = np.random.default_rng(seed)
    means = xs[rng.integers(0, xs.size, size=(rounds, xs.size))].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    return {
        "n": int(xs.size),
        "mean": float(xs.mean()),
        "iqm": interquartile_mean(xs),
        "ci_low": float(low),
        "ci_high": float(high),
    }


def interquartile_mean(values: Sequence[float]) -> float:
    """The mean of the values with the lowest and highest quarter (rounded down) left out:
    rliable's IQM (``scipy.stats.trim_mean(values, 0.25)``); the plain mean below 4 runs."""
    xs = np.sort(np.asarray(values, dtype=float))
    cut = xs.size // 4
    return float(xs[cut : xs.size - cut].mean())


def across_seeds(
    stores: Store | Sequence[Store],
    leagues: Sequence[str],
    role: str = "seller",
    opponents: Sequence[str] = (),
    reference: str = "base",
) -> dict[str, Any]:
    """Each league's (seed's) last checkpoint against its base, and the figures across them:
    ``seeds`` (per league: the last row, the base row, its targets), ``gain`` and
    ``violation_rate`` across runs (:func:`interval_across_runs`), ``targets_met`` (target ->
    on how many seeds). The leagues may live in one store or in several (seeds run in
    parallel processes, one database each): each is read from the store that holds it.
    ``opponents`` and ``reference`` as in :func:`leagues.evaluation.held_out` (the gain is then
    over the reference, and the targets are not judged: they are defined against the base)."""
    per_seed = []
    for league in leagues:
        store = holding(stores, league)
        rows = held_out(store, league, role, opponents, reference)
        learner = [r for r in rows if r["generation"]]
        if not learner:
            continue
        last = max(learner, key=lambda r: r["generation"])
        base = next(r for r in rows if r["agent"] == "base")
        met = targets(rows, role, coevolving(store, league)) if reference == "base" else {}
        per_seed.append({"league": league, "last": last, "base": base, "targets": met})
    summary: dict[str, Any] = {
        "seeds": per_seed,
        "gain": interval_across_runs([s["last"]["reward"]["gain"] for s in per_seed]),
        "targets_met": {
            name: sum(s["targets"].get(name, False) for s in per_seed)
            for name in (per_seed[0]["targets"] if per_seed else {})
        },
    }
    if all("violation_rate" in s["last"] for s in per_seed):
        summary["violation_rate"] = interval_across_runs(
            [s["last"]["violation_rate"]["mean"] for s in per_seed]
        )
    return summary


def holding(stores: Store | Sequence[Store], league: str) -> Store:
    """The store that holds ``league`` (an error naming the league when none does)."""
    for store in [stores] if isinstance(stores, Store) else stores:
        if store.db.execute("SELECT 1 FROM league_runs WHERE name = ?", [league]).fetchone():
            return store
    raise ValueError(f"league {league!r} is in none of the databases given")


def seeds_table(
    db_paths: str | Path | Sequence[str | Path],
    leagues: Sequence[str],
    role: str = "seller",
    opponents: Sequence[str] = (),
    reference: str = "base",
) -> Any:
    """A rich table of :func:`across_seeds`: a row per seed, then the figures across seeds."""
    paths = [db_paths] if isinstance(db_paths, (str, Path)) else list(db_paths)
    with contextlib.ExitStack() as stack:
        stores = [stack.enter_context(Store.open(path, read_only=True)) for path in paths]
        summary = across_seeds(stores, leagues, role, opponents, reference)
    table = Table(title=Text(f"{role} learning across {len(summary['seeds'])} seeds (held out)"))
    for header in ("league", "base reward", "last", f"gain vs {reference}", "violations", "rating",
                   "targets met"):  # fmt: skip
        table.add_column(header)
    for s in summary["seeds"]:
        last, base, rating = s["last"], s["base"], s["last"]["rating"]
        shown = "-" if rating["rating"] is None else (
            f"{rating['rating']:.0f} [{rating['ci_low']:.0f}, {rating['ci_high']:.0f}]"
        )  # fmt: skip
        violations = last.get("violation_rate", {}).get("mean", math.nan)
        met = sum(s["targets"].values())
        table.add_row(
            Text(s["league"]),
            f"{base['reward']['mean']:+.3f}",
            f"{last['agent']} {last['reward']['mean']:+.3f}",
            f"{last['reward']['gain']:+.3f} ± {last['reward']['gain_se']:.3f}",
            f"{violations:.3f}",
            shown,
            f"{met}/{len(s['targets'])}",
        )
    gain = summary["gain"]
    lines = [
        f"gain across seeds: mean {gain['mean']:+.3f}, IQM {gain['iqm']:+.3f}, 95% bootstrap "
        f"interval over runs [{gain['ci_low']:+.3f}, {gain['ci_high']:+.3f}] (n={gain['n']})"
    ]
    if "violation_rate" in summary:
        v = summary["violation_rate"]
        lines.append(f"held-out violation rate across seeds: mean {v['mean']:.3f} "
                     f"[{v['ci_low']:.3f}, {v['ci_high']:.3f}]")  # fmt: skip
    n = len(summary["seeds"])
    lines += [f"{name}: met on {k} of {n} seeds" for name, k in summary["targets_met"].items()]
    return Group(table, Text("\n".join(lines)))
