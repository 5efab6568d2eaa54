"""Tournament configuration: one frozen dataclass, read from a TOML file.

    [tournament]
    name = "scripted-demo"
    preset = "in-distribution"      # any preset name; override its fields in [tournament.market]
    episodes = 256                  # per seller x buyer-entry pairing
    seed = 0
    sellers = ["scripted:satisficer", "scripted:prober"]
    buyers = ["scripted:time", ["scripted:time", "scripted:tit-for-tat"]]  # a list is a pool

    [tournament.market]
    total_turns = 6

A buyer entry is one spec (every slot plays it) or a list of specs, a *pool*: each slot draws its
agent from the pool with the scenario's own draws, so every seller meets the same lineups.
Every pairing plays the same scenario list (seed, indices ``0 .. episodes-1``): comparisons
between sellers are paired.

The catalogue defaults to the small one shipped with the package, and the split defaults to
``"all"``: its 40 products are too few to hold out a test set worth the name. Give ``catalog``
(an AmazonHistoryPrice folder or a .json file; a relative path is read from the TOML file's
folder) and ``split = "test"`` to evaluate on the paper's held-out products.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents import check_spec
from arena.catalog import SPLITS
from arena.config import MarketConfig, get_preset
from arena.settings import about, convert_fields, from_mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 reads TOML with the tomli back-port
    import tomli as tomllib


def market_config(preset: str, overrides: Mapping[str, Any], where: str) -> MarketConfig:
    """The preset with ``overrides`` applied: text (``--set``) or TOML values, read by the
    settings dialect (:mod:`arena.settings`) and checked by ``MarketConfig``."""
    return get_preset(preset, convert_fields(MarketConfig, overrides, where))


@dataclass(frozen=True)
class TournamentConfig:
    """A round-robin of every seller against every buyer entry on one scenario list."""

    name: str = field(metadata=about("Tournament name; its episodes are stored under it."))
    sellers: tuple[str, ...] = field(metadata=about("Seller agent specs."))
    buyers: tuple[tuple[str, ...], ...] = field(
        metadata=about(
            "Buyer entries: a spec (every slot plays it) or a list of specs (a pool: each slot "
            "draws one with the scenario's own draw)."
        )
    )
    preset: str = field(default="in-distribution", metadata=about("Any preset of docs/presets.md."))
    market: Mapping[str, Any] = field(
        default_factory=dict,
        metadata=about("Overrides of the preset's fields ([tournament.market])."),
    )
    episodes: int = field(default=256, metadata=about("Episodes per seller x buyer-entry pairing."))
    seed: int = field(
        default=0,
        metadata=about("Seed of the scenario list; every pairing plays scenarios 0 .. episodes-1."),
    )
    catalog: str | None = field(
        default=None,
        metadata=about(
            "AmazonHistoryPrice folder or catalogue JSON (relative to the TOML file); none: the "
            "shipped catalogue."
        ),
    )
    split: str = field(default="all", metadata=about("Catalogue split: train, test or all."))
    keep_turns: bool = field(
        default=True,
        metadata=about(
            "Store every message (false: outcomes and rewards only, about half the file)."
        ),
    )

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("tournament.name must be a non-empty string")
        if not self.sellers:
            raise ValueError("tournament.sellers must list at least one seller spec")
        if not self.buyers:
            raise ValueError("tournament.buyers must list at least one buyer entry")
        for i, spec in enumerate(self.sellers):
            check_spec(spec, "seller", f"tournament.sellers[{i}]")
        for i, entry in enumerate(self.buyers):
            if not entry:
                raise ValueError("tournament.buyers has an empty pool; list at least one spec")
            for j, spec in enumerate(entry):
                check_spec(spec, "buyer", f"tournament.buyers[{i}][{j}]")
        for name, items in (("sellers", self.sellers), ("buyers", self.buyer_labels)):
            repeated = sorted({x for x in items if items.count(x) > 1})
            if repeated:
                raise ValueError(f"tournament.{name} lists {', '.join(repeated)} twice")
        for name in ("episodes", "seed"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"tournament.{name} must be an integer, got {value!r}")
        if self.episodes < 1:
            raise ValueError(f"tournament.episodes must be >= 1, got {self.episodes}")
        if self.seed < 0:
            raise ValueError(f"tournament.seed must be >= 0, got {self.seed}")
        if self.split not in SPLITS:
            raise ValueError(f"tournament.split must be one of {', '.join(SPLITS)}")
        if not isinstance(self.keep_turns, bool):
            raise ValueError(
                f"tournament.keep_turns must be true or false, not {self.keep_turns!r}"
            )
        try:
            self.market_config()
        except ValueError as exc:
            message = str(exc)
            if not message.startswith("tournament.market"):
                message = f"tournament.preset / tournament.market: {message}"
            raise ValueError(message) from None

    @property
    def buyer_labels(self) -> list[str]:
        """One name per buyer entry: the spec, or a pool's specs joined with "|"."""
        return [pool_label(entry) for entry in self.buyers]

    def market_config(self) -> MarketConfig:
        """The preset with the ``market`` overrides applied."""
        return market_config(self.preset, self.market, "tournament.market")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, as stored with the tournament."""
        data = dataclasses.asdict(self)
        data["market"] = dict(self.market)
        return data

    @staticmethod
    def from_dict(data: Mapping[str, Any], base: Path | None = None) -> TournamentConfig:
        """Build from the ``[tournament]`` table (the settings dialect: unknown keys and bad
        values are errors naming them). A buyer entry given as one spec is a pool of one; a
        relative ``catalog`` path is read from ``base`` (the TOML file's folder)."""
        values = dict(data)
        if isinstance(values.get("buyers"), list):
            values["buyers"] = [[e] if isinstance(e, str) else e for e in values["buyers"]]
        catalog = values.get("catalog")
        if isinstance(catalog, str) and base is not None and not Path(catalog).is_absolute():
            values["catalog"] = str(base / catalog)
        return from_mapping(TournamentConfig, values, "tournament")

    @staticmethod
    def from_toml(path: str | Path) -> TournamentConfig:
        """Read ``[tournament]`` from a TOML file."""
        values = read_toml_table(path, "tournament")
        try:
            return TournamentConfig.from_dict(values, base=Path(path).parent)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None


def read_toml_table(path: str | Path, table: str) -> dict[str, Any]:
    """The one top-level ``[table]`` of a TOML file; any other table, or none, is an error."""
    file = Path(path)
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"cannot read {table} config {file}: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{file} is not valid TOML: {exc}") from exc
    extra = sorted(set(data) - {table})
    if extra:
        raise ValueError(f"{file}: unknown table(s) {', '.join(extra)}; use [{table}]")
    if table not in data:
        raise ValueError(f"{file} has no [{table}] table")
    return data[table]


def pool_label(pool: tuple[str, ...] | list[str]) -> str:
    """The single name of a buyer entry: its specs joined with "|"."""
    return "|".join(pool)
