"""Market configuration: one frozen dataclass, named presets, and CLI overrides.

Every knob of the market lives in :class:`MarketConfig`; presets are plain instances of it. The
cross-field checks run in ``__post_init__`` so a bad preset, a bad TOML file and a bad
``--set field=value`` all fail the same way, with a message that names the field.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from arena.rewards import BUYER_REWARDS, DEFAULT_REWARDS, SELLER_REWARDS, Rewards
from arena.seats import seats
from arena.settings import about, check_positive_int, convert_fields

Interval = tuple[float, float]

PAPER_TIERS: tuple[Interval, ...] = ((0.40, 0.55), (0.65, 0.80), (1.00, 1.15))


@dataclass(frozen=True)
class MarketConfig:
    """All parameters of one market (paper Sections 3.1, 3.3, 9.2, 9.3; Tables 6 and 8)."""

    name: str = field(default="custom", metadata=about("Preset name, recorded with every episode."))
    num_buyers: int = field(default=3, metadata=about("N: buyers per episode."))
    total_turns: int = field(default=7, metadata=about("T: seller messages per episode."))
    per_buyer_cap: int = field(default=3, metadata=about("K: seller messages per buyer."))
    allow_full_coverage: bool = field(
        default=False,
        metadata=about("Allow T >= N*K (the seller can then exhaust every channel)."),
    )
    budget_mode: str = field(
        default="tiers",
        metadata=about("'tiers': one interval per buyer, uniformly permuted; 'uniform': i.i.d."),
    )
    budget_tiers: tuple[Interval, ...] = field(
        default=PAPER_TIERS,
        metadata=about("Budget-ratio intervals x list price, one per buyer (tiers mode)."),
    )
    budget_range: Interval = field(
        default=(0.40, 1.15),
        metadata=about("Budget-ratio interval x list price for every buyer (uniform mode)."),
    )
    regulate_first_offer: bool = field(
        default=True,
        metadata=about("Fix each buyer's opening [BUY] to a draw from first_offer_range x list."),
    )
    first_offer_range: Interval = field(
        default=(0.25, 0.30),
        metadata=about(
            "Regulated opening-bid ratio interval x list price; its top may not exceed the lowest "
            "budget ratio the market can draw."
        ),
    )
    penalize_buyer_violations: bool = field(
        default=False,
        metadata=about(
            "Buyer violations end the episode with buyer reward -1 (bilateral, buyer learns) "
            "instead of being intercepted and re-sampled."
        ),
    )
    max_buyer_retries: int = field(
        default=3,
        metadata=about(
            "Re-samples of an invalid buyer reply before the buyer's channel is closed."
        ),
    )
    seller_reward: str = field(
        default=DEFAULT_REWARDS.seller,
        metadata=about(
            "The seller's reward, by name (docs/metrics.md): surplus_extraction = eq. (1)."
        ),
    )
    buyer_reward: str = field(
        default=DEFAULT_REWARDS.buyer,
        metadata=about(
            "Every buyer's reward, by name (docs/metrics.md): surplus_extraction = Table 12's "
            "(list - P)/(list - C); budget_surplus = (B - P)/(B - C), -1 above budget B; "
            "reservation_surplus = budget_surplus with B capped at list (0 for a deal at list)."
        ),
    )
    num_products: int = field(default=1, metadata=about("M: substitutable products on sale."))
    stock: int = field(default=1, metadata=about("Units of each product."))
    valuation_correlation: float = field(
        default=1.0,
        metadata=about("Multi-product: 1 = buyers rank products alike, 0 = independent tastes."),
    )
    product_spread: float = field(
        default=0.15,
        metadata=about("Multi-product: spread of the product-level valuation term around 1."),
    )
    price_jitter: float = field(
        default=0.0,
        metadata=about(
            "Training augmentation: every price of a scenario (list, cost, budgets, openings) is "
            "multiplied by one factor exp(U[-j, j]); 0 (evaluation) leaves the catalogue's prices."
        ),
    )
    price_scale: float = field(
        default=1.0, metadata=about("Multiplies every list price and cost (price-range axis).")
    )
    seller_temperature: float = field(
        default=0.7, metadata=about("Default sampling temperature of LLM sellers (eval 0.7).")
    )
    buyer_temperature: float = field(
        default=0.7, metadata=about("Default sampling temperature of LLM buyers.")
    )

    def __post_init__(self) -> None:
        for name in ("num_buyers", "per_buyer_cap", "total_turns", "num_products", "stock"):
            check_positive_int("", name, getattr(self, name))
        if self.max_buyer_retries < 0:
            raise ValueError("max_buyer_retries must be >= 0 (0 closes the channel at once)")
        if (
            not self.allow_full_coverage
            and self.total_turns >= self.num_buyers * self.per_buyer_cap
        ):
            raise ValueError(
                f"total_turns={self.total_turns} must be < num_buyers*per_buyer_cap="
                f"{self.num_buyers * self.per_buyer_cap} (the scarce-attention condition T < N*K); "
                "lower total_turns or set allow_full_coverage=true"
            )
        if self.budget_mode not in ("tiers", "uniform"):
            raise ValueError(f"budget_mode must be 'tiers' or 'uniform', got {self.budget_mode!r}")
        for i, tier in enumerate(self.budget_tiers):
            _check_interval(f"budget_tiers[{i}]", tier)
        if self.budget_mode == "tiers" and len(self.budget_tiers) != self.num_buyers:
            raise ValueError(
                f"budget_tiers has {len(self.budget_tiers)} intervals but num_buyers="
                f"{self.num_buyers}; give one interval per buyer or use budget_mode='uniform'"
            )
        _check_interval("budget_range", self.budget_range)
        _check_interval("first_offer_range", self.first_offer_range)
        _check_openings_fit_budgets(self)
        if not 0.0 <= self.valuation_correlation <= 1.0:
            raise ValueError("valuation_correlation must lie in [0, 1]")
        if not (math.isfinite(self.product_spread) and 0.0 <= self.product_spread < 1.0):
            raise ValueError("product_spread must lie in [0, 1)")
        if not (math.isfinite(self.price_scale) and self.price_scale > 0):
            raise ValueError("price_scale must be a positive number")
        if not (math.isfinite(self.price_jitter) and 0.0 <= self.price_jitter <= 3.0):
            raise ValueError(
                f"price_jitter must lie in [0, 3] (a factor between exp(-3) and exp(3)), got "
                f"{self.price_jitter}"
            )
        for name, registry in (("seller_reward", SELLER_REWARDS), ("buyer_reward", BUYER_REWARDS)):
            if getattr(self, name) not in registry:
                raise ValueError(
                    f"{name} must name a reward of arena/rewards.py, one of "
                    f"{', '.join(registry)}; got {getattr(self, name)!r}"
                )
        for name in ("seller_temperature", "buyer_temperature"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value}")

    @property
    def rewards(self) -> Rewards:
        """The reward names of this market, as recorded with its episodes."""
        return Rewards(self.seller_reward, self.buyer_reward)

    @property
    def agents(self) -> list[str]:
        return seats(self.num_buyers)


def _check_openings_fit_budgets(cfg: MarketConfig) -> None:
    """Regulated openings must not exceed any budget the market can draw (Section 3.3).

    A buyer's budget for its opening product is at least the lowest budget ratio times the list
    price (times ``1 - product_spread`` with several products); an opening drawn above it would
    be over budget and re-sampled until the buyer's channel closes."""
    if not cfg.regulate_first_offer:
        return
    if cfg.budget_mode == "tiers":
        lowest = min(t[0] for t in cfg.budget_tiers)
        where = f"the lowest budget_tiers interval starts at {lowest:g}"
    else:
        lowest = cfg.budget_range[0]
        where = f"budget_range starts at {lowest:g}"
    floor = lowest
    if cfg.num_products > 1:
        floor = lowest * (1.0 - cfg.product_spread)
        where += f", times 1 - product_spread = {floor:.4g}"
    high = cfg.first_offer_range[1]
    if high > floor + 1e-12:
        raise ValueError(
            f"first_offer_range={tuple(cfg.first_offer_range)} lets regulated openings reach "
            f"{high:g} x list price, but a buyer's budget can be as low as {floor:.4g} x list "
            f"price ({where}), so some openings would be over budget. Lower first_offer_range "
            f"to at most {floor:.4g}, raise the budgets, or set regulate_first_offer=false"
        )


def _check_interval(name: str, interval: Interval) -> None:
    if len(interval) != 2:
        raise ValueError(f"{name} must be a pair (low, high), got {interval!r}")
    low, high = interval
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError(f"{name} must be finite, got {interval!r}")
    if low < 0:
        raise ValueError(f"{name} has a negative ratio {low}; ratios must be >= 0")
    if low > high:
        raise ValueError(f"{name} has low {low} > high {high}; write it as (low, high)")


PRESETS: dict[str, MarketConfig] = {
    # Table 6: the training and in-distribution evaluation market.
    "in-distribution": MarketConfig(name="in-distribution"),
    # Tables 8 and Section 9.3: five buyers, nine messages, uniform budgets, free openings.
    "ood": MarketConfig(
        name="ood",
        num_buyers=5,
        total_turns=9,
        per_buyer_cap=3,
        budget_mode="uniform",
        budget_tiers=(),
        regulate_first_offer=False,
    ),
    # Seed 003: one seller, one buyer; the buyer learns, so its violations are penalised.
    "bilateral": MarketConfig(
        name="bilateral",
        num_buyers=1,
        total_turns=6,
        per_buyer_cap=6,
        allow_full_coverage=True,
        budget_mode="uniform",
        budget_tiers=(),
        budget_range=(0.50, 1.15),
        regulate_first_offer=False,
        penalize_buyer_violations=True,
    ),
}

# Issue 6 (seed 004): several substitutable products, unit-demand buyers, matching quality.
_MULTI = MarketConfig(
    name="multi-product",
    num_buyers=4,
    total_turns=10,
    per_buyer_cap=3,
    budget_mode="uniform",
    budget_tiers=(),
    budget_range=(0.55, 1.15),
    num_products=3,
    valuation_correlation=0.5,
)
PRESETS["multi-product"] = _MULTI
# Generalisation axes of seed 004: market structure (M x N), valuation correlation, price range.
PRESETS["multi-product-2x6"] = dataclasses.replace(
    _MULTI, name="multi-product-2x6", num_products=2, num_buyers=6, total_turns=10
)
PRESETS["multi-product-5x3"] = dataclasses.replace(
    _MULTI, name="multi-product-5x3", num_products=5, num_buyers=3, total_turns=8
)
PRESETS["multi-product-aligned"] = dataclasses.replace(
    _MULTI, name="multi-product-aligned", valuation_correlation=1.0
)
PRESETS["multi-product-independent"] = dataclasses.replace(
    _MULTI, name="multi-product-independent", valuation_correlation=0.0
)
PRESETS["multi-product-low-price"] = dataclasses.replace(
    _MULTI, name="multi-product-low-price", price_scale=0.1
)
PRESETS["multi-product-high-price"] = dataclasses.replace(
    _MULTI, name="multi-product-high-price", price_scale=10.0
)


def preset_names() -> list[str]:
    return sorted(PRESETS)


def get_preset(name: str, overrides: Mapping[str, Any] | None = None) -> MarketConfig:
    """The named preset with typed ``overrides`` applied (and validated)."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(preset_names())}")
    base = PRESETS[name]
    if not overrides:
        return base
    return apply_overrides(base, overrides)


def apply_overrides(
    base: MarketConfig, overrides: Mapping[str, Any], where: str = "market"
) -> MarketConfig:
    """Replace fields of ``base``; text values (a CLI's ``--set``, a TOML table) are converted to
    the field's type by the one settings dialect (:mod:`arena.settings`); errors name ``where``.
    """
    typed = convert_fields(MarketConfig, overrides, where)
    n = typed.get("num_buyers")
    keeps_tiers = (
        "budget_tiers" not in typed and typed.get("budget_mode", base.budget_mode) == "tiers"
    )
    if n is not None and keeps_tiers and n != len(base.budget_tiers):
        raise ValueError(
            f"num_buyers={n} needs {n} budget_tiers (set budget_tiers too, or budget_mode=uniform)"
        )
    return dataclasses.replace(base, **typed)


def parse_assignments(items: Iterable[str]) -> dict[str, str]:
    """``["num_buyers=5", "budget_range=0.4,1.15"]`` -> dict, each item checked for ``=``."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"override {item!r} must look like field=value")
        out[key.strip().replace("-", "_")] = value.strip()
    return out


def config_to_dict(config: MarketConfig) -> dict[str, Any]:
    """A JSON-ready dict of the config (tuples become lists)."""
    return dataclasses.asdict(config)
