"""Scenarios: everything random about an episode, fixed by (seed, index) before anyone plays.

A scenario holds the products, the seller's costs, every buyer's private valuation, the tier
permutation, the regulated opening bids and the draws that pick each buyer slot's agent from a
pool. It never depends on which agents will play, so the same seed gives every agent the same
scenarios and comparisons are paired (paper Sections 3.1, 3.3, 9.3).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from arena.catalog import Product
from arena.config import MarketConfig
from arena.money import round_cents


@dataclass(frozen=True)
class Scenario:
    """One episode's hidden and public values. Prices are dollars rounded to cents."""

    seed: int
    index: int
    products: tuple[Product, ...]
    stock: tuple[int, ...]
    valuations: tuple[tuple[float, ...], ...]
    """valuations[buyer][product]: the buyer's private budget for that product."""
    tiers: tuple[int, ...] | None
    """Tier index (0 = lowest interval) assigned to each buyer in tiers mode, else None."""
    first_offers: tuple[float | None, ...]
    """Regulated opening bid per buyer (on its opening product), None when unregulated."""
    opening_products: tuple[int, ...]
    """The product each buyer opens on: the one it values most relative to list price."""
    slot_draws: tuple[float, ...]
    """U[0,1) per buyer slot: picks that slot's agent from a buyer pool."""
    episode_seed: int
    """Seeds the agents' own generators for this episode (scripted play is deterministic)."""

    @property
    def num_buyers(self) -> int:
        return len(self.valuations)

    @property
    def num_products(self) -> int:
        return len(self.products)

    @property
    def costs(self) -> tuple[float, ...]:
        return tuple(p.cost for p in self.products)

    @property
    def list_prices(self) -> tuple[float, ...]:
        return tuple(p.list_price for p in self.products)

    @property
    def budgets(self) -> tuple[float, ...]:
        """Single-product view: each buyer's budget for product 0."""
        return tuple(v[0] for v in self.valuations)

    def pool_index(self, slot: int, pool_size: int) -> int:
        """Which of ``pool_size`` buyer specs plays ``slot`` (uniform, fixed by the scenario)."""
        return min(int(self.slot_draws[slot] * pool_size), pool_size - 1)


def _scaled(product: Product, scale: float) -> Product:
    if scale == 1.0:
        return product
    return Product(
        id=product.id,
        category=product.category,
        title=product.title,
        description=product.description,
        features=product.features,
        list_price=round_cents(product.list_price * scale),
        cost=round_cents(product.cost * scale),
    )


JITTER_STREAM = 1
"""Spawn key of the price-jitter generator (:attr:`MarketConfig.price_jitter`)."""


def make_scenario(
    config: MarketConfig, catalog: Sequence[Product], seed: int, index: int
) -> Scenario:
    """Scenario ``index`` of the list fixed by ``seed``; independent of every other index."""
    if not catalog:
        raise ValueError("the catalogue is empty; nothing to sell")
    rng = np.random.default_rng(np.random.SeedSequence([seed, index]))
    products = _draw_products(config, catalog, rng)
    scale = config.price_scale
    if config.price_jitter > 0:
        # Its own generator, so that every other draw of the scenario is the unjittered one's.
        jitter = np.random.default_rng(np.random.SeedSequence([seed, index, JITTER_STREAM]))
        scale *= float(np.exp(jitter.uniform(-config.price_jitter, config.price_jitter)))
    products = tuple(_scaled(p, scale) for p in products)
    n, m = config.num_buyers, len(products)

    if config.budget_mode == "tiers":
        tiers = tuple(int(t) for t in rng.permutation(n))
        ratios = [rng.uniform(*config.budget_tiers[t]) for t in tiers]
    else:
        tiers = None
        ratios = list(rng.uniform(*config.budget_range, size=n))

    if m == 1:
        terms = np.ones((n, 1))
    else:
        common = rng.uniform(-1.0, 1.0, size=m)
        own = rng.uniform(-1.0, 1.0, size=(n, m))
        c = config.valuation_correlation
        terms = 1.0 + config.product_spread * (c * common + (1.0 - c) * own)
    lists = np.array([p.list_price for p in products])
    valuations = tuple(
        tuple(round_cents(ratios[i] * lists[j] * terms[i, j]) for j in range(m)) for i in range(n)
    )
    opening_products = tuple(int(np.argmax(terms[i])) for i in range(n))
    offer_ratios = rng.uniform(*config.first_offer_range, size=n)
    first_offers = tuple(
        round_cents(offer_ratios[i] * lists[opening_products[i]])
        if config.regulate_first_offer
        else None
        for i in range(n)
    )
    slot_draws = tuple(float(x) for x in rng.random(n))
    episode_seed = int(rng.integers(2**31 - 1))
    return Scenario(
        seed=seed,
        index=index,
        products=products,
        stock=tuple([config.stock] * m),
        valuations=valuations,
        tiers=tiers,
        first_offers=first_offers,
        opening_products=opening_products,
        slot_draws=slot_draws,
        episode_seed=episode_seed,
    )


def make_scenarios(
    config: MarketConfig, catalog: Sequence[Product], seed: int, count: int, start: int = 0
) -> list[Scenario]:
    """Scenarios ``start .. start+count-1`` of the list fixed by ``seed``."""
    return [make_scenario(config, catalog, seed, i) for i in range(start, start + count)]


def _draw_products(
    config: MarketConfig, catalog: Sequence[Product], rng: np.random.Generator
) -> tuple[Product, ...]:
    """One product, or M distinct products of one category (substitutes)."""
    if config.num_products == 1:
        return (catalog[int(rng.integers(len(catalog)))],)
    by_category: dict[str, list[Product]] = {}
    for product in catalog:
        by_category.setdefault(product.category, []).append(product)
    eligible = sorted(c for c, ps in by_category.items() if len(ps) >= config.num_products)
    if not eligible:
        raise ValueError(
            f"num_products={config.num_products} but no catalogue category has that many "
            "products; lower num_products or use a larger catalogue"
        )
    category = eligible[int(rng.integers(len(eligible)))]
    pool = sorted(by_category[category], key=lambda p: p.id)
    picks = rng.choice(len(pool), size=config.num_products, replace=False)
    return tuple(pool[int(i)] for i in sorted(picks))
