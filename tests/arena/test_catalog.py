from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from arena.catalog import (
    SPLIT_SEED,
    CatalogError,
    Product,
    default_catalog,
    load_amazon_catalog,
    load_catalog,
    products_by_category,
    split_catalog,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
AMAZON_DIR = REPO_ROOT.parent / "shared" / "data" / "AmazonHistoryPrice"
needs_amazon = pytest.mark.skipif(
    not AMAZON_DIR.is_dir(), reason=f"AmazonHistoryPrice data not present at {AMAZON_DIR}"
)


def dollars(text: str) -> float:
    return float(text.replace("$", "").replace(",", ""))


def amazon_row(list_price: str, highest: str, lowest: str, title: str = "Thing") -> dict:
    return {
        "title": title,
        "description": f"{title} description",
        "features": "feature one\nfeature two",
        "list_price": list_price,
        "highest_price": highest,
        "lowest_price": lowest,
    }


def write_json(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def amazon() -> list[Product]:
    return load_amazon_catalog(AMAZON_DIR)


@needs_amazon
def test_real_catalogue_has_930_products_in_18_categories(amazon: list[Product]) -> None:
    assert len(amazon) == 930
    assert len({p.category for p in amazon}) == 18
    assert len({p.id for p in amazon}) == 930


@needs_amazon
def test_real_catalogue_every_list_price_exceeds_cost(amazon: list[Product]) -> None:
    assert all(round(p.list_price * 100) > round(p.cost * 100) >= 0 for p in amazon)


@needs_amazon
def test_real_ids_number_rows_across_sorted_files_from_one(amazon: list[Product]) -> None:
    files = sorted(AMAZON_DIR.glob("*.json"))
    expected = [
        f"{file.stem}_{n}"
        for n, file in enumerate(
            (f for f in files for _ in json.loads(f.read_text(encoding="utf-8"))), start=1
        )
    ]
    assert [p.id for p in amazon] == expected


@needs_amazon
def test_paper_product_baby_products_17_follows_benchmark_convention(
    amazon: list[Product],
) -> None:
    automotive = json.loads((AMAZON_DIR / "automotive.json").read_text(encoding="utf-8"))
    baby = json.loads((AMAZON_DIR / "baby-products.json").read_text(encoding="utf-8"))
    row = baby[17 - len(automotive) - 1]
    product = next(p for p in amazon if p.id == "baby-products_17")
    assert product.category == "baby-products"
    assert product.title == row["title"].strip()
    assert product.description == row["description"].strip()
    assert product.features == row["features"].strip()
    assert product.list_price == max(dollars(row["list_price"]), dollars(row["highest_price"]))
    assert product.cost == dollars(row["lowest_price"])
    # The values the paper reports for this product (Section 4.4, Table 13).
    assert (product.list_price, product.cost) == (34.99, 18.75)


@needs_amazon
def test_prices_with_thousands_separators_are_parsed(amazon: list[Product]) -> None:
    by_id = {p.id: p for p in amazon}
    position = 0
    checked = 0
    for file in sorted(AMAZON_DIR.glob("*.json")):
        for row in json.loads(file.read_text(encoding="utf-8")):
            position += 1
            if "," in row["list_price"] + row["highest_price"]:
                product = by_id[f"{file.stem}_{position}"]
                expected = max(dollars(row["list_price"]), dollars(row["highest_price"]))
                assert product.list_price == expected
                assert product.list_price >= 1000
                checked += 1
    assert checked > 0


@needs_amazon
def test_real_split_is_802_train_128_test_disjoint_and_deterministic(
    amazon: list[Product],
) -> None:
    train, test = split_catalog(amazon, "train"), split_catalog(amazon, "test")
    assert (len(train), len(test)) == (802, 128)
    train_ids, test_ids = {p.id for p in train}, {p.id for p in test}
    assert not train_ids & test_ids
    assert train_ids | test_ids == {p.id for p in amazon}
    assert [p.id for p in split_catalog(amazon, "test")] == [p.id for p in test]
    assert split_catalog(amazon, "all") == amazon


@needs_amazon
def test_split_depends_only_on_ids_not_input_order(amazon: list[Product]) -> None:
    shuffled = sorted(amazon, key=lambda p: p.title)
    assert {p.id for p in split_catalog(shuffled, "test")} == {
        p.id for p in split_catalog(amazon, "test")
    }


@needs_amazon
def test_paper_held_out_product_is_in_the_test_split(amazon: list[Product]) -> None:
    assert SPLIT_SEED == 20260410
    assert "baby-products_17" in {p.id for p in split_catalog(amazon, "test")}


def test_rows_with_bad_prices_or_list_below_cost_are_skipped_and_counted(tmp_path: Path) -> None:
    write_json(
        tmp_path / "gadgets.json",
        [
            amazon_row("$20.00", "$25.00", "$10.00", "good"),
            amazon_row("N/A", "$25.00", "$10.00", "unparseable"),
            amazon_row("$9.00", "$9.50", "$9.50", "list equals cost"),
            amazon_row("$1,299.99", "$1,100.00", "$899.50", "pricey"),
        ],
    )
    write_json(tmp_path / "books.json", [amazon_row("$5.00", "$4.00", "$6.00", "list below cost")])
    with pytest.warns(UserWarning, match=rf"skipped 3 of 5 .*{re.escape(str(tmp_path))}"):
        products = load_amazon_catalog(tmp_path)
    assert [(p.id, p.title, p.list_price, p.cost) for p in products] == [
        ("gadgets_2", "good", 25.0, 10.0),
        ("gadgets_5", "pricey", 1299.99, 899.5),
    ]


def test_folder_without_usable_rows_is_an_error_naming_it(tmp_path: Path) -> None:
    write_json(tmp_path / "junk.json", [amazon_row("free", "$1", "$0.50")])
    with (
        pytest.warns(UserWarning, match="skipped 1 of 1"),
        pytest.raises(CatalogError, match=re.escape(str(tmp_path))),
    ):
        load_amazon_catalog(tmp_path)


def test_empty_folder_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match=re.escape(str(tmp_path))):
        load_amazon_catalog(tmp_path)


def test_missing_folder_is_an_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(CatalogError, match=re.escape(str(missing))):
        load_amazon_catalog(missing)
    with pytest.raises(CatalogError, match=re.escape(str(missing))):
        load_catalog(missing)


def test_invalid_json_file_is_an_error_naming_the_file(tmp_path: Path) -> None:
    write_json(tmp_path / "a.json", [amazon_row("$2", "$2", "$1")])
    (tmp_path / "b.json").write_text("[{not json", encoding="utf-8")
    with pytest.raises(CatalogError, match=re.escape(str(tmp_path / "b.json"))):
        load_amazon_catalog(tmp_path)


def test_json_file_that_is_not_a_list_is_an_error_naming_the_file(tmp_path: Path) -> None:
    file = write_json(tmp_path / "a.json", {"title": "not a list"})
    with pytest.raises(CatalogError, match=re.escape(str(file))):
        load_amazon_catalog(tmp_path)


def test_default_catalogue_has_valid_products_over_several_categories() -> None:
    products = default_catalog()
    assert len(products) >= 30
    assert len({p.id for p in products}) == len(products)
    assert len(products_by_category(products)) >= 6
    for p in products:
        assert p.title and p.description and p.features
        assert 0.45 <= p.cost / p.list_price <= 0.80, p.id
        assert round(p.list_price, 2) == p.list_price and round(p.cost, 2) == p.cost


def test_default_catalogue_split_keeps_the_paper_test_proportion() -> None:
    products = default_catalog()
    test = split_catalog(products, "test")
    train = split_catalog(products, "train")
    assert len(test) == max(1, round(len(products) * 128 / 930))
    assert len(test) + len(train) == len(products)
    assert not {p.id for p in test} & {p.id for p in train}


def test_load_catalog_dispatches_on_none_folder_and_json_file(tmp_path: Path) -> None:
    assert load_catalog() == default_catalog()
    folder = tmp_path / "amazon"
    folder.mkdir()
    write_json(folder / "toys.json", [amazon_row("$10.00", "$12.50", "$6.00")])
    assert [(p.id, p.list_price, p.cost) for p in load_catalog(folder)] == [("toys_1", 12.5, 6.0)]
    own = [
        {
            "id": "mug_1",
            "category": "kitchen",
            "title": "Mug",
            "description": "A mug.",
            "features": "holds tea",
            "list_price": 12.0,
            "cost": 7.5,
        }
    ]
    file = write_json(tmp_path / "mine.json", own)
    assert load_catalog(str(file)) == [Product(**own[0])]


def test_load_catalog_rejects_other_files_and_malformed_own_format(tmp_path: Path) -> None:
    text_file = tmp_path / "catalog.txt"
    text_file.write_text("mug, 12.00", encoding="utf-8")
    with pytest.raises(CatalogError, match=re.escape(str(text_file))):
        load_catalog(text_file)
    missing_keys = write_json(tmp_path / "partial.json", [{"id": "x", "title": "X"}])
    with pytest.raises(CatalogError, match=re.escape(str(missing_keys))):
        load_catalog(missing_keys)
    record = {
        "id": "lamp_1",
        "category": "home",
        "title": "Lamp",
        "description": "",
        "features": "",
        "list_price": 5.0,
        "cost": 9.0,
    }
    bad_prices = write_json(tmp_path / "bad.json", [record])
    with pytest.raises(CatalogError, match=r"bad\.json.*lamp_1"):
        load_catalog(bad_prices)
    duplicates = write_json(tmp_path / "dup.json", [{**record, "cost": 1.0}] * 2)
    with pytest.raises(CatalogError, match="unique"):
        load_catalog(duplicates)


@pytest.mark.parametrize(
    ("list_price", "cost"),
    [(10.0, 10.0), (5.0, 6.0), (10.0, -1.0), (math.inf, 1.0), (10.0, math.nan)],
)
def test_product_rejects_impossible_prices_naming_the_id(list_price: float, cost: float) -> None:
    with pytest.raises(ValueError, match="widget_9"):
        Product("widget_9", "tools", "Widget", "", "", list_price, cost)


def test_product_prices_are_rounded_to_cents() -> None:
    product = Product("w", "tools", "Widget", "", "", 19.994999, 7.005001)
    assert (product.list_price, product.cost) == (19.99, 7.01)


def test_unknown_split_name_lists_the_allowed_ones() -> None:
    with pytest.raises(ValueError, match="train, test, all"):
        split_catalog(default_catalog(), "validation")


def test_products_by_category_groups_and_sorts_by_id() -> None:
    products = [
        Product("b_2", "b", "B2", "", "", 2.0, 1.0),
        Product("a_1", "a", "A1", "", "", 2.0, 1.0),
        Product("b_1", "b", "B1", "", "", 2.0, 1.0),
    ]
    groups = products_by_category(products)
    assert list(groups) == ["a", "b"]
    assert [p.id for p in groups["b"]] == ["b_1", "b_2"]


def test_product_rejects_non_string_text_fields_naming_the_id() -> None:
    with pytest.raises(ValueError, match=r"widget_9.*title"):
        Product("widget_9", "tools", 42, "", "", 2.0, 1.0)  # type: ignore[arg-type]
