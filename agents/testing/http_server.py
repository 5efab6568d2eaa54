"""A scripted OpenAI-compatible chat server on 127.0.0.1 for testing HTTP back-ends.

It is a real HTTP server (stdlib ThreadingHTTPServer on a free port, in a background thread), so
tests exercise the genuine client stack: connection handling, status codes, timeouts, JSON parsing.
Each POST /v1/chat/completions is answered by, in order of precedence:
  1. `route(body)` when given and it returns a Reply (lets a test fail one specific prompt),
  2. the next Reply from the FIFO script (`enqueue`),
  3. the default Reply: a valid completion whose content is `reply_text(messages)`.
The server records every request (headers included) and the most requests it had in flight.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

MALFORMED = "malformed"
CHAT_PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class Reply:
    """One scripted answer: an HTTP status, a body and a delay before answering."""

    status: int = 200
    body: dict[str, Any] | str | None = field(
        default=None,
        metadata={
            "help": "None: default completion (or error JSON if status != 200); "
            "'malformed': truncated JSON; dict: sent as JSON"
        },
    )
    delay: float = field(default=0.0, metadata={"help": "seconds to wait before answering"})


@dataclass(frozen=True)
class ReceivedRequest:
    """What the server saw for one call."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


def echo_last_user(messages: list[dict[str, str]]) -> str:
    """Default reply text: echo the last message so tests can match answers to prompts."""
    return f"echo: {messages[-1]['content']}"


def count_words(text: str) -> int:
    """The server's stand-in for token counting, so tests can predict `usage`."""
    return len(text.split())


def completion_body(model: str, messages: list[dict[str, str]], text: str, n: int) -> dict:
    """A minimal, valid chat.completion object with usage computed by `count_words`."""
    prompt_tokens = sum(count_words(m.get("content", "")) for m in messages)
    completion_tokens = count_words(text)
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


class ScriptedChatServer:
    """Context manager running the scripted server; `url` is the base_url to give a client."""

    def __init__(
        self,
        script: Iterable[Reply] = (),
        reply_text: Callable[[list[dict[str, str]]], str] = echo_last_user,
        route: Callable[[dict[str, Any]], Reply | None] | None = None,
        default_delay: float = 0.0,
    ) -> None:
        self.reply_text = reply_text
        self.route = route
        self.default_delay = default_delay
        self._script: deque[Reply] = deque(script)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._requests: list[ReceivedRequest] = []
        self._in_flight = 0
        self.max_in_flight = 0
        self.aborted_responses = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("server is not running; use it as a context manager")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def requests(self) -> list[ReceivedRequest]:
        with self._lock:
            return list(self._requests)

    def enqueue(self, *replies: Reply) -> None:
        with self._lock:
            self._script.extend(replies)

    def __enter__(self) -> ScriptedChatServer:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},  # fast shutdown keeps tests quick
            name="scripted-chat-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()  # wakes handlers sleeping in a scripted delay
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
        self._server = None

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        if self.route is not None:
            routed = self.route(body)
            if routed is not None:
                return routed
        with self._lock:
            if self._script:
                return self._script.popleft()
        return Reply(delay=self.default_delay)

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length", "0"))
        raw = handler.rfile.read(length)
        if handler.path != CHAT_PATH:
            _send(handler, 404, json.dumps({"error": {"message": f"no route {handler.path}"}}))
            return
        try:
            body = json.loads(raw)
        except json.JSONDecodeError as exc:
            _send(handler, 400, json.dumps({"error": {"message": f"bad JSON: {exc}"}}))
            return
        with self._lock:
            self._requests.append(ReceivedRequest(handler.path, dict(handler.headers), body))
            n = len(self._requests)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            reply = self._next_reply(body)
            if reply.delay > 0 and self._stop.wait(reply.delay):
                return
            _send(handler, reply.status, self._payload(reply, body, n))
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up (its timeout is shorter than the scripted delay); count it so
            # tests can see it happened.
            with self._lock:
                self.aborted_responses += 1
        finally:
            with self._lock:
                self._in_flight -= 1

    def _payload(self, reply: Reply, body: dict[str, Any], n: int) -> str:
        if reply.body == MALFORMED:
            return '{"id": "chatcmpl-broken", "choices": [{"index": 0, "mess'
        if isinstance(reply.body, dict):
            return json.dumps(reply.body)
        if isinstance(reply.body, str):
            return reply.body
        if reply.status != 200:
            return json.dumps({"error": {"message": f"scripted status {reply.status}"}})
        messages = body.get("messages", [])
        text = self.reply_text(messages)
        return json.dumps(completion_body(body.get("model", ""), messages, text, n))


def _send(handler: BaseHTTPRequestHandler, status: int, payload: str) -> None:
    data = payload.encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
    handler.wfile.flush()


def _make_handler(server: ScriptedChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            server._handle(self)

        def log_message(self, format: str, *args: Any) -> None:
            """Silence per-request logging; tests inspect `requests` instead."""

    return Handler
