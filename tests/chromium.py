"""A small driver for headless Chromium over the DevTools protocol, standard library only.

Chromium runs with ``--remote-debugging-pipe``: it reads protocol commands on file descriptor 3
and writes replies and events on descriptor 4, each a JSON message ended by a NUL byte. A shell
``exec`` maps the child's stdin and stdout onto those descriptors, so no port is opened and no
websocket library is needed. Used by the report's browser tests and ``docs/screenshots.py``.

Clicks are real mouse events (``Input.dispatchMouseEvent`` at the element's centre), so a test
clicks what a person would click.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

SKIP_REASON = (
    "Debian's chromium is not installed (apt-get install -y chromium; .ci/run installs it), so "
    "the report cannot be opened in a real browser"
)


def find_chromium() -> str | None:
    """The Chromium executable: $CHROMIUM, else ``chromium`` or ``chromium-browser`` on PATH."""
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


NAVIGATING = ("Inspected target navigated or closed", "Execution context was destroyed")
"""Chromium's answers to an evaluation that a navigation interrupted (the page it ran in is
gone): a wait polls again rather than failing, as a loaded machine makes the window wider."""


class BrowserError(RuntimeError):
    """Chromium answered a command with an error, or a wait timed out."""


class Chromium:
    """One headless Chromium with one page. Use as a context manager."""

    def __init__(self, width: int = 1200, height: int = 900, timeout: float = 30.0) -> None:
        executable = find_chromium()
        if executable is None:
            raise FileNotFoundError(SKIP_REASON)
        self.timeout = timeout
        self.profile = tempfile.TemporaryDirectory(prefix="arena-chromium-")
        flags = [
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--no-first-run", "--no-default-browser-check", "--remote-debugging-pipe",
            "--allow-file-access-from-files", f"--user-data-dir={self.profile.name}",
            f"--window-size={width},{height}", "about:blank",
        ]  # fmt: skip
        self.log = open(Path(self.profile.name) / "chromium.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            ["sh", "-c", 'exec "$0" "$@" 3<&0 4>&1 </dev/null >/dev/null', executable, *flags],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
        )
        self._id = 0
        self._replies: dict[int, queue.Queue[dict[str, Any]]] = {}
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.errors: list[str] = []
        """Uncaught page exceptions and console errors, in order."""
        threading.Thread(target=self._read, daemon=True).start()
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})
        self.session = attached["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")
        self.width, self.height = width, height

    def _read(self) -> None:
        assert self.proc.stdout is not None
        buffer = b""
        while True:
            chunk = self.proc.stdout.read1(65536)
            if not chunk:
                return
            buffer += chunk
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                message = json.loads(raw)
                if "id" in message and message["id"] in self._replies:
                    self._replies[message["id"]].put(message)
                else:
                    self._event(message)

    def _event(self, message: dict[str, Any]) -> None:
        method = message.get("method", "")
        params = message.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            self.errors.append(details.get("exception", {}).get("description", details["text"]))
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            self.errors.append(params["entry"]["text"])
        self.events.put(message)

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None):
        """Send a command and wait for its result."""
        self._id += 1
        reply: queue.Queue[dict[str, Any]] = queue.Queue()
        self._replies[self._id] = reply
        message: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\0")
        self.proc.stdin.flush()
        try:
            answer = reply.get(timeout=self.timeout)
        except queue.Empty:
            raise BrowserError(f"no answer to {method} within {self.timeout} s") from None
        if "error" in answer:
            raise BrowserError(f"{method}: {answer['error']}")
        return answer.get("result", {})

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A command to the page."""
        return self.call(method, params, self.session)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression!r} threw {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str) -> None:
        """Navigate and wait until the page has loaded (a change of the hash alone loads
        nothing: it returns at once)."""
        while not self.events.empty():
            self.events.get_nowait()
        if "loaderId" not in self.send("Page.navigate", {"url": url}):
            return
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            try:
                event = self.events.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if event.get("method") == "Page.loadEventFired":
                return
        raise BrowserError(f"{url} did not load within {self.timeout} s")

    def wait_for(self, expression: str, timeout: float | None = None) -> Any:
        """Poll a JavaScript expression until it is truthy; its value (true for an element)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        check = f"(function () {{ var v = ({expression}); return v instanceof Node || v; }})()"
        while True:
            try:
                value = self.evaluate(check)
            except BrowserError as error:  # a click's navigation replaced the page mid-poll
                if not any(text in str(error) for text in NAVIGATING):
                    raise
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out waiting for {expression!r}; errors: {self.errors}")
            time.sleep(0.05)

    def click(self, selector: str) -> None:
        """A real mouse click at the centre of the first element matching ``selector``."""
        box = self.evaluate(
            f"(function () {{ var e = document.querySelector({json.dumps(selector)});"
            " if (!e) return null; e.scrollIntoView({block: 'center'});"
            " var r = e.getBoundingClientRect();"
            " return {x: r.left + r.width / 2, y: r.top + r.height / 2}; })()"
        )
        if box is None:
            raise BrowserError(f"nothing matches {selector!r} on {self.evaluate('location.href')}")
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": box["x"], "y": box["y"],
                                                   "button": "left", "clickCount": 1})  # fmt: skip

    def screenshot(self, path: Path, full_page: bool = True) -> Path:
        """A PNG of the page (the whole page by default)."""
        height = self.height
        if full_page:
            height = int(self.evaluate("document.documentElement.scrollHeight"))
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": height, "deviceScaleFactor": 1,
                   "mobile": False})  # fmt: skip
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        self.send("Emulation.clearDeviceMetricsOverride")
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(BrowserError, BrokenPipeError, OSError):
                self.call("Browser.close")
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        self.profile.cleanup()

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
