"""leagues.models: where a league's base lives, and which leagues share which stage of it."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from pathlib import Path

import pytest

from leagues.config import LeagueConfig
from leagues.learner_config import BUYER_AIDS
from leagues.models import (
    base_folder,
    base_settings,
    building,
    prepare_base_model,
    tiny_model_folder,
)
from leagues.numerics import COMPARED, NUMERICS_FILE, numeric_environment, numerics_differ
from leagues.plan import learner_params
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


def test_a_buyers_aids_have_their_own_base_and_specs_and_leagues_without_them_keep_theirs(tmp_path):
    _, buyer, _ = _recipes(tmp_path)
    laddered = dataclasses.replace(
        buyer,
        learner=dataclasses.replace(
            buyer.learner, ladder=4, budget_hint=True, list_hint=True, round_hint=True
        ),
    )
    folder = tmp_path / "files" / "buy"
    assert "ladder" not in base_settings(buyer)["warm"]  # the names of earlier bases stay
    assert base_folder(laddered, folder) != base_folder(buyer, folder)
    assert tiny_model_folder(laddered, folder) == tiny_model_folder(buyer, folder)
    assert not {"budget_hint", "list_hint", "round_hint"} & base_settings(buyer)["warm"].keys()
    assert base_settings(laddered)["warm"]["list_hint"] is True
    assert base_settings(laddered)["warm"]["round_hint"] is True
    params = learner_params(laddered.learner)  # trained and rated with them
    aids = ("ladder", "budget_hint", "list_hint", "round_hint")  # share_cue: test_config
    assert [params[aid] for aid in aids] == ["4", "true", "true", "true"]
    assert not BUYER_AIDS.keys() & learner_params(buyer.learner).keys()
    dataclasses.replace(buyer, preset="multi-product", market={})  # without a ladder: fine
    for aid in ({"ladder": 4}, {"budget_hint": True}, {"list_hint": True}):
        learner = dataclasses.replace(buyer.learner, **aid)
        with pytest.raises(ValueError, match=f"{next(iter(aid))} is written for single-product"):
            dataclasses.replace(buyer, preset="multi-product", market={}, learner=learner)
    rounds = dataclasses.replace(buyer.learner, round_hint=True)  # no budget read: any market
    dataclasses.replace(buyer, preset="multi-product", market={}, learner=rounds)


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

    # daemon threads: a failed assertion below must never keep the test process from exiting
    builders = [threading.Thread(target=f, daemon=True) for f in (first, second)]
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


@pytest.mark.slow
def test_a_built_base_records_its_numerics_and_its_reuse_elsewhere_is_noted(tmp_path):
    seller, _, _ = _recipes(tmp_path)
    tiny = dataclasses.replace(seller.learner.tiny, copy_pretrain_steps=0)
    config = dataclasses.replace(
        seller, learner=dataclasses.replace(seller.learner, warm_start="", tiny=tiny)
    )
    folder, lines = tmp_path / "files" / "sell", []
    path = prepare_base_model(config, folder, lines.append)
    recorded = json.loads((path / NUMERICS_FILE).read_text())
    assert recorded == numeric_environment() and set(COMPARED) <= set(recorded)
    assert prepare_base_model(config, folder, lines.append) == path
    assert not [line for line in lines if line.startswith("note:")]  # built here: no note
    (path / NUMERICS_FILE).write_text(json.dumps({**recorded, "cpu_capability": "VSX"}))
    prepare_base_model(config, folder, lines.append)
    notes = [line for line in lines if line.startswith("note:")]
    assert len(notes) == 1 and "cpu_capability 'VSX' then" in notes[0]
    assert "torch" not in notes[0].split("(", 1)[1]  # only what differs is named
    started = dataclasses.replace(
        config, learner=dataclasses.replace(config.learner, start={"seller": f"hf:{path}"})
    )
    lines.clear()  # another league starting from that base (nothing built) is told too
    assert prepare_base_model(started, tmp_path / "files" / "next", lines.append) == path
    notes = [line for line in lines if line.startswith("note:")]
    assert len(notes) == 1 and str(path) in notes[0] and "'VSX' then" in notes[0]
    (path / NUMERICS_FILE).unlink()  # a base built before the record: nothing to compare
    assert numerics_differ(path) == {}
