"""Product catalogue: what the seller sells, at what public list price and private cost.

Two sources feed the same `Product` record:

* the AmazonHistoryPrice folder of Xia et al. 2024 (930 products, 18 per-category JSON arrays), the
  catalogue the paper trains and evaluates on (Section 10), read from a path the user gives;
* a small made-up catalogue shipped in the package (`arena/data/default_catalog.json`), so the arena
  runs without any external data.

`split_catalog` reproduces the paper's 802/128 train/test sizes with a fixed, documented seed.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from arena.money import cents

SPLIT_SEED = 20260410
"""Seed of the numpy generator that draws the held-out test products in `split_catalog`."""

PAPER_CATALOG_SIZE = 930
PAPER_TEST_SIZE = 128
SPLITS = ("train", "test", "all")


class CatalogError(ValueError):
    """A catalogue path or file that cannot be turned into products."""


@dataclass(frozen=True)
class Product:
    """One product on sale; `cost` is the seller's private reservation cost (Section 3)."""

    id: str
    category: str
    title: str
    description: str
    features: str
    list_price: float  # public list price in dollars, rounded to cents
    cost: float  # seller's private reservation cost in dollars, rounded to cents

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"Product.id must be a non-empty string, got {self.id!r}")
        for name in ("category", "title", "description", "features"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"product {self.id!r}: {name} must be a string")
        for name in ("list_price", "cost"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"product {self.id!r}: {name} must be a number, got {value!r}")
            if not math.isfinite(value):
                raise ValueError(f"product {self.id!r}: {name} must be finite, got {value!r}")
            # Money is kept in dollars rounded to cents everywhere in the project.
            object.__setattr__(self, name, round(float(value), 2))
        if self.cost < 0:
            raise ValueError(f"product {self.id!r}: cost must be >= 0, got {self.cost}")
        if cents(self.list_price) <= cents(self.cost):
            raise ValueError(
                f"product {self.id!r}: list_price ({self.list_price}) must exceed cost "
                f"({self.cost}), otherwise there is no room to bargain"
            )


def _parse_price(raw: Any) -> float | None:
    """'$1,299.99' -> 1299.99; None when the value is missing or not a finite price."""
    if isinstance(raw, str):
        try:
            value = float(raw.strip().removeprefix("$").replace(",", ""))
        except ValueError:
            return None
    elif isinstance(raw, (int, float)) and not isinstance(raw, bool):
        value = float(raw)
    else:
        return None
    return value if math.isfinite(value) else None


def _text(raw: Any) -> str:
    """Amazon rows have null or missing descriptions and features; those become ""."""
    return raw.strip() if isinstance(raw, str) else ""


def _read_json(file: Path) -> Any:
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CatalogError(f"cannot read catalogue file {file}: {exc}") from exc


def load_amazon_catalog(path: str | Path) -> list[Product]:
    """Load an AmazonHistoryPrice folder with the benchmark's convention (Xia et al. 2024).

    list price = max(list_price, highest_price); cost = lowest_price; category = file name stem.
    Files are read in sorted name order and the id is "<category>_<n>", n being the row's 1-based
    position in the whole catalogue (all files concatenated, skipped rows counted). This is the
    numbering the paper's ids use: its "baby-products_17" (list $34.99, cost $18.75) is the 10th
    row of baby-products.json, after the 7 rows of automotive.json. Rows with a missing title,
    unparseable prices or list price <= cost are skipped and counted in one warning.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise CatalogError(f"AmazonHistoryPrice folder not found: {folder}")
    files = sorted(folder.glob("*.json"))
    if not files:
        raise CatalogError(f"no .json category files in AmazonHistoryPrice folder {folder}")

    products: list[Product] = []
    position = 0
    skipped = 0
    for file in files:
        rows = _read_json(file)
        if not isinstance(rows, list):
            raise CatalogError(
                f"{file}: expected a JSON array of products, got {type(rows).__name__}"
            )
        for row_index, row in enumerate(rows):
            position += 1
            if not isinstance(row, dict):
                raise CatalogError(f"{file}: row {row_index} is not a JSON object")
            list_price = _parse_price(row.get("list_price"))
            highest = _parse_price(row.get("highest_price"))
            cost = _parse_price(row.get("lowest_price"))
            title = row.get("title")
            if list_price is None or highest is None or cost is None or not isinstance(title, str):
                skipped += 1
                continue
            list_price, cost = round(max(list_price, highest), 2), round(cost, 2)
            if cents(list_price) <= cents(cost) or cost < 0:
                skipped += 1
                continue
            products.append(
                Product(
                    id=f"{file.stem}_{position}",
                    category=file.stem,
                    title=title.strip(),
                    description=_text(row.get("description")),
                    features=_text(row.get("features")),
                    list_price=list_price,
                    cost=cost,
                )
            )
    if skipped:
        warnings.warn(
            f"skipped {skipped} of {position} rows with a missing title, unparseable prices or "
            f"list price <= cost in {folder}",
            stacklevel=2,
        )
    if not products:
        raise CatalogError(f"no usable products in AmazonHistoryPrice folder {folder}")
    return products


_FIELDS = ("id", "category", "title", "description", "features", "list_price", "cost")


def _load_own_format(file: Path, records: Any) -> list[Product]:
    """Products from our own format: a JSON list of objects with exactly the `Product` fields."""
    if not isinstance(records, list) or not records:
        raise CatalogError(f"{file}: expected a non-empty JSON array of product objects")
    products: list[Product] = []
    for index, record in enumerate(records):
        if not isinstance(record, dict) or set(record) != set(_FIELDS):
            raise CatalogError(f"{file}: product {index} must be an object with keys {_FIELDS}")
        try:
            products.append(Product(**record))
        except ValueError as exc:
            raise CatalogError(f"{file}: {exc}") from exc
    ids = [p.id for p in products]
    if len(set(ids)) != len(ids):
        raise CatalogError(f"{file}: product ids must be unique")
    return products


def default_catalog() -> list[Product]:
    """The small made-up catalogue shipped with the package (40 products, 8 categories)."""
    resource = resources.files("arena").joinpath("data/default_catalog.json")
    return _load_own_format(Path(str(resource)), json.loads(resource.read_text(encoding="utf-8")))


def load_catalog(path: str | Path | None = None) -> list[Product]:
    """None -> default catalogue; a folder -> AmazonHistoryPrice; a .json file -> our format."""
    if path is None:
        return default_catalog()
    target = Path(path)
    if target.is_dir():
        return load_amazon_catalog(target)
    if target.is_file() and target.suffix == ".json":
        return _load_own_format(target, _read_json(target))
    raise CatalogError(
        f"catalogue path {target} is neither an AmazonHistoryPrice folder nor a .json file"
    )


def split_catalog(products: Sequence[Product], split: str) -> list[Product]:
    """The train, test or all products, in their input order.

    The test set is the first `n_test` products of a `default_rng(SPLIT_SEED)` permutation of the
    products sorted by id, so it depends only on the set of ids. n_test = round(len * 128 / 930),
    at least 1: exactly the paper's 802/128 split on the 930-product AmazonHistoryPrice catalogue
    (Section 5), and the same proportion on smaller catalogues.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; use one of {', '.join(SPLITS)}")
    if split == "all":
        return list(products)
    if not products:
        raise ValueError("cannot split an empty catalogue")
    ids = sorted(p.id for p in products)
    if len(set(ids)) != len(ids):
        raise ValueError("cannot split a catalogue with duplicate product ids")
    n_test = max(1, round(len(ids) * PAPER_TEST_SIZE / PAPER_CATALOG_SIZE))
    order = np.random.default_rng(SPLIT_SEED).permutation(len(ids))
    test_ids = {ids[i] for i in order[:n_test]}
    return [p for p in products if (p.id in test_ids) == (split == "test")]


def products_by_category(products: Sequence[Product]) -> dict[str, list[Product]]:
    """Products grouped by category (categories and products within each sorted by id)."""
    groups: dict[str, list[Product]] = {}
    for product in sorted(products, key=lambda p: p.id):
        groups.setdefault(product.category, []).append(product)
    return dict(sorted(groups.items()))
