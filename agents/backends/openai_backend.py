"""OpenAI-compatible chat back-end (OpenAI, vLLM server, llama.cpp server, ...).

Requests of one batch run concurrently on a private asyncio loop, bounded by a semaphore, so
generate() stays a plain blocking call that works from sync code and from inside a running loop.
The client's own retries are disabled: this module retries itself (429, 408/409, 5xx, timeouts,
connection errors, malformed responses) with exponential back-off and full jitter, so that every
retry is counted in the completion and in the stats.

The API key is read from the environment variable named by `api_key_env` when the client is
created; it is never stored on the back-end, in its config, stats or repr.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agents.backends.base import (
    BackendStats,
    ChatRequest,
    Completion,
    StatsRecorder,
    non_default_query,
)
from arena.settings import about

DEFAULT_BASE_URL = "https://api.openai.com/v1"
MAX_BACKOFF_S = 30.0
RETRY_STATUSES = frozenset({408, 409, 429})
NO_KEY_PLACEHOLDER = "EMPTY"  # what local OpenAI-compatible servers accept when no key is set


@dataclass(frozen=True)
class OpenAIConfig:
    """Back-end-level settings for an OpenAI-compatible endpoint."""

    base_url: str = field(
        default=DEFAULT_BASE_URL,
        metadata=about("server root including /v1"),
    )
    api_key_env: str = field(
        default="OPENAI_API_KEY",
        metadata=about("name of the env var holding the key; unset var sends EMPTY"),
    )
    max_concurrency: int = field(default=16, metadata=about("most requests in flight at once"))
    timeout: float = field(default=60.0, metadata=about("seconds allowed per attempt"))
    max_retries: int = field(default=5, metadata=about("retries after the first attempt"))
    backoff: float = field(
        default=0.5,
        metadata=about("base seconds of exponential back-off (full jitter)"),
    )

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(
                f"base_url={self.base_url!r} is invalid: give an http:// or https:// URL, "
                "e.g. http://127.0.0.1:8000/v1"
            )
        if not self.api_key_env:
            raise ValueError("api_key_env is empty: name an environment variable")
        if self.max_concurrency < 1:
            raise ValueError(f"max_concurrency={self.max_concurrency} is invalid: use >= 1")
        if not self.timeout > 0:
            raise ValueError(f"timeout={self.timeout} is invalid: use seconds > 0")
        if self.max_retries < 0:
            raise ValueError(f"max_retries={self.max_retries} is invalid: use >= 0")
        if self.backoff < 0:
            raise ValueError(f"backoff={self.backoff} is invalid: use seconds >= 0")


class MalformedResponseError(Exception):
    """The server answered 2xx but the body is not a usable chat completion."""


def backoff_delay(rng: np.random.Generator, base: float, retry: int) -> float:
    """Full-jitter exponential back-off: uniform in [0, min(cap, base * 2**retry)]."""
    return float(rng.uniform(0.0, min(MAX_BACKOFF_S, base * 2.0**retry)))


def retryable_reason(exc: BaseException) -> str | None:
    """Why `exc` is worth retrying, or None when retrying cannot help (e.g. 400, 401, 404)."""
    import openai

    if isinstance(exc, (asyncio.TimeoutError, openai.APITimeoutError)):
        return "timeout"
    if isinstance(exc, openai.APIConnectionError):
        return f"connection error: {exc}"
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code in RETRY_STATUSES or exc.status_code >= 500:
            return f"HTTP {exc.status_code}"
        return None
    if isinstance(exc, (json.JSONDecodeError, MalformedResponseError)):
        return f"malformed response: {exc}"
    if isinstance(exc, openai.APIResponseValidationError):
        return f"malformed response: {exc.message}"
    return None


def completion_from_response(response: Any) -> Completion:
    """Check the parsed response has the fields we use; the client does not validate them."""
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise MalformedResponseError(f"no choices in response of type {type(response).__name__}")
    message = getattr(choices[0], "message", None)
    content = getattr(message, "content", None)
    if not isinstance(content, str):
        raise MalformedResponseError("choices[0].message.content is not a string")
    usage = getattr(response, "usage", None)
    tokens_in = getattr(usage, "prompt_tokens", 0)
    tokens_out = getattr(usage, "completion_tokens", 0)
    return Completion(
        text=content,
        tokens_in=tokens_in if isinstance(tokens_in, int) else 0,
        tokens_out=tokens_out if isinstance(tokens_out, int) else 0,
    )


class OpenAIBackend:
    """Chat completions over HTTP with bounded concurrency and counted retries."""

    def __init__(self, name: str, config: OpenAIConfig = OpenAIConfig()) -> None:
        self.name = name
        self.config = config
        self.key = f"openai:{name}@{config.base_url}" + non_default_query(
            config, skip=("base_url",)
        )
        self._recorder = StatsRecorder()
        # Jitter exists to de-synchronise clients, so it draws fresh OS entropy on purpose;
        # it affects only waiting times, never model outputs.
        self._rng = np.random.default_rng()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: Any = None
        self._semaphore: asyncio.Semaphore | None = None

    @property
    def stats(self) -> BackendStats:
        return self._recorder.stats

    def __repr__(self) -> str:
        return f"OpenAIBackend(key={self.key!r})"

    def generate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        """Complete all requests concurrently (bounded), blocking until every one is done."""
        if not requests:
            return []
        start = time.perf_counter()
        future: Future[list[Completion]] = asyncio.run_coroutine_threadsafe(
            self._generate_all(list(requests)), self._ensure_loop()
        )
        completions = future.result()
        self._recorder.record(completions, time.perf_counter() - start)
        return completions

    def close(self) -> None:
        """Close the HTTP client and stop the private loop thread; safe to call twice."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop, self._thread = None, None
        if loop is None or thread is None:
            return
        asyncio.run_coroutine_threadsafe(self._close_client(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name=f"openai-backend:{self.name}", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    async def _close_client(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def _generate_all(self, requests: list[ChatRequest]) -> list[Completion]:
        if self._client is None:
            from openai import AsyncOpenAI

            self._client = AsyncOpenAI(
                base_url=self.config.base_url,
                api_key=os.environ.get(self.config.api_key_env) or NO_KEY_PLACEHOLDER,
                max_retries=0,
                timeout=self.config.timeout,
            )
            self._semaphore = asyncio.Semaphore(self.config.max_concurrency)
        return list(await asyncio.gather(*(self._complete(r) for r in requests)))

    async def _complete(self, request: ChatRequest) -> Completion:
        """One request with retries; returns Completion(error=...) once retries run out."""
        assert self._semaphore is not None
        if request.adapter is not None:
            return Completion(
                text="",
                error=f"the openai back-end applies no adapter ({request.adapter}): serve it "
                "with the server's lora_modules and name it as the model",
            )
        kwargs: dict[str, Any] = {
            "model": self.name,
            "messages": request.as_openai_messages(),
            "temperature": request.sampling.temperature,
            "top_p": request.sampling.top_p,
            "max_tokens": request.sampling.max_tokens,
        }
        if request.sampling.seed is not None:
            kwargs["seed"] = request.sampling.seed
        retries = 0
        while True:
            try:
                async with self._semaphore:
                    response = await asyncio.wait_for(
                        self._client.chat.completions.create(**kwargs),
                        timeout=self.config.timeout,
                    )
                completion = completion_from_response(response)
                completion.retries = retries
                return completion
            except Exception as exc:
                reason = retryable_reason(exc)
                if reason is None and not _is_api_error(exc):
                    raise
                if reason is None or retries >= self.config.max_retries:
                    detail = reason or f"{type(exc).__name__}: {exc}"
                    return Completion(
                        text="",
                        error=f"{detail} (gave up after {retries + 1} attempts)",
                        retries=retries,
                    )
                await asyncio.sleep(backoff_delay(self._rng, self.config.backoff, retries))
                retries += 1


def _is_api_error(exc: BaseException) -> bool:
    """Errors reported by the server or transport (a request's failure, not a bug here)."""
    import openai

    return isinstance(exc, openai.OpenAIError)
