"""Headless Chromium driven over the DevTools protocol on a pipe, with the standard library only.

`--remote-debugging-pipe` makes Chromium read commands from fd 3 and write replies to fd 4, each a JSON
message ended by a NUL byte: no port, no websocket, no Python package. Used by the site's tests (pages
load with no console errors, charts have marks, links resolve) and by `tierbench report --screenshot`.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--mute-audio",
    "--hide-scrollbars",
    "--no-default-browser-check",
    "--remote-debugging-pipe",
)


class BrowserError(RuntimeError):
    pass


def find_chromium() -> str | None:
    """The Chromium binary: $TIERBENCH_CHROMIUM, else Debian's /usr/bin/chromium, else one on PATH."""
    for candidate in (
        os.environ.get("TIERBENCH_CHROMIUM"),
        CHROMIUM,
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


@dataclass
class PageLoad:
    url: str
    errors: list[str] = field(default_factory=list)  # uncaught exceptions, console.error, failed loads
    value: Any = None  # what the probe expression returned


class Browser:
    """One headless Chromium; `load` opens a page in a fresh tab and reports what went wrong there."""

    def __init__(
        self, binary: str | None = None, width: int = 1280, height: int = 900, timeout_s: float = 30.0
    ) -> None:
        self.binary = binary or find_chromium()
        if not self.binary:
            raise BrowserError(
                f"no Chromium found (looked for $TIERBENCH_CHROMIUM, {CHROMIUM} and PATH); "
                "install it with: apt-get install -y chromium"
            )
        self.width, self.height, self.timeout_s = width, height, timeout_s
        self._next_id = 0
        self._inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._events: list[dict[str, Any]] = []
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Browser:
        self._profile = tempfile.mkdtemp(prefix="tierbench-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        # Moved above 9 so that they cannot collide with the 3 and 4 the shell assigns below.
        to_child_r, from_child_w = (_high_fd(fd) for fd in (to_child_r, from_child_w))
        # bash (dash takes one-digit fds only) puts our pipe ends at fds 3 and 4, where Chromium
        # expects them, then becomes Chromium.
        script = f'exec "$0" "$@" 3<&{to_child_r} 4>&{from_child_w} {to_child_r}<&- {from_child_w}>&-'
        args = [*FLAGS, f"--user-data-dir={self._profile}", f"--window-size={self.width},{self.height}", "about:blank"]
        self._proc = subprocess.Popen(
            ["bash", "-c", script, self.binary, *args],
            pass_fds=(to_child_r, from_child_w),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        threading.Thread(target=self._reader, daemon=True).start()
        try:
            self.call("Browser.getVersion")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            try:
                self._send("Browser.close")
            except OSError:
                pass
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None
        for fd in (self._to_child, self._from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self._profile, ignore_errors=True)

    # -- protocol -----------------------------------------------------------------------------------

    def _reader(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self._from_child, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                self._inbox.put(None)  # Chromium went away
                return
            buf += chunk
            *messages, buf = buf.split(b"\0")
            for raw in messages:
                self._inbox.put(json.loads(raw))

    def _send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> int:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        return self._next_id

    def _receive(self, deadline: float) -> dict[str, Any]:
        try:
            message = self._inbox.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise BrowserError(f"Chromium did not answer within {self.timeout_s:.0f} s") from None
        if message is None:
            raise BrowserError("Chromium exited")
        return message

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> Any:
        wanted = self._send(method, params, session)
        deadline = time.monotonic() + self.timeout_s
        while True:
            message = self._receive(deadline)
            if message.get("id") == wanted:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error'].get('message')}")
                return message.get("result", {})
            if "method" in message:
                self._events.append(message)

    def _wait_event(self, method: str, session: str) -> None:
        deadline = time.monotonic() + self.timeout_s
        while not any(e["method"] == method and e.get("sessionId") == session for e in self._events):
            message = self._receive(deadline)
            if "method" in message:
                self._events.append(message)

    # -- pages --------------------------------------------------------------------------------------

    def load(
        self, url: str, probe: str | None = None, screenshot: str | Path | None = None, full_height_max: int = 4000
    ) -> PageLoad:
        """Open url, wait for its load event, run the probe expression, maybe save a PNG, close the tab."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        try:
            for domain in ("Runtime", "Log", "Page"):
                self.call(f"{domain}.enable", session=session)
            self.call(
                "Emulation.setDeviceMetricsOverride",
                {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False},
                session=session,
            )
            self._events = [e for e in self._events if e.get("sessionId") != session]
            nav = self.call("Page.navigate", {"url": url}, session=session)
            if nav.get("errorText"):
                raise BrowserError(f"{url}: {nav['errorText']}")
            self._wait_event("Page.loadEventFired", session)
            # One more round trip lets scripts run by the load event report their errors.
            self.call(
                "Runtime.evaluate",
                {"expression": "new Promise(r => setTimeout(r, 50))", "awaitPromise": True},
                session=session,
            )
            result = PageLoad(url)
            if probe:
                answer = self.call(
                    "Runtime.evaluate",
                    {"expression": probe, "returnByValue": True, "awaitPromise": True},
                    session=session,
                )
                if "exceptionDetails" in answer:
                    result.errors.append("probe failed: " + _exception_text(answer["exceptionDetails"]))
                result.value = answer.get("result", {}).get("value")
            if screenshot:
                self._screenshot(session, Path(screenshot), full_height_max)
            result.errors += _errors(e for e in self._events if e.get("sessionId") == session)
            return result
        finally:
            self.call("Target.closeTarget", {"targetId": target})

    def _screenshot(self, session: str, path: Path, full_height_max: int) -> None:
        size = self.call("Page.getLayoutMetrics", session=session)["cssContentSize"]
        height = min(int(size["height"]) + 1, full_height_max)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": self.width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        data = self.call("Page.captureScreenshot", {"format": "png"}, session=session)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(base64.b64decode(data))
        tmp.replace(path)


def _high_fd(fd: int) -> int:
    high = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return high


def _exception_text(details: dict[str, Any]) -> str:
    exc = details.get("exception") or {}
    return str(exc.get("description") or details.get("text") or "exception")


def _errors(events: Any) -> list[str]:
    """Console errors in the three forms Chromium reports them."""
    out = []
    for event in events:
        method, params = event["method"], event.get("params", {})
        if method == "Runtime.exceptionThrown":
            out.append("uncaught: " + _exception_text(params.get("exceptionDetails", {})))
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = [str(a.get("value", a.get("description", ""))) for a in params.get("args", [])]
            out.append("console.error: " + " ".join(args))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            where = entry.get("url", "")
            out.append(f"{entry.get('source', 'log')}: {entry.get('text', '')} {where}".rstrip())
    return out


def screenshot(url: str, path: str | Path, width: int = 1280, max_height: int = 2400) -> PageLoad:
    """A PNG of the page at url (full page height up to max_height)."""
    with Browser(width=width, height=800) as browser:
        return browser.load(url, screenshot=path, full_height_max=max_height)
