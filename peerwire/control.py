"""The control socket protocol: one JSON object a line, in both directions.

Request:  ``{"id": 1, "op": "tool", "profile": "messaging", "tool": "send_message", "args": {...}, "meta": {...}}``
          (operator ops: ``{"id": 2, "op": "status", "args": {...}}``)
Response: ``{"id": 1, "ok": true, "result": {...}}``,
          ``{"id": 1, "ok": false, "error": {"code": "...", "message": "...", "details": {...}}}``, or
          ``{"id": 1, "cancelled": true}`` (the caller left first; the operation claimed nothing)
Cancel:   ``{"op": "cancel", "target": 1}`` (no response)

A request may carry ``"token"``, the caller's session credential. The first
token a connection presents is its caller for the rest of the connection; the
app checks it once, not per call. An operator operation carries
``"operator"``, the operator credential, instead; a session token never
stands in for it. Answers come in any order: each carries its
request's id.

:class:`ControlChannel` is the MCP server's: one persistent connection per
session, many calls in flight on it, reconnecting after the app restarts (a
call whose connection breaks fails with ``app_unavailable``; the next call
connects again). A call cancelled by its caller sends ``cancel``: its waits end
and it claims nothing, but what it already admitted stays admitted.
:class:`ControlClient` is the CLI's: one connection per call.
"""

from __future__ import annotations

import asyncio
import errno
import itertools
import json
import socket
import time
from typing import Any, Callable

from .errors import Code, PeerwireError
from .home import Home
from .framing import too_large
from .limits import (ANSWER_GRACE_S, DEFAULT_RECEIVE_TIMEOUT_MS, DEFAULT_WAIT_TIMEOUT_MS, MAX_ANSWER_LINE_BYTES,
                     MAX_LINE_BYTES, MAX_WAIT_MS, MIN_ANSWER_BOUND_S)

_ids = itertools.count(1)


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8") + b"\n"


def request_line(message: dict[str, Any]) -> bytes:
    """``message`` as a control line, refused with ``message_too_large`` when the app would not read it."""
    line = encode(message)
    if len(line) - 1 > MAX_LINE_BYTES:
        raise too_large(len(line) - 1)
    return line


def _unavailable(home: Home, why: str) -> PeerwireError:
    return PeerwireError(
        Code.APP_UNAVAILABLE,
        f"{why}: start it with `peerwire app --home {home.path}`",
        {"home": str(home.path)},
    )


def _connect_failure(home: Home, exc: OSError) -> PeerwireError:
    if exc.errno in (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTDIR):
        return _unavailable(home, "no app is running for this home")
    if exc.errno == errno.EACCES:
        return PeerwireError(Code.NOT_AUTHORIZED, f"no permission to reach the app's socket in {home.path}")
    return _unavailable(home, f"cannot reach the app ({exc.strerror or exc})")


def _require_home(home: Home) -> None:
    if not home.require_reachable():
        raise PeerwireError(
            Code.APP_UNAVAILABLE,
            f"home {home.path} does not exist; start `peerwire app --home {home.path}`",
            {"home": str(home.path)},
        )


def _messaging_wait(default_ms: int) -> Callable[[Any], float]:
    def wait_ms(value: Any) -> float:
        if value is None:
            return default_ms
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value == value:
            return 0  # refused at once
        return max(0, min(value, MAX_WAIT_MS))
    return wait_ms


def _collab_wait(value: Any) -> float:
    from . import collab  # the collaboration profile's alone: a messaging session never imports it

    try:
        return collab.wait_timeout_ms(value)  # the collaboration profile's own rule (a floor, a default)
    except PeerwireError:
        return 0  # refused at once


WAITING_TOOLS: dict[tuple[str, str], Callable[[Any], float]] = {
    ("messaging", "wait_agent"): _messaging_wait(DEFAULT_WAIT_TIMEOUT_MS),
    ("messaging", "receive_messages"): _messaging_wait(DEFAULT_RECEIVE_TIMEOUT_MS),
    ("collab", "wait_agent"): _collab_wait,
}
"""The tools that may wait, by profile: how long a call waits, in ms, given its ``timeout_ms``."""


EXPIRY_TICK_S = 0.25
"""How often a control channel looks for calls past their answer bound (how late it may declare one)."""


def answer_bound_s(tool: str, args: Any, profile: str = "messaging") -> float:
    """How long a caller waits for the app's answer to ``tool``: its own wait plus :data:`ANSWER_GRACE_S`, and
    never less than :data:`MIN_ANSWER_BOUND_S`.

    The wait is what the app will wait for the call's ``timeout_ms`` (its
    default, held to the longest the app accepts, the collaboration profile's
    floor); a value the app refuses at once waits for nothing. Tools that
    never wait get the grace alone.
    """
    wait = WAITING_TOOLS.get((profile, tool))
    wait_s = 0.0 if wait is None else wait(args.get("timeout_ms") if isinstance(args, dict) else None) / 1000
    return answer_bound(wait_s)


def answer_bound(wait_s: float) -> float:
    """How long a caller gives the app to answer a call that itself waits ``wait_s``."""
    return max(wait_s + ANSWER_GRACE_S, MIN_ANSWER_BOUND_S)


def not_responding(home: Home, what: str, waited_s: float) -> PeerwireError:
    """The app is alive (its socket took the call) but did not answer in time: retriable, unlike unavailable."""
    return PeerwireError(
        Code.APP_NOT_RESPONDING,
        f"the app for {home.path} did not answer {what} within {waited_s:.0f}s: it is running but not responding "
        "(stopped, or overloaded); retry the call with the same call id: anything it admitted stays admitted "
        "and the retry returns its receipt",
        {"home": str(home.path), "retriable": True, "waited_s": round(waited_s, 1)})


class CallCancelled(Exception):
    """The app stopped the call because its caller cancelled it or left; it claimed nothing."""


def _outcome(response: dict[str, Any]) -> dict[str, Any]:
    if response.get("ok"):
        return response["result"]
    if response.get("cancelled"):
        raise CallCancelled()
    raise PeerwireError.from_dict(response.get("error") or {})


class ControlChannel:
    """One persistent, multiplexed control connection (an MCP server session's) to the app for ``home``."""

    def __init__(self, home: Home, token: str | None):
        self.home = home
        self.token = token
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task | None = None
        self._connecting: asyncio.Lock | None = None
        self._fresh = False
        self._deadlines: dict[int, tuple[float, str, float]] = {}
        """Calls in flight: request id -> (when the app must have answered, what, the bound)."""
        self._expiry: asyncio.Task | None = None

    async def call_tool(self, profile: str, tool: str, args: Any, meta: dict[str, Any]) -> dict[str, Any]:
        """One tool call, validated and run by the app; raises :class:`PeerwireError` on a tool error.

        Cancelling the awaiting task cancels the call in the app (its waits end, it claims nothing).
        """
        return await self.request({"op": "tool", "profile": profile, "tool": tool, "args": args, "meta": meta},
                                  bound_s=answer_bound_s(tool, args, profile), what=tool)

    async def request(self, message: dict[str, Any], *, bound_s: float = MIN_ANSWER_BOUND_S,
                      what: str = "the call") -> dict[str, Any]:
        """Send one request and return its result; an app that does not answer within ``bound_s`` fails it
        with ``app_not_responding``, and the call is cancelled in the app as a caller's cancel would (what it
        admitted stays admitted). Connecting to the app's socket never waits: the kernel takes or refuses it.
        """
        writer = await self._connected()
        request_id = next(self._ids)
        message = {"id": request_id, **message}
        if self._fresh and self.token:
            message["token"] = self.token
        line = request_line(message)
        self._fresh = False
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()
        self._pending[request_id] = future
        # One timer for the channel (see _expire), not one per call: a timer per call (asyncio.timeout) cost
        # mcp serve about a quarter more CPU per call, this one about a tenth.
        self._deadlines[request_id] = (loop.time() + bound_s, what, bound_s)
        if self._expiry is None or self._expiry.done():
            self._expiry = asyncio.ensure_future(self._expire())
        try:
            writer.write(line)
            return _outcome(await future)
        except asyncio.CancelledError:
            if self._pending.pop(request_id, None) is not None and not writer.is_closing():
                writer.write(encode({"op": "cancel", "target": request_id}))
            raise
        finally:
            self._pending.pop(request_id, None)
            self._deadlines.pop(request_id, None)

    async def _expire(self) -> None:
        """While calls are in flight, fail those the app has not answered by their deadline (checked every
        :data:`EXPIRY_TICK_S`), cancelling them in the app."""
        loop = asyncio.get_running_loop()
        while self._deadlines:
            await asyncio.sleep(EXPIRY_TICK_S)
            now = loop.time()
            for request_id, (deadline, what, bound_s) in list(self._deadlines.items()):
                if now < deadline:
                    continue
                del self._deadlines[request_id]
                future = self._pending.pop(request_id, None)
                if future is not None and not future.done():
                    future.set_exception(not_responding(self.home, what, bound_s))
                    if self._writer is not None and not self._writer.is_closing():
                        self._writer.write(encode({"op": "cancel", "target": request_id}))

    async def warm(self) -> None:
        """Connect ahead of the first call; failing here is silent (the first call reports it)."""
        try:
            await self._connected()
        except PeerwireError:
            pass

    async def _connected(self) -> asyncio.StreamWriter:
        if self._writer is not None and not self._writer.is_closing():
            return self._writer
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._writer is not None and not self._writer.is_closing():
                return self._writer
            _require_home(self.home)
            try:
                with self.home.socket_address() as address:
                    reader, writer = await asyncio.open_unix_connection(address, limit=MAX_ANSWER_LINE_BYTES)
            except OSError as exc:
                raise _connect_failure(self.home, exc) from None
            self._writer = writer
            self._fresh = True
            self._reader_task = asyncio.create_task(self._read(reader, writer))
            return writer

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        why = "the app closed the connection; it may be stopping or restarting"
        refusal: PeerwireError | None = None
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                response = json.loads(line)
                if response.get("id") is None and isinstance(response.get("error"), dict):
                    # The app refused the connection itself (too_many_connections) before reading a request:
                    # every call on it fails with that refusal, not with a bare "closed".
                    refusal = PeerwireError.from_dict(response["error"])
                    continue
                request_id = response.get("id")
                # Only the int ids this channel issued match (true is not 1); any other answer is for a call its
                # caller cancelled or gave up on, or for none of ours, and settles nothing.
                future = self._pending.pop(request_id, None) if type(request_id) is int else None
                if future is not None and not future.done():
                    future.set_result(response)
        except (OSError, ValueError) as exc:
            why = f"the connection to the app broke ({exc})"
        finally:
            writer.close()
            if self._writer is writer:
                self._writer = None
            failed, self._pending = self._pending, {}
            for future in failed.values():
                if not future.done():
                    future.set_exception(_refused_copy(refusal) if refusal is not None
                                         else _unavailable(self.home, why))

    def release_all(self) -> None:
        """The caller is gone: cancel every call in flight in the app, but still take their answers."""
        if self._writer is None or self._writer.is_closing():
            return
        for request_id in list(self._pending):
            self._writer.write(encode({"op": "cancel", "target": request_id}))

    async def close(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
        if self._writer is not None:
            self._writer.close()
        if self._reader_task is not None:
            await asyncio.gather(self._reader_task, return_exceptions=True)


def _refused_copy(refusal: PeerwireError) -> PeerwireError:
    """One exception per failed call (each caller raises its own)."""
    return PeerwireError(refusal.code, refusal.message, dict(refusal.details))


_FROM_HOME = object()


class ControlClient:
    """Calls the app that owns ``home`` as the caller holding ``token``, one connection per call.

    A client with no session ``token`` is the operator's: it presents the
    operator credential, read from the home's ``operator.token`` (or the
    ``operator`` given), which operator operations need. A client with a
    session token is an agent's and presents none.
    """

    def __init__(self, home: Home, token: str | None = None, *, operator: Any = _FROM_HOME):
        self.home = home
        self.token = token
        self._operator = operator if operator is not _FROM_HOME or token is None else None

    @property
    def operator(self) -> str | None:
        if self._operator is _FROM_HOME:
            try:
                return self.home.operator_credential()
            except PeerwireError:
                return None  # the call then says what the home is missing
        return self._operator

    def call(self, op: str, args: dict[str, Any] | None = None, *, meta: dict[str, Any] | None = None,
             wait_s: float = 0.0) -> dict[str, Any]:
        """Run one operation. ``wait_s`` is how long the operation itself may wait."""
        request = {"id": next(_ids), "op": op, "args": args or {}, "meta": meta or {}}
        if self.token:
            request["token"] = self.token
        elif (operator := self.operator) is not None:
            request["operator"] = operator
        bound_s = answer_bound(wait_s)
        line = request_line(request)
        with self._connect() as sock:
            sock.settimeout(bound_s)
            try:
                sock.sendall(line)
                line = _read_line(sock, time.monotonic() + bound_s)
            except socket.timeout:
                raise not_responding(self.home, op, bound_s) from None
            except OSError as exc:
                raise _unavailable(self.home, f"the connection to the app broke during {op} ({exc.strerror})") from None
        if not line:
            raise _unavailable(self.home, f"the app closed the connection during {op}; it may be stopping")
        return _outcome(json.loads(line))

    def _connect(self) -> socket.socket:
        _require_home(self.home)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with self.home.socket_address() as address:
                sock.connect(address)
        except OSError as exc:
            sock.close()
            raise _connect_failure(self.home, exc) from None
        return sock


def _read_line(sock: socket.socket, deadline: float) -> bytes:
    """One answer line, by ``deadline`` (``socket.timeout`` otherwise, however the answer trickles in)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout()
        sock.settimeout(remaining)
        chunk = sock.recv(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if b"\n" in chunk:
            data = b"".join(chunks)
            return data[: data.index(b"\n")]
        if size > MAX_ANSWER_LINE_BYTES:
            raise PeerwireError(Code.INTERNAL, "the app sent an oversized response")
