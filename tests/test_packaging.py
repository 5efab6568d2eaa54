"""The package data pyproject.toml ships is there: every pattern names files that exist."""

from __future__ import annotations

from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_data_pattern_ships_files_that_exist() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    package_data = project["tool"]["setuptools"]["package-data"]
    for package, patterns in package_data.items():
        folder = ROOT / package.replace(".", "/")
        for pattern in patterns:
            assert list(folder.glob(pattern)), f"{package}: {pattern!r} matches no file"
