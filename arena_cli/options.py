"""Options shared by the commands, and the checks their values get before any work starts.

Option help comes from the config dataclasses' field help (``EvalConfig``) where an option sets a
field. Every file or folder a command will write (``--json``, ``--out``, ``--db``) is checked
first (:func:`writable_file`, :func:`writable_folder`), so a typo in a path never costs a run.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer

from arena.config import parse_assignments
from arena.settings import field_help
from tournaments.evaluate import EvalConfig


def config_help(name: str) -> str:
    """The help text of ``EvalConfig`` field ``name``, for the option that sets it."""
    return field_help(EvalConfig, name)


PresetOpt = Annotated[str, typer.Option("--preset", "-p", help=config_help("preset"))]
SetOpt = Annotated[list[str] | None, typer.Option("--set", help=config_help("overrides"))]
CatalogOpt = Annotated[str | None, typer.Option("--catalog", help=config_help("catalog"))]
SplitOpt = Annotated[str, typer.Option("--split", help=config_help("split"))]
SellerOpt = Annotated[str, typer.Option("--seller", help=config_help("seller"))]
BuyerOpt = Annotated[
    str,
    typer.Option("--buyer", help=config_help("buyers") + " Comma-separated on the command line."),
]
SeedOpt = Annotated[int, typer.Option("--seed", min=0, help=config_help("seed"))]
JsonOpt = Annotated[Path | None, typer.Option("--json", help="Write the results as JSON here.")]
ReadDbOpt = Annotated[
    Path, typer.Option("--db", help="SQLite results file, opened read-only (never changed).")
]
WriteDbOpt = Annotated[
    Path | None,
    typer.Option(
        "--db", help="SQLite results file (default: <name>.db); one run writes it at a time."
    ),
]


def buyer_specs(text: str) -> tuple[str, ...]:
    """The specs of ``--buyer``: comma-separated, commas inside a spec's parameters kept."""
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


def eval_config(
    seller: str,
    buyer: str,
    preset: str,
    overrides: list[str] | None,
    **fields: object,
) -> EvalConfig:
    """The evaluation the options describe, every part checked before any work: specs,
    preset, ``--set`` values, the catalogue and its split."""
    config = EvalConfig(
        seller=seller,
        buyers=buyer_specs(buyer),
        preset=preset,
        overrides=tuple(parse_assignments(overrides or []).items()),
        **fields,  # type: ignore[arg-type]
    )
    config.market()
    config.products()
    return config


def writable_file(path: Path | None, option: str) -> None:
    """Fail now when the file ``path`` (the value of ``option``) could not be written later. A
    missing file is created and removed again to be sure; an existing one is left as it is."""
    if path is None:
        return
    if path.is_dir():
        raise ValueError(f"{option} {path} is a folder; give a file name")
    if not path.parent.is_dir():
        raise FileNotFoundError(f"{option} {path}: folder {path.parent} does not exist")
    existed = path.exists()
    try:
        with path.open("a"):
            pass
    except OSError as exc:
        raise ValueError(f"{option} {path} cannot be written: {exc.strerror}") from None
    if not existed:
        path.unlink()


def writable_folder(path: Path, option: str) -> None:
    """Fail now when the folder ``path`` (the value of ``option``) could not be made or written
    later; nothing is created."""
    if path.exists() and not path.is_dir():
        raise ValueError(f"{option} {path} is a file; give a folder")
    existing = path
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ValueError(f"{option} {path}: {existing} is a file, so the folder cannot be made")
    try:
        tempfile.TemporaryFile(dir=existing).close()
    except OSError as exc:
        raise ValueError(f"{option} {path} cannot be written: {exc.strerror}") from None
