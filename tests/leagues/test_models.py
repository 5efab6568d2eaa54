"""leagues.models: where a league's base lives, and which leagues share which stage of it."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

from leagues.config import LeagueConfig
from leagues.models import base_folder, building, tiny_model_folder
from leagues.trainer import save_atomically

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


def test_a_second_builder_of_a_shared_base_waits_for_the_first_and_finds_it_built(
    tmp_path: Path,
) -> None:
    # Seeds started side by side share one base folder: the second must not build it again
    # over the first's half-written files (save_atomically's ".partial" is one path for both).
    target = tmp_path / "bases" / "tiny-abc"
    held, release, lines, found = threading.Event(), threading.Event(), [], []

    def first() -> None:
        with building(target, lines.append):
            held.set()
            release.wait(10)
            save_atomically(target, lambda tmp: (tmp / "config.json").write_text("{}"))

    def second() -> None:
        with building(target, lines.append):
            found.append((target / "config.json").is_file())

    builders = [threading.Thread(target=first), threading.Thread(target=second)]
    builders[0].start()
    held.wait(10)
    builders[1].start()
    deadline = time.monotonic() + 10
    while not lines and time.monotonic() < deadline:
        time.sleep(0.01)
    assert lines == [f"waiting for another run that builds {target}"] and found == []
    release.set()
    for builder in builders:
        builder.join(10)
    assert found == [True]
