"""``arena eval``: a seller against a buyer pool, as one Table-1 style row (and ``--json``)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from arena.metrics import MULTI_PRODUCT, TABLE1, group
from arena_cli.console import console, guard, progress, say
from arena_cli.options import (
    BuyerOpt,
    CatalogOpt,
    JsonOpt,
    PresetOpt,
    SeedOpt,
    SellerOpt,
    SetOpt,
    SplitOpt,
    config_help,
    eval_config,
    writable_file,
)
from tournaments.evaluate import EvalReport, evaluate


def eval_command(
    seller: SellerOpt = "scripted:prober",
    buyer: BuyerOpt = "scripted:time",
    preset: PresetOpt = "in-distribution",
    episodes: Annotated[
        int, typer.Option("--episodes", "-n", min=1, help=config_help("episodes"))
    ] = 256,
    seed: SeedOpt = 0,
    catalog: CatalogOpt = None,
    split: SplitOpt = "all",
    json_path: JsonOpt = None,
    max_concurrent: Annotated[
        int, typer.Option("--max-concurrent", min=1, help=config_help("max_concurrent"))
    ] = 64,
    overrides: SetOpt = None,
) -> None:
    """Evaluate a seller against buyers and print a Table-1 style row."""

    def run() -> EvalReport:
        config = eval_config(
            seller, buyer, preset, overrides,
            episodes=episodes, seed=seed, catalog=catalog, split=split,
            max_concurrent=max_concurrent,
        )  # fmt: skip
        writable_file(json_path, "--json")
        with progress() as bar:
            task = bar.add_task("episodes", total=config.episodes)
            return evaluate(config, on_episode=lambda _r: bar.advance(task))

    report = guard(run)
    columns = group(TABLE1)
    if report.config["market"]["num_products"] > 1:
        columns += group(MULTI_PRODUCT)
    buyers = ", ".join(report.config["buyers"])
    market = report.config["market"]
    rewards = f"rewards: seller {market['seller_reward']}, buyer {market['buyer_reward']}"
    table = Table(title=Text(f"{preset}: {seller} vs {buyers} ({rewards})"))
    table.add_column("Seller")
    for metric in columns:
        table.add_column(metric.header, justify="right")
    cells = [_estimate(report.metrics[metric.name]) for metric in columns]
    label = seller + ("  (ORACLE: reads hidden budgets)" if "oracle" in seller else "")
    table.add_row(Text(label), *cells)
    console.print(table)
    rate = len(report.records) / max(report.seconds, 1e-9)
    say(f"{len(report.records)} episodes in {report.seconds:.2f} s ({rate:.0f}/s)")
    if report.run_stats:
        say(f"run: {json.dumps(report.run_stats)}")
    if json_path is not None:
        guard(lambda: json_path.write_text(json.dumps(report.to_json(), indent=2, allow_nan=False)))
        say(f"wrote {json_path}")


def _estimate(value: dict[str, Any]) -> str:
    """An estimate's cell: mean ± se, "-" when no episode counted (mean null)."""
    if value["mean"] is None:
        return "-"
    return f"{value['mean']:+.3f} ± {value['se']:.3f}"
