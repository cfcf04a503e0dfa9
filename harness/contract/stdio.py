"""The suite's own raw JSON-RPC client for a server launched over stdio.

It does not use an MCP SDK: the suite must be able to send anything (malformed
lines, invalid requests, notifications, overlapping requests) and to see
everything the server writes. Every stdout line is kept in order, JSON-RPC or
not; responses resolve the pending request with the same id. Nothing here
sleeps: every wait is a bounded wait on a future. Every line sent is kept too,
so a failure can show the whole exchange, whatever the ids (:meth:`StdioServer.exchange`).

Some stdout that is not JSON-RPC is tolerated and kept (a requirement judges
it), but only so much (:data:`STRAY_LIMIT_LINES`, :data:`STRAY_LIMIT_BYTES`):
past that the server is not speaking JSON-RPC at all. It is stopped at once,
with its process group, and every wait on it fails with one line naming the
cause (:class:`NotJsonRpc`), instead of each request waiting out its bound while
the lines pile up. :func:`stdout_fault` probes a server command once, for a run
that wants to stop before it starts many. Every server is named to a reaper
(:mod:`harness.process.reaper`) while it runs, so it ends with its owner even
when the owner is killed outright.
"""

from __future__ import annotations

import itertools
import json
import os
import shlex
import signal
import subprocess
import tempfile
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from harness.process.jobs_posix import Reaper
from peerwire.jsonrpc import strict_loads

CLOSE_GRACE_S = 2.0
"""How long a server may take to exit after its stdin closes before it is signalled."""
ID_OPTIONAL_SINCE = "2025-11-25"
"""The first MCP revision whose schema lets an error response leave out its id (``JSONRPCErrorResponse { id?:
RequestId }``). JSON-RPC 2.0 § 5 asks for ``"id": null`` where the id could not be read; from this revision on
both forms are MCP messages, and the official SDKs each refuse one of them, so the suite accepts either."""


def id_may_be_omitted(revision: str | None) -> bool:
    """Whether an error response may leave out its id under ``revision`` (``None``: nothing negotiated yet)."""
    return revision is None or revision >= ID_OPTIONAL_SINCE

STRAY_LIMIT_LINES = 100
"""How many stdout lines that are not JSON-RPC a server may write before it is taken for one that speaks none."""
STRAY_LIMIT_BYTES = 64 * 1024
"""How many bytes of such lines, likewise."""
LINE_LIMIT_BYTES = 16 * 1024 * 1024
"""The longest stdout line read (far above any answer the suite provokes): one longer, a stream without newlines
included, is taken for a server that speaks no JSON-RPC, like too many stray lines."""


class ServerExited(RuntimeError):
    """The server's stdout closed while a request was still waiting for its response."""


class NotJsonRpc(ServerExited):
    """The server wrote more stdout that is not JSON-RPC than the client tolerates, and was stopped."""


def stray_cause(raw: bytes) -> str:
    """One line naming what a server wrote instead of JSON-RPC, from its first such line."""
    what = "non-JSON" if strict_json(raw) is None else "JSON that is not JSON-RPC"
    shown = raw[:60].decode("utf-8", "replace")
    return f"server wrote {what} to stdout: {shown!r}" + (" …" if len(raw) > 60 else "")


_reaper: Reaper | None = None
_reaper_lock = threading.Lock()


def _named_to_reaper(pgid: int, named: bool) -> None:
    """Name a server's process group to this process's reaper (started with the first), or forget it."""
    global _reaper
    with _reaper_lock:
        if _reaper is None or (_reaper.process is not None and _reaper.process.poll() is not None):
            if not named:
                return
            if _reaper is not None:
                _reaper.done()  # it is gone: only our end of its pipe is left to close
            _reaper = Reaper(CLOSE_GRACE_S)  # the first, or one that something ended (a job adopting orphans)
        if named:
            _reaper.name(pgid)
        else:
            _reaper.forget(pgid)


def dismiss_reaper() -> None:
    """This process's servers are all closed: let its reaper exit now, signalling nothing (a run's job, which ends
    whatever is left running, would otherwise find it still there)."""
    global _reaper
    with _reaper_lock:
        if _reaper is not None:
            _reaper.done()
            _reaper = None


class NoResponse(TimeoutError):
    """No response arrived within the bound."""


@dataclass(frozen=True)
class Line:
    """One line the server wrote to stdout. ``message`` is ``None`` if it is not JSON."""

    raw: bytes
    message: Any
    at: float

    @property
    def is_json_rpc(self) -> bool:
        """A JSON-RPC 2.0 message, or a batch answer: a non-empty array of responses (an error response
        without id included: :meth:`valid_under` says whether the negotiated revision allows it)."""
        m = self.message
        if isinstance(m, list):
            return bool(m) and all(_is_response(item) for item in m)
        if not isinstance(m, dict) or m.get("jsonrpc") != "2.0":
            return False
        if "method" in m:
            return isinstance(m["method"], str)
        return _is_response(m)

    @property
    def responses(self) -> list[dict]:
        """The responses this line carries: itself, or each element of a batch answer."""
        if not self.is_json_rpc:
            return []
        items = self.message if isinstance(self.message, list) else [self.message]
        return [m for m in items if "method" not in m]

    def valid_under(self, revision: str | None) -> bool:
        """A JSON-RPC 2.0 message whose every response carries an id, or leaves it out where ``revision``
        allows it (:func:`id_may_be_omitted`)."""
        if not self.is_json_rpc:
            return False
        return id_may_be_omitted(revision) or all("id" in r for r in self.responses)


def _is_response(m: Any) -> bool:
    """A result with an id, or an error with an id or (MCP 2025-11-25) none."""
    if not isinstance(m, dict) or m.get("jsonrpc") != "2.0" or "method" in m:
        return False
    if "result" in m:
        return "error" not in m and "id" in m
    return "error" in m


def response_id(response: dict) -> Any:
    """The id a response carries; an error that leaves it out answers the same lines as one with id null."""
    return response.get("id")


def _answerable_id(msg_id: Any) -> bool:
    """A request id a response can carry back: a string of Unicode text or an integer."""
    if isinstance(msg_id, bool) or not isinstance(msg_id, (int, str)):
        return False
    return not (isinstance(msg_id, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in msg_id))


def strict_json(raw: bytes) -> Any:
    """The JSON value of ``raw`` read strictly (UTF-8 only, no NaN or Infinity), else ``None``."""
    try:
        return strict_loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        return None


def id_key(msg_id: Any) -> str:
    """A key that keeps JSON ids of different types apart (``1`` is not ``"1"``)."""
    return json.dumps(msg_id, sort_keys=True)


class StdioServer:
    """A server command running as a subprocess, spoken to line by line.

    The process gets its own session (process group) so that :meth:`close` can
    stop a wrapper together with the server it wraps.
    """

    def __init__(self, argv: Sequence[str], env: dict[str, str], *, stderr: Path):
        self.argv = list(argv)
        self.stderr_path = stderr
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._pending: dict[str, Future] = {}
        self._watchers: list[tuple[Callable[[Line], bool], Future]] = []
        self._lines: list[Line] = []
        self._sent: list[tuple[float, bytes]] = []
        self._eof = threading.Event()
        self._stray_lines = 0
        self._stray_bytes = 0
        self._first_stray = b""
        self.fault: str | None = None
        """Set, to one line naming the cause, once the server was stopped for writing too much that is not
        JSON-RPC."""
        self.revision: str | None = None
        """The MCP revision the session negotiated (set by the endpoint that initialized it)."""
        self.started_at = time.monotonic()
        with open(stderr, "ab") as err:
            self.process = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env,
                start_new_session=True,
            )
        _named_to_reaper(self.process.pid, True)
        self._reader = threading.Thread(target=self._read, name=f"stdout of {self.argv[0]}", daemon=True)
        self._reader.start()

    # -- sending ------------------------------------------------------------------

    def send_line(self, raw: bytes) -> None:
        """Write one raw line (a newline is added when missing)."""
        if not raw.endswith(b"\n"):
            raw += b"\n"
        assert self.process.stdin is not None
        with self._lock:
            self._sent.append((time.monotonic(), raw.rstrip(b"\n")))
        try:
            self.process.stdin.write(raw)
            self.process.stdin.flush()
        except (BrokenPipeError, ValueError) as exc:
            raise self._gone(f"cannot write to the server: {exc}") from None

    def send(self, message: Any) -> None:
        self.send_line(json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))

    def request(self, method: str, params: Any = None, *, msg_id: Any = None) -> tuple[dict, Future]:
        """Send a request; returns it and a future of its (first) response."""
        if msg_id is None:
            msg_id = next(self._ids)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        future = self.expect_response(msg_id)
        self.send(message)
        return message, future

    def expect_response(self, msg_id: Any) -> Future:
        """A future of the next response with ``msg_id`` (register before sending)."""
        future: Future = Future()
        with self._lock:
            if self._eof.is_set():
                future.set_exception(self._gone("the server has exited"))
            else:
                self._pending[id_key(msg_id)] = future
        return future

    def expect_line(self, predicate: Callable[[Line], bool]) -> Future:
        """A future of the next stdout line (from now on) for which ``predicate`` holds."""
        future: Future = Future()
        with self._lock:
            if self._eof.is_set():
                future.set_exception(self._gone("the server has exited"))
            else:
                self._watchers.append((predicate, future))
        return future

    def _gone(self, what: str) -> ServerExited:
        if self.fault is not None:
            return NotJsonRpc(f"{self.fault}; the client stopped it")
        return ServerExited(f"{what}; {self.stderr_tail()}")

    def call(self, method: str, params: Any = None, *, timeout: float) -> dict:
        """Send a request and wait up to ``timeout`` seconds for its response."""
        seen = self.line_count
        request, future = self.request(method, params)
        try:
            return wait_response(future, timeout, what=method)
        except NoResponse:
            raise NoResponse(self.silence(request["id"], timeout, seen)) from None

    def silence(self, msg_id: Any, timeout: float, since: int) -> str:
        """Why a wait for ``msg_id`` failed, with every line that did come back meanwhile, whatever its id."""
        came = self.lines_since(since)
        if not came:
            meanwhile = "the server wrote nothing at all meanwhile" + (
                " (it is running: its transport may have dropped the line)" if self.alive() else "")
        else:
            shown = "; ".join(ln.raw[:200].decode("utf-8", "replace") for ln in came[-5:])
            meanwhile = f"meanwhile the server wrote {len(came)} other line(s), the last: {shown}"
        alive = "" if self.alive() else f"; the server has ended: {self.exit_description(0)}"
        return f"no response with id {json.dumps(msg_id)} within {timeout:g}s; {meanwhile}{alive}"

    def exchange(self, since: float | None = None, limit: int = 60) -> list[dict[str, Any]]:
        """Every line sent and received (from ``since``, a monotonic time), in time order:
        ``{"dir": "sent"|"received", "at_ms": ms since the server started, "line": text}``."""
        with self._lock:
            sent = [(at, "sent", raw) for at, raw in self._sent]
            received = [(ln.at, "received", ln.raw) for ln in self._lines]
        entries = sorted((e for e in sent + received if since is None or e[0] >= since), key=lambda e: e[0])
        return [{"dir": d, "at_ms": round((at - self.started_at) * 1000),
                 "line": raw[:1000].decode("utf-8", "replace") + (" …" if len(raw) > 1000 else "")}
                for at, d, raw in entries[-limit:]]

    def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    # -- observing ------------------------------------------------------------------

    @property
    def lines(self) -> list[Line]:
        with self._lock:
            return list(self._lines)

    def lines_since(self, start: int) -> list[Line]:
        """The lines from index ``start`` on (cheaper than :attr:`lines` on a long session)."""
        with self._lock:
            return self._lines[start:]

    @property
    def line_count(self) -> int:
        with self._lock:
            return len(self._lines)

    def responses_to(self, msg_id: Any) -> list[dict]:
        """Every response seen so far that carries ``msg_id``."""
        key = id_key(msg_id)
        return [r for ln in self.lines for r in ln.responses if id_key(response_id(r)) == key]

    def stray_lines(self) -> list[Line]:
        """Stdout lines that are not JSON-RPC 2.0 messages of the negotiated revision."""
        return [ln for ln in self.lines if not ln.valid_under(self.revision)]

    def alive(self) -> bool:
        return self.process.poll() is None

    @property
    def sent_count(self) -> int:
        """How many lines have been sent so far."""
        with self._lock:
            return len(self._sent)

    def unanswered(self, sent_from: int = 0, lines_from: int = 0) -> list[Any]:
        """The ids of the requests sent from line ``sent_from`` on (a request a server can answer by its id:
        JSON-RPC 2.0, a string method, a string or integer id that is Unicode text) that no response from line
        ``lines_from`` on carries."""
        with self._lock:
            sent = [raw for _, raw in self._sent[sent_from:]]
            answered = {id_key(response_id(r)) for ln in self._lines[lines_from:] for r in ln.responses}
        ids = []
        for raw in sent:
            message = strict_json(raw)
            for m in message if isinstance(message, list) else [message]:
                if isinstance(m, dict) and m.get("jsonrpc") == "2.0" and isinstance(m.get("method"), str) \
                        and _answerable_id(m.get("id")) and id_key(m["id"]) not in answered:
                    ids.append(m["id"])
        return ids

    def forget_expectations(self) -> None:
        """Drop every response and line still expected: nobody waits for them any more."""
        with self._lock:
            pending, self._pending = self._pending, {}
            watchers, self._watchers = self._watchers, []
        for future in [*pending.values(), *(f for _, f in watchers)]:
            future.cancel()

    def exited_within(self, seconds: float) -> bool:
        """Whether the process is gone, waiting up to ``seconds`` for it (a killed process takes a moment)."""
        try:
            self.process.wait(seconds)
        except subprocess.TimeoutExpired:
            return False
        return True

    def exit_description(self, wait: float = 0.5) -> str:
        """How the process ended, waiting up to ``wait`` seconds for it: its exit status or the signal that killed
        it (what a crashed server's failure must say)."""
        try:
            code = self.process.wait(wait)
        except subprocess.TimeoutExpired:
            return "it is still running"
        if code < 0:
            try:
                return f"it was killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"it was killed by signal {-code}"
        return f"it exited with status {code}"

    def stderr_tail(self, limit: int = 1500) -> str:
        try:
            text = self.stderr_path.read_text("utf-8", errors="replace")
        except OSError:
            return "no stderr"
        return "stderr: " + (text[-limit:].strip() or "(empty)")

    # -- lifecycle ------------------------------------------------------------------

    def close(self, grace: float = CLOSE_GRACE_S) -> int:
        """Close stdin, give the server ``grace`` seconds, then stop its process group."""
        if self.process.stdin and not self.process.stdin.closed:
            try:
                self.process.stdin.close()
            except BrokenPipeError:
                pass
        try:
            self.process.wait(grace)
        except subprocess.TimeoutExpired:
            for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, None)):
                try:
                    os.killpg(self.process.pid, sig)
                except ProcessLookupError:
                    break  # the group is gone already
                try:
                    self.process.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        else:
            # The server exited; anything it started in its group goes with it.
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self._reader.join(grace)
        if self.process.stdout:
            self.process.stdout.close()
        _named_to_reaper(self.process.pid, False)
        return self.process.returncode

    def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        for raw in iter(lambda: stdout.readline(LINE_LIMIT_BYTES), b""):
            if len(raw) >= LINE_LIMIT_BYTES and not raw.endswith(b"\n"):
                self._stop(raw)
                break
            line = raw.rstrip(b"\r\n")
            message = strict_json(line)
            entry = Line(raw=line, message=message, at=time.monotonic())
            if not entry.is_json_rpc and self._too_much_stray(entry):
                break
            with self._lock:
                self._lines.append(entry)
                settled = [(self._pending.pop(id_key(response_id(r)), None), r) for r in entry.responses]
                # A watcher nobody waits for any more (cancelled, or settled) is dropped, not asked again.
                live = [(w, f) for w, f in self._watchers if not f.done()]
                matched = [(w, f) for w, f in live if w(entry)]
                self._watchers = [(w, f) for w, f in live if (w, f) not in matched]
            for _, future in matched:
                if not future.done():
                    future.set_result(entry)
            for future, response in settled:
                if future is not None and not future.done():
                    future.set_result(response)
        with self._lock:
            self._eof.set()
            pending, self._pending = self._pending, {}
            watchers, self._watchers = self._watchers, []
        for future in [*pending.values(), *(f for _, f in watchers)]:
            if not future.done():
                future.set_exception(self._gone(f"the server closed stdout ({self.exit_description()})"))

    def _too_much_stray(self, entry: Line) -> bool:
        """Count a line that is not JSON-RPC; past the tolerance, stop the server (its group) and say why."""
        if self._stray_lines == 0:
            self._first_stray = entry.raw
        self._stray_lines += 1
        self._stray_bytes += len(entry.raw) + 1
        if self._stray_lines <= STRAY_LIMIT_LINES and self._stray_bytes <= STRAY_LIMIT_BYTES:
            return False
        self._stop(self._first_stray)
        return True

    def _stop(self, first_stray: bytes) -> None:
        self.fault = stray_cause(first_stray)
        try:
            os.killpg(self.process.pid, signal.SIGKILL)  # it floods: nothing it says from here on is read
        except (ProcessLookupError, PermissionError):
            pass


def stdout_fault(argv: Sequence[str], env: dict[str, str], *, timeout: float, stderr: Path) -> str | None:
    """Start ``argv`` once, ask it ``initialize``, and name in one line why its stdout is no JSON-RPC; ``None``
    when it answers (stray lines within the tolerance are the suite's to judge) or writes nothing at all in
    ``timeout`` seconds (a server that is slow or silent is not this probe's to judge).

    The server and its process group are stopped before this returns, whatever happened.
    """
    server = StdioServer(argv, env, stderr=stderr)
    try:
        _, answer = server.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                                  "clientInfo": {"name": "peerwire-contract-probe", "version": "0"}})
        try:
            answer.result(timeout)
            return None
        except NotJsonRpc:
            return server.fault
        except (ServerExited, TimeoutError) as exc:
            strays = server.stray_lines()
            if not strays or len(strays) < server.line_count:  # silent, or some of it was JSON-RPC
                return None
            then = "exited" if isinstance(exc, ServerExited) else f"wrote no answer to initialize in {timeout:g}s"
            return f"{stray_cause(strays[0].raw)}, then {then}"
    finally:
        server.close()


def command_stdout_fault(command: str, *, timeout: float) -> str | None:
    """:func:`stdout_fault` for a ``--server-cmd`` as given (split as a shell would, run with our environment);
    ``None`` too for a command that cannot start (the run's own start-up checks name that)."""
    argv = shlex.split(command)
    if not argv:
        return None
    with tempfile.TemporaryDirectory(prefix="peerwire-probe-") as scratch:
        try:
            return stdout_fault(argv, dict(os.environ), timeout=timeout, stderr=Path(scratch) / "stderr")
        except OSError:
            return None


def wait_response(future: Future, timeout: float, *, what: str) -> dict:
    """The response in ``future``; :class:`NoResponse` after ``timeout`` seconds."""
    try:
        return future.result(timeout)
    except TimeoutError:
        raise NoResponse(f"no response to {what} within {timeout:g}s") from None
