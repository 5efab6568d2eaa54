"""Routing and resources of the ray executor's model actors (tournaments/ray_actors.py), as
pure functions: no Ray needed."""

from __future__ import annotations

import pytest

from agents.driver import Match
from arena.catalog import default_catalog
from arena.config import get_preset
from arena.scenarios import make_scenario
from tournaments.ray_actors import actor_resources, backend_key, group_jobs, model_group

SCENARIO = make_scenario(get_preset("in-distribution"), default_catalog(), 0, 0)


def test_adapters_and_sampling_share_their_base_models_back_end_key() -> None:
    base = backend_key("hf:/m/base?device=cpu")
    assert backend_key("hf:/m/base?device=cpu&temperature=0.2&seed=3&history=2") == base
    assert backend_key("hf:/m/base?device=cpu&batch_size=8") == base  # the default value
    assert backend_key("hf:/m/base?device=cpu&batch_size=4") != base
    assert backend_key("vllm:/m/base") != backend_key("hf:/m/base")


def test_a_match_is_routed_by_the_back_ends_of_its_llm_seats() -> None:
    llm = Match(SCENARIO, "hf:/m/a?temperature=0.5", ("scripted:time", "hf:/m/b", "hf:/m/a"))
    assert model_group(llm) == ("hf:/m/a", "hf:/m/b")
    scripted = Match(SCENARIO, "scripted:prober", ("scripted:time",) * 3)
    assert model_group(scripted) == ()
    other = Match(SCENARIO, "hf:/m/b", ("scripted:time",) * 3)
    groups = group_jobs([llm, scripted, other, llm])
    assert groups == {("hf:/m/a", "hf:/m/b"): [llm, llm], (): [scripted], ("hf:/m/b",): [other]}


@pytest.mark.parametrize(
    ("group", "gpus", "resources"),
    [
        (("vllm:/m/a",), 8, {"num_cpus": 1, "num_gpus": 1}),
        (("vllm:/m/a",), 0, {"num_cpus": 1}),  # vLLM's CPU build
        (("hf:/m/a?device=cuda",), 0, {"num_cpus": 1, "num_gpus": 1}),
        (("hf:/m/a",), 1, {"num_cpus": 1, "num_gpus": 1}),  # device=auto finds the GPU
        (("hf:/m/a?device=cpu&threads=4",), 8, {"num_cpus": 4}),
        (("openai:gpt?base_url=http://127.0.0.1:1/v1",), 8, {"num_cpus": 1}),
    ],
)
def test_resources_are_declared_per_back_end(group, gpus, resources) -> None:
    assert actor_resources(group, gpus) == resources
