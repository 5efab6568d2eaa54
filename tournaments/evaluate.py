"""``arena eval`` as a library function: one seller against a buyer pool on a scenario list."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agents import check_spec
from agents.engine import play_vs_pool
from agents.human import is_human
from arena.catalog import Product, load_catalog, split_catalog
from arena.config import MarketConfig, config_to_dict
from arena.metrics import summarize
from arena.records import EpisodeRecord
from arena.scenarios import make_scenarios
from tournaments.config import market_config


@dataclass(frozen=True)
class EvalConfig:
    """One evaluation run; every market field can be overridden through ``overrides``."""

    seller: str = field(default="scripted:prober", metadata={"help": "Seller agent spec."})
    buyers: tuple[str, ...] = field(
        default=("scripted:time",),
        metadata={"help": "Buyer specs; several form a pool each slot draws from uniformly."},
    )
    preset: str = field(default="in-distribution", metadata={"help": "Market preset name."})
    overrides: tuple[tuple[str, Any], ...] = field(
        default=(),
        metadata={"help": "Override a market field: --set num_buyers=5 (repeatable)."},
    )
    episodes: int = field(default=256, metadata={"help": "Number of scenarios to play."})
    seed: int = field(default=0, metadata={"help": "Fixes the scenario list (paired runs)."})
    start: int = field(
        default=0,
        metadata={"help": "Index of the first scenario played in the seed's list (0-based)."},
    )
    catalog: str | None = field(
        default=None, metadata={"help": "Catalogue path; None uses the packaged default."}
    )
    split: str = field(default="all", metadata={"help": "Catalogue split: train, test or all."})
    max_concurrent: int = field(
        default=64, metadata={"help": "Episodes in flight at once for LLM agents."}
    )

    def __post_init__(self) -> None:
        if self.episodes < 1:
            raise ValueError(f"episodes must be >= 1, got {self.episodes}")
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")
        if self.start < 0:
            raise ValueError(f"start must be >= 0, got {self.start}")
        if not self.buyers:
            raise ValueError("give at least one buyer spec")
        if self.max_concurrent < 1:
            raise ValueError(f"max_concurrent must be >= 1, got {self.max_concurrent}")
        # Specs are checked here, before any work: no model is loaded (agents.check_spec). A
        # person's seat (``human[:name]``, arena play) is checked when the game starts.
        for spec, role in ((self.seller, "seller"), *((b, "buyer") for b in self.buyers)):
            if not is_human(spec):
                check_spec(spec, role)

    def market(self) -> MarketConfig:
        """The preset with the overrides read by the settings dialect."""
        return market_config(self.preset, dict(self.overrides), "--set")

    def products(self) -> list[Product]:
        """The catalogue's products of ``split`` (a bad path or split is an error naming it)."""
        return split_catalog(load_catalog(self.catalog), self.split)


@dataclass
class EvalReport:
    config: dict[str, Any]
    records: list[EpisodeRecord]
    metrics: dict[str, Any]
    seconds: float
    run_stats: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` file: config, episode count and metrics (mean and se per metric)."""
        out = {"config": self.config, "episodes": len(self.records), "metrics": self.metrics}
        if self.run_stats is not None:
            out["run_stats"] = self.run_stats
        return json_safe(out)


def json_safe(value: Any) -> Any:
    """Replace NaN and infinities (metrics with no eligible episode) by None: strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def evaluate(
    config: EvalConfig, on_episode: Callable[[EpisodeRecord], None] | None = None
) -> EvalReport:
    """Play scenarios ``start .. start+episodes-1`` and summarise them with the paper's
    metrics; scenario ``k`` is the same whatever the start, so one episode can be replayed alone
    (``arena play --index k``)."""
    market = config.market()
    scenarios = make_scenarios(
        market, config.products(), config.seed, config.episodes, config.start
    )
    start = time.perf_counter()
    records, stats = play_vs_pool(
        market,
        scenarios,
        config.seller,
        list(config.buyers),
        max_concurrent=config.max_concurrent,
        on_episode=on_episode,
    )
    seconds = time.perf_counter() - start
    # Model usage is reported when a model was asked at all (scripted play makes no request).
    run_stats = stats.as_dict() if stats.requests else None
    described = {
        "seller": config.seller,
        "buyers": list(config.buyers),
        "preset": config.preset,
        "market": config_to_dict(market),
        "episodes": config.episodes,
        "seed": config.seed,
        "start": config.start,
        "catalog": config.catalog or "default",
        "split": config.split,
    }
    return EvalReport(described, records, summarize(records), seconds, run_stats)
