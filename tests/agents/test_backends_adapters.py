"""Adapters over a shared base model: folder checks, stable ids, the agent's AdapterView."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agents.backends import AdapterView, ChatRequest, Completion, backend_from_spec, get_backend
from agents.backends.adapters import adapter_id, adapter_rank, resolve_adapter, split_adapter
from agents.llm import make_llm_agent
from agents.testing.http_server import ScriptedChatServer


def adapter_dir(root: Path, name: str, rank: int = 8, peft_type: str = "LORA") -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"r": rank, "peft_type": peft_type}))
    return folder


def test_adapter_folders_resolve_to_one_absolute_path_and_bad_ones_are_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = adapter_dir(tmp_path, "gen3", rank=16)
    monkeypatch.chdir(tmp_path)
    assert resolve_adapter("gen3") == resolve_adapter(folder) == str(folder.resolve())
    assert adapter_rank(folder) == 16
    with pytest.raises(ValueError, match=r"lora=missing: no adapter_config\.json"):
        resolve_adapter("missing")
    with pytest.raises(ValueError, match="peft_type is 'PREFIX_TUNING'"):
        resolve_adapter(adapter_dir(tmp_path, "prefix", peft_type="PREFIX_TUNING"))
    (tmp_path / "norank").mkdir()
    (tmp_path / "norank" / "adapter_config.json").write_text("{}")
    with pytest.raises(ValueError, match="no positive integer 'r'"):
        adapter_rank(tmp_path / "norank")


def test_adapter_ids_are_stable_across_processes_and_distinct_per_folder(tmp_path: Path) -> None:
    first, second = adapter_dir(tmp_path, "a"), adapter_dir(tmp_path, "b")
    name, number = adapter_id(first)
    assert name.startswith("a-") and 1 <= number <= 2**31 - 1
    assert adapter_id(second)[1] != number
    code = (
        "import sys; from agents.backends.adapters import adapter_id; "
        "print(adapter_id(sys.argv[1])[1])"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code, str(first)], capture_output=True, text=True, env=env,
        check=True,
    )  # fmt: skip
    assert int(out.stdout) == number


def test_split_adapter_takes_lora_out_of_the_backend_params(tmp_path: Path) -> None:
    folder = adapter_dir(tmp_path, "a")
    assert split_adapter({"lora": str(folder), "dtype": "float32"}) == (
        {"dtype": "float32"},
        str(folder.resolve()),
    )
    assert split_adapter({"dtype": "float32", "lora": ""}) == ({"dtype": "float32"}, None)


def test_agents_through_an_adapter_send_it_on_every_request_with_their_conversation() -> None:
    """The LLM agent fills ChatRequest.adapter from its AdapterView and names its conversation
    once per episode."""
    from agents.base import EpisodeContext, agent_seed
    from arena.catalog import load_catalog
    from arena.config import get_preset
    from arena.game import Market
    from arena.scenarios import make_scenarios

    class Recorder:
        key = "recorder"

        def __init__(self) -> None:
            self.requests: list[ChatRequest] = []

        def generate(self, requests: list[ChatRequest]) -> list[Completion]:
            self.requests += requests
            return [Completion(text="Action: [QUIT]") for _ in requests]

    recorder = Recorder()
    agent = make_llm_agent("openai:m?base_url=http://127.0.0.1:9/v1&max_retries=0", "seller")
    agent.backend = AdapterView(recorder, "/abs/gen3")
    config = get_preset("in-distribution")
    (scenario,) = make_scenarios(config, load_catalog(None), 0, 1)
    agent.reset(EpisodeContext("seller", 0, config, scenario, agent_seed(scenario, 0)))
    market = Market(config, scenario)
    first = agent.request(market.seller_view())
    agent.receive(Completion(text="Thought: x\nTarget: 1\nTalk: y\nAction: [QUIT]"))
    second = agent.request(market.seller_view())
    assert first.adapter == second.adapter == "/abs/gen3"
    assert first.conversation == second.conversation is not None
    assert first.conversation.startswith(f"{scenario.seed}:{scenario.index}/seller#")
    agent.reset(EpisodeContext("seller", 0, config, scenario, agent_seed(scenario, 0)))
    plain = make_llm_agent("openai:m?base_url=http://127.0.0.1:9/v1", "seller")
    plain.reset(EpisodeContext("seller", 0, config, scenario, agent_seed(scenario, 0)))
    assert plain.request(market.seller_view()).adapter is None


def test_an_adapter_view_shares_the_key_stats_and_batch_of_its_backend() -> None:
    with ScriptedChatServer(reply_text=lambda messages: "ok") as server:
        shared = get_backend("openai", "m", {"base_url": server.url})
        view = AdapterView(shared, "/abs/a")
        (completion,) = view.generate([ChatRequest((("user", "hi"),))])
        assert completion.text == "ok"
        assert view.key == shared.key and view.stats is shared.stats
        view.close()  # the view owns nothing: the shared back-end still answers
        assert shared.generate([ChatRequest((("user", "hi"),))])[0].text == "ok"


def test_the_openai_backend_refuses_adapters_pointing_at_the_server(tmp_path: Path) -> None:
    folder = adapter_dir(tmp_path, "a")
    with pytest.raises(ValueError, match=r"cannot apply lora=.*lora_modules"):
        get_backend("openai", "m", {"base_url": "http://127.0.0.1:9/v1", "lora": str(folder)})
    with pytest.raises(ValueError, match="lora= is per request"):
        backend_from_spec("openai", "m", {"lora": str(folder)})
    with ScriptedChatServer(reply_text=lambda messages: "ok") as server:
        backend = get_backend("openai", "m", {"base_url": server.url})
        (failed,) = backend.generate([ChatRequest((("user", "hi"),), adapter=str(folder))])
        assert failed.error is not None and "applies no adapter" in failed.error
