"""A headless Chromium driven over the Chrome DevTools Protocol, for tests of report.html.

Chromium (Debian's ``chromium``, installed by ``make setup``) is started with
``--remote-debugging-pipe``: it reads protocol messages from file descriptor 3
and writes to 4, each a JSON object ended by a NUL byte. No port is opened and
no browser is downloaded. The browser runs in a :class:`~harness.process.jobs.Job`,
so it and every process it starts end with the test.

A :class:`Page` records every network request the page makes
(``Network.requestWillBeSent``), Content-Security-Policy violations and other
console or log messages, and uncaught exceptions, so a test can assert what a
page loaded and that it broke nothing.
"""

from __future__ import annotations

import base64
import json
import os
import queue
import shutil
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.process.jobs import Job
from tests.patience import WAIT_S

# Flags that keep a headless browser from reaching anything on its own (updates,
# sync, field trials, QUIC) and from needing a GPU or a sandbox it cannot have as root.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
         "--remote-debugging-pipe")
DEFAULT_TIMEOUT_S = WAIT_S
_TRAMPOLINE = """import fcntl, os, sys
high = [fcntl.fcntl(int(fd), fcntl.F_DUPFD, 10) for fd in sys.argv[1:3]]
for target, fd in zip((3, 4), high):
    os.dup2(fd, target)
os.execv(sys.argv[3], sys.argv[3:])
"""


class BrowserError(RuntimeError):
    """The browser is missing, died, or answered a command with an error."""


def chromium_path() -> str:
    """The Chromium executable (``$PEERWIRE_CHROMIUM``, else ``chromium`` on PATH)."""
    found = os.environ.get("PEERWIRE_CHROMIUM") or shutil.which("chromium")
    if not found:
        raise BrowserError("chromium is not installed: `make setup` installs Debian's chromium package")
    return found


@dataclass
class Request:
    url: str
    type: str | None
    initiator: str | None


@dataclass
class Page:
    """One tab, attached in flat mode (commands and events carry its session id)."""

    browser: "Browser"
    session: str
    requests: list[Request] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    loaded: threading.Event = field(default_factory=threading.Event)

    def send(self, method: str, params: dict[str, Any] | None = None, *,
             timeout_s: float = DEFAULT_TIMEOUT_S) -> dict[str, Any]:
        return self.browser.send(method, params, session=self.session, timeout_s=timeout_s)

    def navigate(self, url: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        """Open ``url`` and wait for its load event."""
        self.loaded.clear()
        result = self.send("Page.navigate", {"url": url}, timeout_s=timeout_s)
        if result.get("errorText"):
            raise BrowserError(f"cannot open {url}: {result['errorText']}")
        if not self.loaded.wait(timeout_s):
            raise BrowserError(f"{url} did not finish loading within {timeout_s:.0f}s")

    def evaluate(self, expression: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> Any:
        """The value of a JavaScript expression (awaited when it is a promise)."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True}, timeout_s=timeout_s)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression!r} threw: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def wait_for(self, expression: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> Any:
        """Wait (bounded) until ``expression`` is truthy in the page; returns its value."""
        # The page signals readiness itself (a promise that settles); no polling loop here.
        return self.evaluate(
            f"new Promise((resolve, reject) => {{ const t0 = Date.now(); (function poll() {{"
            f" let v; try {{ v = ({expression}); }} catch (e) {{ v = undefined; }}"
            f" if (v) resolve(v); else if (Date.now() - t0 > {int(timeout_s * 1000)}) "
            f"reject(new Error('timed out waiting for ' + {json.dumps(expression)}));"
            f" else requestAnimationFrame(poll); }})(); }})",
            timeout_s=timeout_s + 5)

    def screenshot(self, path: Path, *, width: int = 1280, height: int = 2000) -> Path:
        """A PNG of the top ``height`` pixels of the page at ``width``."""
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                         "deviceScaleFactor": 1, "mobile": False})
        data = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": False})["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def on_event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Network.requestWillBeSent":
            request = params.get("request") or {}
            self.requests.append(Request(request.get("url", ""), params.get("type"),
                                         (params.get("initiator") or {}).get("type")))
        elif method == "Page.loadEventFired":
            self.loaded.set()
        elif method == "Log.entryAdded":
            entry = params.get("entry") or {}
            self.messages.append(f"{entry.get('source')}/{entry.get('level')}: {entry.get('text')}")
        elif method == "Runtime.consoleAPICalled":
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args") or [])
            self.messages.append(f"console/{params.get('type')}: {args}")
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails") or {}
            self.exceptions.append(str((details.get("exception") or {}).get("description") or details.get("text")))


class Browser:
    """A headless Chromium and its protocol pipe; use as a context manager."""

    def __init__(self, profile_dir: Path, *, executable: str | None = None):
        self.profile_dir = profile_dir
        self.executable = executable or chromium_path()
        self._job = Job("chromium", grace=2.0)
        self._next_id = 0
        self._lock = threading.Lock()
        self._waiting: dict[int, queue.Queue[dict[str, Any]]] = {}
        self._pages: dict[str, Page] = {}
        self._closed = threading.Event()
        self._to_browser: int | None = None
        self._reader: threading.Thread | None = None

    def __enter__(self) -> "Browser":
        self.profile_dir.mkdir(parents=True, exist_ok=True)
        commands_r, commands_w = os.pipe()
        events_r, events_w = os.pipe()
        # The protocol pipe must be fds 3 and 4 in the browser: a small trampoline moves them there
        # (by way of high numbers, so neither can overwrite the other) and execs it.
        argv = [sys.executable, "-c", _TRAMPOLINE, str(commands_r), str(events_w), self.executable, *FLAGS,
                f"--user-data-dir={self.profile_dir}", "about:blank"]
        self.log = self.profile_dir.parent / f"{self.profile_dir.name}.log"
        try:
            with self.log.open("wb") as log:
                self._job.spawn(argv, name="chromium", pass_fds=(commands_r, events_w), stdout=log, stderr=log)
        finally:
            os.close(commands_r)
            os.close(events_w)
        self._to_browser = commands_w
        self._reader = threading.Thread(target=self._read, args=(events_r,), name="cdp-reader", daemon=True)
        self._reader.start()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if not self._closed.is_set():
                self.send("Browser.close", timeout_s=WAIT_S)
        except BrowserError:
            pass
        finally:
            if self._to_browser is not None:
                os.close(self._to_browser)
                self._to_browser = None
            self._job.close()
            for process in self._job.processes:
                process.popen.wait(timeout=WAIT_S)  # collect the exit status the teardown may not have seen
            if self._reader is not None:
                self._reader.join(timeout=WAIT_S)

    def new_page(self) -> Page:
        """A new blank tab with network, page, log and runtime events enabled."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = self._pages[session] = Page(self, session)
        for domain in ("Page", "Network", "Log", "Runtime"):
            page.send(f"{domain}.enable")
        return page

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None,
             timeout_s: float = DEFAULT_TIMEOUT_S) -> dict[str, Any]:
        """Send one command and wait (bounded) for its answer; raises :class:`BrowserError` on an error."""
        if self._to_browser is None or self._closed.is_set():
            raise BrowserError(f"{method}: the browser is not running")
        with self._lock:
            self._next_id += 1
            ident = self._next_id
            answer: queue.Queue[dict[str, Any]] = queue.Queue(maxsize=1)
            self._waiting[ident] = answer
            message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
            if session:
                message["sessionId"] = session
            os.write(self._to_browser, json.dumps(message).encode("utf-8") + b"\0")
        try:
            reply = answer.get(timeout=timeout_s)
        except queue.Empty:
            raise BrowserError(f"{method}: no answer within {timeout_s:.0f}s") from None
        finally:
            self._waiting.pop(ident, None)
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error'].get('message')}")
        return reply.get("result") or {}

    def log_tail(self, chars: int = 2000) -> str:
        """The end of the browser's own output (what it said before it died, say)."""
        try:
            return self.log.read_text(encoding="utf-8", errors="replace")[-chars:]
        except OSError:
            return ""

    def _read(self, fd: int) -> None:
        buffer = b""
        with os.fdopen(fd, "rb", buffering=0) as stream:
            while True:
                chunk = stream.read(1 << 16)
                if not chunk:
                    break
                buffer += chunk
                *messages, buffer = buffer.split(b"\0")
                for raw in messages:
                    self._dispatch(json.loads(raw))
        self._closed.set()
        for waiting in list(self._waiting.values()):
            waiting.put({"error": {"message": f"the browser closed the protocol pipe; it said: {self.log_tail()}"}})

    def _dispatch(self, message: dict[str, Any]) -> None:
        if "id" in message:
            waiting = self._waiting.get(message["id"])
            if waiting is not None:
                waiting.put(message)
            return
        page = self._pages.get(message.get("sessionId", ""))
        if page is not None:
            page.on_event(message.get("method", ""), message.get("params") or {})

