"""leagues.models: where a league's base lives, and which leagues share which stage of it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from leagues.config import LeagueConfig
from leagues.models import base_folder, tiny_model_folder

from .leagues import league_config


def _recipes(tmp_path: Path) -> tuple[LeagueConfig, LeagueConfig, LeagueConfig]:
    seller = LeagueConfig.from_toml(league_config(tmp_path, "sell"))
    seller = dataclasses.replace(
        seller, learner=dataclasses.replace(seller.learner, warm_start="scripted:prober")
    )
    buyer = dataclasses.replace(
        seller,
        name="buy",
        learner=dataclasses.replace(seller.learner, side="buyer", warm_start="scripted:time"),
    )
    wider = dataclasses.replace(
        seller,
        learner=dataclasses.replace(
            seller.learner, tiny=dataclasses.replace(seller.learner.tiny, hidden=96)
        ),
    )
    return seller, buyer, wider


def test_leagues_with_one_tiny_recipe_share_the_tiny_model_but_not_the_warm_start(tmp_path):
    seller, buyer, wider = _recipes(tmp_path)
    folder = tmp_path / "files"
    assert tiny_model_folder(seller, folder / "sell") == tiny_model_folder(buyer, folder / "buy")
    assert base_folder(seller, folder / "sell") != base_folder(buyer, folder / "buy")
    assert tiny_model_folder(wider, folder / "sell") != tiny_model_folder(seller, folder / "sell")
    assert tiny_model_folder(seller, folder / "sell").parent == folder / "bases"


def test_a_tiny_model_stored_inside_an_earlier_base_folder_is_kept_there(tmp_path):
    seller, _, _ = _recipes(tmp_path)
    folder = tmp_path / "files" / "sell"
    earlier = base_folder(seller, folder) / "tiny-model"
    earlier.mkdir(parents=True)
    (earlier / "config.json").write_text("{}")
    assert tiny_model_folder(seller, folder) == earlier
