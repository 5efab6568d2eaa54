"""``arena play``: one episode's transcript, then what was hidden from the seller.

Scenario ``--index k`` is built alone (:attr:`tournaments.evaluate.EvalConfig.start`): the
episode is exactly the ``k``-th of ``arena eval`` with the same seed, and only it is played.
Every message is shown as the agent wrote it (``rich.text.Text``), never read as markup.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from agents.human import is_human
from arena.records import EpisodeRecord
from arena_cli.console import console, guard
from arena_cli.human import play_human
from arena_cli.options import (
    BuyerOpt,
    CatalogOpt,
    PresetOpt,
    SeedOpt,
    SellerOpt,
    SetOpt,
    SplitOpt,
    eval_config,
)
from tournaments.evaluate import evaluate


def play(
    seller: SellerOpt = "scripted:prober",
    buyer: BuyerOpt = "scripted:time",
    preset: PresetOpt = "in-distribution",
    seed: SeedOpt = 0,
    index: Annotated[
        int, typer.Option("--index", min=0, help="Scenario index in the seed's list (0-based).")
    ] = 0,
    catalog: CatalogOpt = None,
    split: SplitOpt = "all",
    overrides: SetOpt = None,
    db: Annotated[Path | None, typer.Option(help="Store a game with a person (human).")] = None,
) -> None:
    """Play one episode and show the transcript, then the hidden values. A seller or first buyer
    'human' (or human:NAME) is played by you: type each move, then an empty line."""
    if is_human(seller) or is_human(buyer.split(",")[0]):
        config = guard(lambda: eval_config(seller, buyer, preset, overrides, episodes=1, seed=seed,
                                           catalog=catalog, split=split))  # fmt: skip
        guard(lambda: play_human(config, index, db, console=console))
        return

    def run() -> EpisodeRecord:
        config = eval_config(
            seller, buyer, preset, overrides,
            episodes=1, start=index, seed=seed, catalog=catalog, split=split,
        )  # fmt: skip
        return evaluate(config).records[0]

    show_transcript(guard(run))


def show_transcript(record: EpisodeRecord) -> None:
    """Render an episode with rich: every message, then what was hidden from the seller."""
    sc, res = record.scenario, record.result
    product = sc.products[0]
    more = f" (+{len(sc.products) - 1} more products)" if len(sc.products) > 1 else ""
    console.print(
        Panel(
            Text(f"{product.title}\nlist price ${product.list_price:.2f}{more}"),
            title=Text(f"{record.preset}: {record.seller} vs {', '.join(record.buyers)}"),
        )
    )
    for turn in res.turns:
        title = Text(f"{turn.agent} → {turn.to}")
        if not turn.valid:
            title.append(f" (rejected: {turn.reason})", style="red")
        style = "cyan" if turn.agent == "seller" else "green"
        console.print(Panel(Text(turn.text), title=title, border_style=style), highlight=False)
    hidden = Table(title="Hidden values")
    for header in ("who", "private value", "first bid", "reward"):
        hidden.add_column(header)
    hidden.add_row("seller", f"cost ${sc.costs[0]:.2f}", "", f"{res.seller_reward:+.3f}")
    for i, values in enumerate(sc.valuations):
        first = res.first_bids[i]
        hidden.add_row(
            Text(f"buyer_{i + 1} ({record.buyers[i]})"),
            "budget " + ", ".join(f"${v:.2f}" for v in values),
            "" if first is None else f"${first:.2f}",
            f"{res.buyer_rewards[i]:+.3f}",
        )
    console.print(hidden)
    deal = ", ".join(f"buyer_{d.buyer + 1} at ${d.price:.2f}" for d in res.deals) or "none"
    outcome = Text("outcome: ")
    outcome.append(res.outcome, style="bold")
    outcome.append(f" ({res.termination}); deal: {deal}")
    if res.violation:
        outcome.append(f"; violation: {res.violation} ({res.violation_reason})")
    console.print(outcome)
