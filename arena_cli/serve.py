"""``arena serve``: the project's OpenAI-compatible vLLM server for ``openai:`` agents.

It parses the options into an :class:`agents.backends.vllm_server.ServerConfig` (engine settings
in the agent-spec dialect, e.g. ``--engine "dtype=float32&enforce_eager=true"``), starts the
server with its health wait, prints the base URL and the ``openai:`` specs that reach the base
model and each adapter, and blocks until Ctrl-C or SIGTERM, which stop the server's whole process
group.
"""

from __future__ import annotations

import signal
from typing import Annotated, Any
from urllib.parse import parse_qsl

import typer
from rich.console import Console
from rich.markup import escape

from agents.backends import ADAPTER_KEY, SAMPLING_KEYS, backend_config
from agents.backends.vllm_server import ServerConfig, ServerError, start_vllm_server

console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def lora_modules(values: list[str]) -> tuple[tuple[str, str], ...]:
    """``NAME=DIR`` options as (name, adapter folder) pairs."""
    modules = []
    for value in values:
        name, sep, folder = value.partition("=")
        if not sep or not name or not folder:
            raise ValueError(f"--lora {value!r}: write NAME=ADAPTER_FOLDER, e.g. gen3=runs/gen3")
        modules.append((name, folder))
    return tuple(modules)


def server_config(
    model: str,
    lora: list[str],
    engine: str,
    host: str,
    port: int | None,
    served_model_name: str | None,
    startup_timeout: float,
    log_file: str | None,
) -> ServerConfig:
    """The server's settings from the command line (errors name the option)."""
    try:
        params = dict(parse_qsl(engine, keep_blank_values=True, strict_parsing=bool(engine)))
    except ValueError:
        raise ValueError(f"--engine {engine!r}: write key=value pairs joined by &") from None
    agent_keys = sorted(set(params) & {*SAMPLING_KEYS, ADAPTER_KEY})
    if agent_keys:
        raise ValueError(
            f"--engine: {', '.join(agent_keys)} belong to an agent, not the server: put them in "
            "the openai: spec (adapters: --lora NAME=DIR)"
        )
    try:
        settings = backend_config("vllm", params)
    except ValueError as exc:
        raise ValueError(f"--engine: {exc}") from None
    return ServerConfig(
        model=model,
        lora_modules=lora_modules(lora),
        engine=settings,
        host=host,
        port=port,
        served_model_name=served_model_name,
        startup_timeout=startup_timeout,
        log_file=log_file,
    )


def _stop_on_sigterm(*_: Any) -> None:
    raise KeyboardInterrupt


def serve(
    model: Annotated[str, typer.Argument(help="Model folder (or hub name) to serve.")],
    lora: Annotated[
        list[str] | None,
        typer.Option(help="NAME=ADAPTER_FOLDER: a PEFT LoRA adapter served as model NAME."),
    ] = None,
    engine: Annotated[
        str,
        typer.Option(
            help="Engine settings as for vllm: agents, e.g. 'dtype=float32&enforce_eager=true' "
            "(docs/agents.md, Spec parameters)."
        ),
    ] = "",
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int | None, typer.Option(help="Port; default: a free one.")] = None,
    served_model_name: Annotated[
        str | None, typer.Option(help="The base model's name in requests; default: MODEL.")
    ] = None,
    startup_timeout: Annotated[
        float, typer.Option(help="Seconds to wait for /health before giving up.")
    ] = 300.0,
    log_file: Annotated[
        str | None, typer.Option(help="Where the server's output goes; default: a temp file.")
    ] = None,
) -> None:
    """Start vLLM's OpenAI-compatible server for openai: agents; Ctrl-C stops it."""
    try:
        config = server_config(
            model, lora or [], engine, host, port, served_model_name, startup_timeout, log_file
        )
        console.print(f"starting the vLLM server for {model}")
        server = start_vllm_server(config)
    except (ValueError, FileNotFoundError, ServerError) as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}")
        raise typer.Exit(2 if not isinstance(exc, ServerError) else 1) from None
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    # Ctrl-C stops the server even where SIGINT came in ignored (a command started with `&`
    # from a script, whose children inherit the ignore across exec).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    base = config.served_model_name or model
    console.print(f"ready: base_url {server.base_url} (pid {server.pid}, log {server.log_path})")
    for name in (base, *(name for name, _ in config.lora_modules)):
        console.print(f'  --seller "openai:{name}?base_url={server.base_url}"')
    console.print("Ctrl-C stops the server.")
    try:
        code = server.wait()
    finally:
        server.stop()
    console.print(f"server stopped (exit code {code})")
