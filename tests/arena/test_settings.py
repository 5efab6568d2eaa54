"""The settings dialect: one converter, one unknown-key error, one default-aware comparison."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from arena.config import MarketConfig
from arena.settings import (
    SettingsError,
    changes,
    convert,
    convert_fields,
    defaults,
    field_help,
    from_mapping,
    markdown_table,
    to_json,
)


@dataclass(frozen=True)
class Inner:
    rate: float = field(default=0.5, metadata={"help": "A rate."})
    on: bool = field(default=False, metadata={"help": "A switch."})


@dataclass(frozen=True)
class Outer:
    name: str = field(metadata={"help": "A name."})
    count: int = field(default=1, metadata={"help": "How many | pipes escaped."})
    path: str | None = None
    pairs: tuple[tuple[float, float], ...] = ((0.0, 1.0),)
    specs: tuple[str, ...] = ()
    table: Mapping[str, Any] = field(default_factory=dict)
    inner: Inner = field(default_factory=Inner)

    def __post_init__(self) -> None:
        if self.count < 0:
            raise ValueError("count must be >= 0")


@pytest.mark.parametrize(
    ("text", "value"), [("true", True), ("Yes", True), ("1", True), ("off", False), ("0", False)]
)
def test_booleans_read_the_usual_spellings(text: str, value: bool) -> None:
    assert convert(text, bool, "x") is value


@pytest.mark.parametrize("text", ["tru", "", "2", "maybe"])
def test_anything_else_is_not_a_boolean(text: str) -> None:
    with pytest.raises(SettingsError, match=rf"x: expected true or false, got {text!r}"):
        convert(text, bool, "x")


def test_text_and_typed_values_convert_to_the_field_type() -> None:
    assert convert("3", int, "x") == 3 and convert(3, float, "x") == 3.0
    assert convert("0.4,0.55;0.6,0.7", tuple[tuple[float, float], ...], "x") == (
        (0.4, 0.55),
        (0.6, 0.7),
    )
    assert convert("0.4-0.55", tuple[tuple[float, float], ...], "x") == ((0.4, 0.55),)
    assert convert([[1, 2]], tuple[tuple[float, float], ...], "x") == ((1.0, 2.0),)
    assert convert("none", str | None, "x") is None and convert("", str | None, "x") == ""
    assert convert("", int | None, "x") is None
    for bad, kind in (
        (True, int),
        ("1.5", int),
        (7, str),
        ("x", float),
        ([1, 2, 3], tuple[int, int]),
    ):
        with pytest.raises(SettingsError, match=r"^x"):
            convert(bad, kind, "x")


def test_from_mapping_builds_nested_configs_and_runs_their_checks() -> None:
    made = from_mapping(Outer, {"name": "a", "count": "2", "inner": {"on": "yes"}}, "t")
    assert made == Outer("a", 2, inner=Inner(on=True))
    with pytest.raises(ValueError, match="count must be >= 0"):
        from_mapping(Outer, {"name": "a", "count": -1}, "t")


def test_unknown_and_missing_keys_name_their_place() -> None:
    with pytest.raises(
        SettingsError, match=r"^t.inner: unknown key 'speed'; known keys: rate, on$"
    ):
        from_mapping(Outer, {"name": "a", "inner": {"speed": 1}}, "t")
    with pytest.raises(SettingsError, match=r"^t: unknown keys 'a', 'b'"):
        convert_fields(Outer, {"a": 1, "b": 2}, "t")
    with pytest.raises(SettingsError, match=r"^t: missing key\(s\) 'name'"):
        from_mapping(Outer, {}, "t")
    with pytest.raises(SettingsError, match=r"^t.inner.rate: expected a number, got 'fast'"):
        from_mapping(Outer, {"name": "a", "inner": {"rate": "fast"}}, "t")


def test_a_setting_added_since_a_config_was_stored_counts_only_when_not_default() -> None:
    wanted = to_json(Outer("a", inner=Inner(rate=0.5)))
    stored = {k: v for k, v in wanted.items() if k != "count"}
    stored["inner"] = {"on": False}
    default = defaults(Outer)
    assert changes(stored, wanted, default) == []
    assert changes(stored, to_json(Outer("a", count=3)), default) == ["count"]
    assert changes(stored, to_json(Outer("a", inner=Inner(rate=0.9))), default) == ["inner.rate"]
    assert changes(stored, to_json(Outer("b", table={"k": 1})), default) == ["name", "table.k"]
    assert changes({**stored, "gone": 1}, wanted, default) == ["gone"]


def test_defaults_and_json_are_plain_json_data() -> None:
    assert json.loads(json.dumps(defaults(Outer))) == defaults(Outer)
    assert defaults(Outer)["pairs"] == [[0.0, 1.0]] and "name" not in defaults(Outer)
    assert to_json(MarketConfig())["budget_tiers"][0] == [0.4, 0.55]


def test_help_texts_reach_the_docs_tables() -> None:
    assert field_help(Outer, "name") == "A name."
    table = markdown_table(Outer, "x.")
    assert "| `x.name` | `required` | A name. |" in table
    assert "| `x.inner.rate` | `0.5` | A rate. |" in table
    assert "How many \\| pipes escaped." in table
    every = [f.name for f in dataclasses.fields(MarketConfig)]
    assert all(f"`{name}`" in markdown_table(MarketConfig) for name in every)


@dataclass(frozen=True)
class Wrapper:
    """A config wrapping a library's: its own fields, the rest passed through."""

    PASS_THROUGH = "library"

    own: int = 1
    inner: Inner = field(default_factory=Inner)
    library: Mapping[str, Any] = field(default_factory=lambda: {"alpha": 1})


def test_a_pass_through_table_keeps_the_keys_that_are_not_fields_and_stores_them_flat() -> None:
    config = from_mapping(Wrapper, {"own": 2, "alpha": 3, "beta": "x", "inner": {"on": True}}, "w")
    assert (config.own, config.inner.on, config.library) == (2, True, {"alpha": 3, "beta": "x"})
    stored = to_json(config)
    assert stored == {"own": 2, "alpha": 3, "beta": "x", "inner": {"rate": 0.5, "on": True}}
    assert from_mapping(Wrapper, stored, "w") == config  # the stored form reads back
    assert defaults(Wrapper) == {"own": 1, "alpha": 1, "inner": {"rate": 0.5, "on": False}}
    assert changes(stored, {**stored, "beta": "y"}, defaults(Wrapper)) == ["beta"]
    assert "library" not in markdown_table(Wrapper)
    with pytest.raises(SettingsError, match=r"w\.inner: unknown key 'speed'"):
        from_mapping(Wrapper, {"inner": {"speed": 1}}, "w")  # nested tables stay closed
