"""The league's files: where its checkpoints live, and which run owns a generation's folder."""

from __future__ import annotations

import json
from pathlib import Path

from leagues.config import LeagueConfig


def league_folder(config: LeagueConfig, db_path: Path) -> Path:
    """Where checkpoints live: ``folder`` from the config, else ``runs/<name>`` beside the
    database (``<name>`` in the database's own folder when that is already ``runs``)."""
    if config.folder:
        return Path(config.folder)
    parent = db_path.resolve().parent
    return (parent if parent.name == "runs" else parent / "runs") / config.name


def claim_folder(folder: Path, league: str, config_hash: str) -> None:
    """Mark a generation's folder as this league run's (``run.json``) before training into it,
    or refuse one that another run's settings trained: a finished adapter or a trainer checkpoint
    there would be resumed as if it were this run's (a second database beside the first, same
    league name, other settings)."""
    for name in ("run.json", "league.json"):
        marker = folder / name
        if marker.is_file():
            stored = json.loads(marker.read_text()).get("config_hash")
            if stored != config_hash:
                raise ValueError(
                    f"{folder} holds a checkpoint of league {league!r} trained with other "
                    f"settings (config hash {stored}, this run's {config_hash}); give this run "
                    "its own folder (league.folder, or a --db in another directory) or remove "
                    "that folder to retrain"
                )
    if not (folder / "run.json").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "run.json").write_text(
            json.dumps({"league": league, "config_hash": config_hash}, indent=2)
        )
