"""One settings dialect for every frozen config dataclass: values, unknown keys, resuming, help.

Settings reach a config from three places: TOML tables (typed values), agent spec parameters
(``scripted:prober?threshold=0.6``) and ``--set field=value`` overrides (text). They all go
through :func:`from_mapping`, so they convert and fail the same way:

* :func:`convert` reads a value for a field from the field's declared type: text is parsed
  (``"true"``/``"false"`` and the usual spellings for booleans, anything else is an error that
  names it: ``"tru"`` is not False), typed values are checked (an integer for a float field is
  widened, a bool is never an integer), lists become tuples, tables become nested configs.
* :func:`from_mapping` refuses unknown keys with the place they came from
  (``tournament.sellers[1]: unknown key 'foo'``) and lists the known ones.
* :func:`changes` compares a stored config with the one asked for, aware of defaults: a setting
  the stored config lacks was added to the code since, and counts as unchanged while it keeps its
  default, so adding a field never orphans a stored tournament or league.
* :func:`about` writes a field's help (``metadata=about("...")``); :func:`field_help` and
  :func:`markdown_table` read the ``metadata["help"]`` of every field, for the command line's
  ``--help`` and the docs.
* :func:`check_positive_int` is the one check of a count setting (an integer >= 1, never a bool).
* A config that wraps a library's own config may name one mapping field in a class attribute
  ``PASS_THROUGH``: the table's keys that are not fields of the config go into that mapping, by
  the library's names, and the config checks them itself (with the library). In the JSON form
  (:func:`to_json`, :func:`defaults`) the mapping's keys sit beside the config's own, as in the
  table, so a stored config reads like the table it came from.

Only the standard library is used, so the bottom layer (the market config) can use it too.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar, Union

T = TypeVar("T")

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")
NONE = ("", "none")


class SettingsError(ValueError):
    """A setting that cannot be read; the message names where it came from."""


def about(text: str) -> dict[str, str]:
    """A field's metadata holding its help text: ``field(default=3, metadata=about("..."))``."""
    return {"help": text}


def check_positive_int(where: str, name: str, value: Any) -> None:
    """Refuse a count setting that is not an integer >= 1 (a bool is no integer); the error
    names ``where.name`` (just ``name`` when ``where`` is empty)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        place = f"{where}.{name}" if where else name
        raise ValueError(f"{place} must be an integer >= 1, got {value!r}")


def field_types(cls: type) -> dict[str, Any]:
    """The resolved type of every field of the dataclass ``cls``."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def parse_bool(text: str) -> bool:
    """``true``/``false`` in the usual spellings; anything else is an error."""
    value = text.strip().lower()
    if value in TRUE:
        return True
    if value in FALSE:
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def convert(value: Any, kind: Any, where: str) -> Any:
    """``value`` (text, or a typed value from TOML/JSON) as the type ``kind``; errors name
    ``where``."""
    try:
        return _convert(value, kind, where)
    except SettingsError:
        raise
    except (ValueError, TypeError) as exc:
        raise SettingsError(f"{where}: {exc}") from None


def _convert(value: Any, kind: Any, where: str) -> Any:
    origin = typing.get_origin(kind)
    args = typing.get_args(kind)
    if kind is Any:
        return value
    if origin in (Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if type(None) in args and (value is None or _is_none_text(value, options)):
            return None
        if len(options) != 1:
            raise TypeError(f"cannot read a value of type {kind}")
        return _convert(value, options[0], where)
    if dataclasses.is_dataclass(kind):
        if isinstance(value, kind):  # type: ignore[arg-type]
            return value
        if not isinstance(value, Mapping):
            raise ValueError(f"expected a table of {kind.__name__} settings, got {value!r}")
        return from_mapping(kind, value, where)  # type: ignore[arg-type]
    if origin is tuple:
        return _tuple(value, args, where)
    if origin in (dict, Mapping) or kind in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise ValueError(f"expected a table, got {value!r}")
        return dict(value)
    if kind is bool:
        if isinstance(value, str):
            return parse_bool(value)
        if not isinstance(value, bool):
            raise ValueError(f"expected true or false, got {value!r}")
        return value
    if kind is int:
        if isinstance(value, str):
            return _parse(int, value, "an integer")
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected an integer, got {value!r}")
        return value
    if kind is float:
        if isinstance(value, str):
            return _parse(float, value, "a number")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"expected a number, got {value!r}")
        return float(value)
    if kind is str:
        if not isinstance(value, str):
            raise ValueError(f"expected a string, got {value!r}")
        return value
    raise TypeError(f"cannot read a value of type {kind}")


def _parse(kind: type, text: str, expected: str) -> Any:
    try:
        return kind(text.strip())
    except ValueError:
        raise ValueError(f"expected {expected}, got {text!r}") from None


def _is_none_text(value: Any, options: list[Any]) -> bool:
    """ "none" (or "" for a non-string field) reads as None for an optional field."""
    if not isinstance(value, str):
        return False
    text = value.strip().lower()
    return text == "none" or (text == "" and str not in options)


def _tuple(value: Any, args: tuple[Any, ...], where: str) -> tuple[Any, ...]:
    """A tuple from a list, or from text: items split on ";" when they are pairs themselves
    ("0.4,0.55;0.6,0.7"), else on ","."""
    nested = bool(args) and typing.get_origin(args[0]) is tuple
    if isinstance(value, str):
        separator = ";" if nested else ","
        items: list[Any] = [part for part in value.split(separator) if part.strip()]
        if nested:
            items = [_pair_text(part) for part in items]
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        raise ValueError(f"expected a list, got {value!r}")
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(convert(item, args[0], f"{where}[{i}]") for i, item in enumerate(items))
    if args and len(items) != len(args):
        raise ValueError(f"expected {len(args)} values, got {len(items)}: {value!r}")
    pairs = enumerate(zip(items, args, strict=True))
    return tuple(convert(item, kind, f"{where}[{i}]") for i, (item, kind) in pairs)


def _pair_text(text: str) -> list[str]:
    """``"lo,hi"``, or the older ``"lo-hi"`` for non-negative numbers."""
    return text.split(",") if "," in text else text.split("-")


def from_mapping(cls: type[T], data: Mapping[str, Any], where: str) -> T:
    """An instance of the config dataclass ``cls`` from ``data`` (a TOML table, spec parameters,
    overrides): unknown and missing keys are errors naming ``where``, every value is converted
    to its field's type, and the class's own checks (``__post_init__``) run last."""
    return cls(**convert_fields(cls, data, where, require=True))  # type: ignore[call-arg]


def convert_fields(
    cls: type, data: Mapping[str, Any], where: str, require: bool = False
) -> dict[str, Any]:
    """``data`` with every value converted to the type of the ``cls`` field it names: what
    :func:`from_mapping` builds from, and the typed form of a partial override."""
    if not isinstance(data, Mapping):
        raise SettingsError(f"{where}: expected a table of settings, got {data!r}")
    kinds = field_types(cls)
    extra = pass_through(cls)
    if extra is not None:
        del kinds[extra]
        passed = {key: value for key, value in data.items() if key not in kinds}
        data = {key: value for key, value in data.items() if key in kinds}
        if passed:
            data[extra] = passed
            kinds[extra] = dict
    unknown = [key for key in data if key not in kinds]
    if unknown:
        names = ", ".join(repr(k) for k in unknown)
        plural = "s" if len(unknown) > 1 else ""
        raise SettingsError(
            f"{where}: unknown key{plural} {names}; known keys: {', '.join(kinds) or 'none'}"
        )
    if require:
        missing = [
            f.name
            for f in dataclasses.fields(cls)
            if f.name not in data
            and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
        ]
        if missing:
            raise SettingsError(f"{where}: missing key(s) {', '.join(repr(k) for k in missing)}")
    return {key: convert(value, kinds[key], f"{where}.{key}") for key, value in data.items()}


def pass_through(cls: type) -> str | None:
    """The field of ``cls`` that takes the keys that are not its fields (``PASS_THROUGH``), or
    None: a table whose unknown keys are errors."""
    name = getattr(cls, "PASS_THROUGH", None)
    return name if isinstance(name, str) else None


def _flattened(cls: type, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` (a config's fields) with the pass-through mapping's keys beside the others."""
    extra = pass_through(cls)
    if extra is None:
        return values
    passed = values.pop(extra, {})
    return {**dict(passed), **values}


def to_json(value: Any) -> Any:
    """A config (or any value) as plain JSON data: tuples become lists, dataclasses dicts."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        value = _flattened(type(value), fields)
    return json.loads(json.dumps(value, default=to_json, sort_keys=True))


def defaults(cls: type) -> dict[str, Any]:
    """The default of every field that has one, nested configs as dicts, as JSON data."""
    out: dict[str, Any] = {}
    kinds = field_types(cls)
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(kinds[f.name]):
            out[f.name] = defaults(kinds[f.name])
        elif f.default is not dataclasses.MISSING:
            out[f.name] = to_json(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = to_json(f.default_factory())
    return _flattened(cls, out)


def changes(stored: Mapping[str, Any], wanted: Mapping[str, Any], default: Mapping[str, Any],
            prefix: str = "") -> list[str]:  # fmt: skip
    """Settings that differ between a stored config and the one asked for, as dotted names.

    Both are JSON data (:func:`to_json`); ``default`` is :func:`defaults` of the config class. A
    setting missing on either side counts as its default, so a setting added to the code since
    the config was stored is unchanged while it keeps its default.
    """
    changed = []
    for key in sorted(set(stored) | set(wanted)):
        name = f"{prefix}{key}"
        fallback = default.get(key)
        old, new = stored.get(key, fallback), wanted.get(key, fallback)
        if isinstance(old, dict) and isinstance(new, dict):
            changed += changes(old, new, fallback if isinstance(fallback, dict) else {}, f"{name}.")
        elif (key not in stored and key not in default) or old != new:
            changed.append(name)
    return changed


def field_help(cls: type, name: str) -> str:
    """The help text of field ``name`` of ``cls`` (its ``metadata["help"]``)."""
    for f in dataclasses.fields(cls):
        if f.name == name:
            return str(f.metadata.get("help", ""))
    raise KeyError(f"{cls.__name__} has no field {name!r}")


def markdown_table(cls: type, prefix: str = "") -> str:
    """Every field of ``cls`` as a Markdown table row: name, default, help; nested configs get
    rows of their own under ``prefix.name.``. The docs include these tables verbatim."""
    lines = ["| field | default | meaning |", "|---|---|---|"]
    return "\n".join(lines + _rows(cls, prefix)) + "\n"


def _rows(cls: type, prefix: str) -> list[str]:
    rows = []
    kinds = field_types(cls)
    for f in dataclasses.fields(cls):
        name = f"{prefix}{f.name}"
        if f.name == pass_through(cls):
            continue  # the library's fields: the docs list them with the library's defaults
        if dataclasses.is_dataclass(kinds[f.name]):
            rows += _rows(kinds[f.name], f"{name}.")
            continue
        if f.default is not dataclasses.MISSING:
            default = json.dumps(to_json(f.default))
        elif f.default_factory is not dataclasses.MISSING:
            default = json.dumps(to_json(f.default_factory()))
        else:
            default = "required"
        text = str(f.metadata.get("help", "")).replace("|", "\\|")
        rows.append(f"| `{name}` | `{default}` | {text} |")
    return rows
