"""The ``arena`` commands: parse arguments and call library functions, nothing more.

Option help comes from the config dataclasses' field help (``EvalConfig``, ``RatingConfig``) where
an option sets a field. Expected errors (a bad spec, preset field, config file or catalogue path)
print one red line and exit with status 2; there is no traceback for mistakes the user can fix.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
from rich.table import Table

from arena.config import parse_assignments
from arena.metrics import MULTI_PRODUCT, TABLE1, group
from arena.records import EpisodeRecord
from arena.settings import field_help
from arena_cli.serve import serve
from leagues.config import LeagueConfig
from leagues.league import run_league
from leagues.report import league_sections
from tournaments.config import TournamentConfig
from tournaments.evaluate import EvalConfig, evaluate
from tournaments.leaderboard import leaderboard, render_table, stored_anchor, stored_lineups
from tournaments.ratings import RatingConfig
from tournaments.report import write_report
from tournaments.runner import EXECUTORS, run_tournament
from tournaments.store import load_records

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="bargain-arena: LLM negotiation markets, tournaments and leagues.",
)
tournament_app = typer.Typer(no_args_is_help=True, help="Round-robin tournaments.")
league_app = typer.Typer(no_args_is_help=True, help="Leagues of trained checkpoints.")
app.add_typer(tournament_app, name="tournament")
app.add_typer(league_app, name="league")
app.command()(serve)

# Piped output (logs, CI) gets a wide fixed width so tables are not truncated to 80 columns.
console = Console(width=None if sys.stdout.isatty() else 180)
err_console = Console(stderr=True)
T = TypeVar("T")

USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, FileNotFoundError, KeyError)


def _guard(fn: Callable[[], T]) -> T:
    """Run ``fn``; user mistakes become one clear line and exit status 2."""
    try:
        return fn()
    except USER_ERRORS as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        err_console.print(
            f"[bold red]error:[/] {escape(str(message))}", highlight=False, soft_wrap=True
        )
        raise typer.Exit(2) from None


def _progress() -> Progress:
    return Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=False,
    )


def _help(name: str) -> str:
    return field_help(EvalConfig, name)


PresetOpt = Annotated[str, typer.Option("--preset", "-p", help=_help("preset"))]
SetOpt = Annotated[list[str] | None, typer.Option("--set", help=_help("overrides"))]
CatalogOpt = Annotated[str | None, typer.Option("--catalog", help=_help("catalog"))]
SplitOpt = Annotated[str, typer.Option("--split", help=_help("split"))]
SellerOpt = Annotated[str, typer.Option("--seller", help=_help("seller"))]
BuyerOpt = Annotated[
    str, typer.Option("--buyer", help=_help("buyers") + " Comma-separated on the command line.")
]


def _buyers(text: str) -> tuple[str, ...]:
    specs = tuple(s.strip() for s in _split_specs(text) if s.strip())
    if not specs:
        raise ValueError("--buyer needs at least one agent spec")
    return specs


def _split_specs(text: str) -> list[str]:
    """Split on commas that start a new spec (``kind:``), not commas inside parameters."""
    parts: list[str] = []
    for piece in text.split(","):
        if parts and ":" not in piece.split("?")[0]:
            parts[-1] += "," + piece
        else:
            parts.append(piece)
    return parts


def _eval_config(
    seller: str,
    buyer: str,
    preset: str,
    overrides: list[str] | None,
    episodes: int,
    seed: int,
    catalog: str | None,
    split: str,
    max_concurrent: int = 64,
) -> EvalConfig:
    config = EvalConfig(
        seller=seller,
        buyers=_buyers(buyer),
        preset=preset,
        overrides=tuple(parse_assignments(overrides or []).items()),
        episodes=episodes,
        seed=seed,
        catalog=catalog,
        split=split,
        max_concurrent=max_concurrent,
    )
    config.market()
    return config


@app.command()
def play(
    seller: SellerOpt = "scripted:prober",
    buyer: BuyerOpt = "scripted:time",
    preset: PresetOpt = "in-distribution",
    seed: Annotated[int, typer.Option(help=_help("seed"))] = 0,
    index: Annotated[int, typer.Option(help="Scenario index in the seed's list.")] = 0,
    catalog: CatalogOpt = None,
    split: SplitOpt = "all",
    overrides: SetOpt = None,
) -> None:
    """Play one episode and show the transcript, then the hidden values."""

    def run() -> EpisodeRecord:
        config = _eval_config(seller, buyer, preset, overrides, index + 1, seed, catalog, split)
        return evaluate(config).records[-1]

    record = _guard(run)
    show_transcript(record)


def show_transcript(record: EpisodeRecord) -> None:
    """Render an episode with rich: every message, then what was hidden from the seller."""
    sc, res = record.scenario, record.result
    product = sc.products[0]
    console.print(
        Panel(
            f"{product.title}\nlist price ${product.list_price:.2f}"
            + (f" (+{len(sc.products) - 1} more products)" if len(sc.products) > 1 else ""),
            title=f"{record.preset}: {record.seller} vs {', '.join(record.buyers)}",
        )
    )
    for turn in res.turns:
        style = "cyan" if turn.agent == "seller" else "green"
        status = "" if turn.valid else f" [red](rejected: {turn.reason})[/]"
        console.print(
            Panel(turn.text, title=f"{turn.agent} → {turn.to}{status}", border_style=style),
            highlight=False,
        )
    hidden = Table(title="Hidden values")
    hidden.add_column("who")
    hidden.add_column("private value")
    hidden.add_column("first bid")
    hidden.add_column("reward")
    hidden.add_row("seller", f"cost ${sc.costs[0]:.2f}", "", f"{res.seller_reward:+.3f}")
    for i, values in enumerate(sc.valuations):
        first = res.first_bids[i]
        hidden.add_row(
            f"buyer_{i + 1} ({record.buyers[i]})",
            "budget " + ", ".join(f"${v:.2f}" for v in values),
            "" if first is None else f"${first:.2f}",
            f"{res.buyer_rewards[i]:+.3f}",
        )
    console.print(hidden)
    deal = ", ".join(f"buyer_{d.buyer + 1} at ${d.price:.2f}" for d in res.deals) or "none"
    console.print(
        f"outcome: [bold]{res.outcome}[/] ({res.termination}); deal: {deal}"
        + (f"; violation: {res.violation} ({res.violation_reason})" if res.violation else "")
    )


@app.command("eval")
def eval_command(
    seller: SellerOpt = "scripted:prober",
    buyer: BuyerOpt = "scripted:time",
    preset: PresetOpt = "in-distribution",
    episodes: Annotated[int, typer.Option("--episodes", "-n", help=_help("episodes"))] = 256,
    seed: Annotated[int, typer.Option(help=_help("seed"))] = 0,
    catalog: CatalogOpt = None,
    split: SplitOpt = "all",
    json_path: Annotated[Path | None, typer.Option("--json", help="Write metrics JSON.")] = None,
    max_concurrent: Annotated[int, typer.Option(help=_help("max_concurrent"))] = 64,
    overrides: SetOpt = None,
) -> None:
    """Evaluate a seller against buyers and print a Table-1 style row."""

    def run() -> Any:
        config = _eval_config(
            seller, buyer, preset, overrides, episodes, seed, catalog, split, max_concurrent
        )
        with _progress() as progress:
            task = progress.add_task("episodes", total=config.episodes)
            return evaluate(config, on_episode=lambda _r: progress.advance(task))

    report = _guard(run)
    columns = group(TABLE1)
    if report.config["market"]["num_products"] > 1:
        columns += group(MULTI_PRODUCT)
    table = Table(title=f"{preset}: {seller} vs {', '.join(_buyers(buyer))}")
    table.add_column("Seller")
    for metric in columns:
        table.add_column(metric.header, justify="right")
    cells = [_estimate(report.metrics[metric.name]) for metric in columns]
    label = seller + ("  (ORACLE: reads hidden budgets)" if "oracle" in seller else "")
    table.add_row(label, *cells)
    console.print(table)
    rate = len(report.records) / max(report.seconds, 1e-9)
    console.print(f"{len(report.records)} episodes in {report.seconds:.2f} s ({rate:.0f}/s)")
    if report.run_stats:
        console.print(f"run: {json.dumps(report.run_stats)}", highlight=False)
    if json_path is not None:
        json_path.write_text(json.dumps(report.to_json(), indent=2, allow_nan=False))
        console.print(f"wrote {json_path}")


def _estimate(value: dict[str, Any]) -> str:
    """An estimate's cell: mean ± se, "-" when no episode counted (mean null)."""
    if value["mean"] is None:
        return "-"
    return f"{value['mean']:+.3f} ± {value['se']:.3f}"


@tournament_app.command("run")
def tournament_run(
    config_path: Annotated[Path, typer.Argument(help="Tournament TOML file.")],
    db: Annotated[Path | None, typer.Option(help="SQLite results file.")] = None,
    workers: Annotated[int, typer.Option(help="Parallel worker processes.")] = 2,
    executor: Annotated[str, typer.Option(help=" or ".join(EXECUTORS) + ".")] = "local",
    ray_address: Annotated[
        str | None, typer.Option(help="Ray cluster address (default: RAY_ADDRESS or local).")
    ] = None,
    chunk_size: Annotated[int, typer.Option(help="Episodes per worker task.")] = 32,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
) -> None:
    """Run (or resume) a round-robin tournament, storing every episode."""

    def run() -> Any:
        config = TournamentConfig.from_toml(config_path)
        path = db if db is not None else Path(f"{config.name}.db")
        return run_tournament(
            config,
            path,
            workers=workers,
            executor=executor,
            progress=progress,
            chunk_size=chunk_size,
            ray_address=ray_address,
        )

    summary = _guard(run)
    console.print(summary.table())


@app.command()
def ratings(
    db: Annotated[Path, typer.Option(help="SQLite results file.")],
    role: Annotated[str, typer.Option(help="seller, buyer or cross.")] = "seller",
    json_path: Annotated[Path | None, typer.Option("--json", help="Write rows as JSON.")] = None,
    tournament: Annotated[str | None, typer.Option(help="Only this tournament.")] = None,
    anchor: Annotated[
        str | None,
        typer.Option(
            help="Agent spec (or buyer entry) pinned at 1000; default: the role's first "
            "scripted agent in the stored tournaments. 'none': ratings average 1000."
        ),
    ] = None,
) -> None:
    """Bradley-Terry ratings with bootstrap intervals, Elo, and the paper's metrics."""

    def run() -> list[dict[str, Any]]:
        if not db.exists():
            raise FileNotFoundError(f"no database at {db}")
        if role not in ("seller", "buyer", "cross"):
            raise ValueError(f"--role must be seller, buyer or cross, not {role!r}")
        records = load_records(db, tournament=tournament)
        _, entries = stored_lineups(db, tournament)
        pinned = stored_anchor(db, role, tournament) if anchor is None else anchor
        if anchor is not None and anchor.lower() == "none":
            pinned = None
        return leaderboard(records, role, RatingConfig(), entries, pinned)

    rows = _guard(run)
    console.print(render_table(rows))
    if json_path is not None:
        json_path.write_text(json.dumps(rows, indent=2, allow_nan=False))
        console.print(f"wrote {json_path}")


@app.command()
def report(
    db: Annotated[Path, typer.Option(help="SQLite results file.")],
    out: Annotated[Path, typer.Option(help="Output folder for index.html and PNGs.")],
) -> None:
    """Write an HTML report with plots."""

    def run() -> Path:
        if not db.exists():
            raise FileNotFoundError(f"no database at {db}")
        return write_report(db, out, extra_sections=lambda out_dir: league_sections(db, out_dir))

    path = _guard(run)
    console.print(f"wrote {path}")


@league_app.command("run")
def league_run(
    config_path: Annotated[Path, typer.Argument(help="League TOML file.")],
    db: Annotated[Path | None, typer.Option(help="SQLite results file.")] = None,
) -> None:
    """Run (or resume) a league: train, evaluate, rate, repeat."""

    def run() -> Any:
        config = LeagueConfig.from_toml(config_path)
        path = db if db is not None else Path(f"{config.name}.db")
        return run_league(config, path)

    summary = _guard(run)
    console.print(summary)


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        err_console.print("interrupted; finished work is kept")
        sys.exit(130)


if __name__ == "__main__":
    main()
