"""The app's side of the control socket: connections, callers, cancellation, bounds.

Each connection is read line by line; every request runs as its own task, so
answers go out in any order, each with its request's id (see
:mod:`peerwire.control` for the messages). A connection's caller is the first
session token it presents, checked once and remembered until an operator
revokes sessions.

A caller can leave: ``cancel`` names one of its calls, and a closed
connection means all of them. Each call carries a
:class:`~peerwire.hub.Presence`; leaving ends the call's waits at once and it
claims nothing (it is answered ``cancelled``), while what it already admitted
stays admitted. The connection's file descriptor is released when the peer
closes, not when its calls' timeouts run out.

Bounds: at most :data:`~peerwire.limits.MAX_CONTROL_CONNECTIONS` connections
(fewer when the process's file limit is lower: the limit less a reserve that
scales with it, :func:`fd_reserve`), and at most
:data:`~peerwire.limits.MAX_CONNECTIONS_PER_CALLER` of them for one caller
(counted when a connection first names its caller); one more is answered
``too_many_connections`` (retriable, naming the limit) and closed. Failures that repeat (a full file table
on accept) are logged once with a count, not once each.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import resource
import sqlite3
import time
from collections import Counter
from typing import Any

from .control import encode
from .errors import Code, PeerwireError
from .framing import Lines, Oversize, out_of_range_at
from .hub import CallerGone, Presence, presence
from .jsonrpc import strict_loads
from .limits import (CONTROL_FD_RESERVE, CONTROL_FD_RESERVE_MIN, CONTROL_FD_RESERVE_SHARE,
                     MAX_CONNECTIONS_PER_CALLER, MAX_CONTROL_CONNECTIONS)
from .operations import Operations
from .registry_rules import AgentRow
from .store import storage_error

log = logging.getLogger("peerwire.app")

READ_CHUNK = 65536

REFUSAL_LINGER_S = 1.0
"""How long a connection refused for the app's bound stays open to take its caller's request unread."""

REPEAT_REPORT_S = 60.0
"""How often a failure that keeps repeating is summarised in the log."""


def fd_reserve(soft: int) -> int:
    """File descriptors kept from connections under a file limit of ``soft``: a share of it, bounded."""
    return min(CONTROL_FD_RESERVE, max(CONTROL_FD_RESERVE_MIN, soft // CONTROL_FD_RESERVE_SHARE))


def connection_limit(configured: int = MAX_CONTROL_CONNECTIONS, soft: int | None = None) -> int:
    """``configured``, lowered so that connections can never exhaust the process's file descriptors
    (``soft``, by default the process's soft ``RLIMIT_NOFILE``)."""
    if soft is None:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return configured
    return max(1, min(configured, soft - fd_reserve(soft)))


class RepeatedFailures:
    """An event-loop exception handler that logs each kind of failure once, then counts repeats.

    A kind is the handler message plus the exception type and errno. The count
    of repeats is logged when the kind recurs after :data:`REPEAT_REPORT_S`
    seconds, and when :meth:`flush` is called (at shutdown).
    """

    def __init__(self, logger: logging.Logger = log, every_s: float = REPEAT_REPORT_S):
        self.logger = logger
        self.every_s = every_s
        self._seen: dict[tuple, list[float | int]] = {}  # kind -> [first logged at, repeats since]

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        kind = (context.get("message"), type(exc).__name__, getattr(exc, "errno", None))
        now = time.monotonic()
        entry = self._seen.get(kind)
        if entry is None:
            self._seen[kind] = [now, 0]
            self.logger.error("%s: %r (repeats of this are counted, not logged each)", kind[0], exc,
                              exc_info=exc if isinstance(exc, BaseException) else None)
            return
        entry[1] += 1
        if now - entry[0] >= self.every_s:
            self.logger.error("%s: %r repeated %d times in %.0fs", kind[0], exc, entry[1], now - entry[0])
            entry[0], entry[1] = now, 0

    def flush(self) -> None:
        for kind, (since, count) in self._seen.items():
            if count:
                self.logger.error("%s repeated %d times in %.0fs", kind[0], count, time.monotonic() - since)
        self._seen.clear()


class ControlServer:
    """Serves the control socket for one app's :class:`~peerwire.operations.Operations`."""

    def __init__(self, ops: Operations, max_connections: int | None = None,
                 per_caller: int = MAX_CONNECTIONS_PER_CALLER):
        self.ops = ops
        self.max_connections = connection_limit() if max_connections is None else max_connections
        self.per_caller = per_caller
        self.connections: set[ControlConnection] = set()
        self.callers: Counter[str] = Counter()
        """Open connections per caller token (only those that have named their caller)."""
        self.refused = 0

    async def accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self.connections) >= self.max_connections:
            self.refused += 1
            error = PeerwireError(Code.TOO_MANY_CONNECTIONS,
                                  f"the app already serves {len(self.connections)} control connections "
                                  f"(its limit is {self.max_connections}, set by its file limit); retry when some "
                                  "have closed",
                                  {"limit": self.max_connections, "retriable": True})
            await _write(writer, {"id": None, "ok": False, "error": error.to_dict()})
            await _linger(reader, writer)
            return
        connection = ControlConnection(self, reader, writer)
        self.connections.add(connection)
        try:
            await connection.serve()
        finally:
            self.connections.discard(connection)
            if connection.token is not None:
                self.callers[connection.token] -= 1
                if self.callers[connection.token] <= 0:
                    del self.callers[connection.token]

    def admit_caller(self, token: str) -> PeerwireError | None:
        """Count one more connection for ``token``; the refusal when the caller already holds its maximum."""
        if self.callers[token] >= self.per_caller:
            self.refused += 1
            return PeerwireError(Code.TOO_MANY_CONNECTIONS,
                                 f"this caller already holds {self.callers[token]} control connections "
                                 f"(the limit per caller is {self.per_caller}); close some or reuse one",
                                 {"limit": self.per_caller, "per": "caller", "retriable": True})
        self.callers[token] += 1
        return None

    def close_all(self) -> None:
        """The app is stopping: end every call's waits and close every connection."""
        for connection in list(self.connections):
            connection.leave("app stopping")
            connection.writer.close()


class ControlConnection:
    """One control connection: its caller, its calls in flight, their presences."""

    def __init__(self, server: ControlServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.server = server
        self.ops = server.ops
        self.reader = reader
        self.writer = writer
        self.token: str | None = None
        self._holder: AgentRow | None = None
        self._holder_epoch = -1
        self.calls: dict[Any, Presence] = {}
        self.refusal: dict | None = None
        """The answer that ends this connection before it serves its caller (over the per-caller bound)."""

    async def serve(self) -> None:
        lines = Lines()
        try:
            while chunk := await self.reader.read(READ_CHUNK):
                for line in lines.feed(chunk):
                    if isinstance(line, Oversize):  # that request fails; the connection goes on
                        self._spawn(line.member("id"), line.error())
                        continue
                    self._received(line)
                    if self.refusal is not None:  # answered, then closed: it takes no more requests
                        await self._send(self.refusal)
                        return
            rest = lines.rest()  # a last request without its newline is still a request
            if isinstance(rest, bytes):
                self._received(rest)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self.leave("disconnected")
            self.writer.close()  # the descriptor goes now; calls still running answer no one

    def leave(self, reason: str) -> None:
        for call in list(self.calls.values()):
            call.leave(reason)

    def _received(self, line: bytes) -> None:
        try:
            request = strict_loads(line)
        except (ValueError, RecursionError) as exc:
            self._spawn(None, PeerwireError(Code.INVALID_ARGUMENT, f"control line is not JSON: {exc}"))
            return
        if not isinstance(request, dict) or not isinstance(request.get("op"), str):
            self._spawn(None, PeerwireError(Code.INVALID_ARGUMENT, "a control request is an object with an op"))
            return
        if request["op"] == "cancel":
            call = self.calls.get(_key(request.get("target")))
            if call is not None:
                call.leave("cancelled")
            return
        token = request.get("token")
        if self.token is None and isinstance(token, str):
            refused = self.server.admit_caller(token)
            if refused is not None:
                self.refusal = {"id": request.get("id"), "ok": False, "error": refused.to_dict()}
                return
            self.token = token  # the connection's caller, from its first request that names one
        if (where := out_of_range_at(request, "request")) is not None:  # 1e400: valid JSON, read as infinity
            self._spawn(request.get("id"), PeerwireError(
                Code.INVALID_ARGUMENT, f"{where} is a number out of range: it overflows a 64-bit float"))
            return
        self._spawn(request.get("id"), request)

    def _spawn(self, request_id: Any, request: dict | PeerwireError) -> None:
        here = Presence()
        key = _key(request_id)
        if request_id is not None and key in self.calls:
            # Answers and cancels name a call by id alone: a second call under a live id would take the
            # first one's cancel. It is refused and runs nothing; the id is free once its call is answered.
            request = in_flight(request_id)
        elif request_id is not None:
            self.calls[key] = here
        context = contextvars.copy_context()
        context.run(presence.set, here)
        task = asyncio.get_running_loop().create_task(self._answer(request_id, request), context=context)
        task.add_done_callback(lambda _: self.calls.pop(key, None) if self.calls.get(key) is here else None)

    async def _answer(self, request_id: Any, request: dict | PeerwireError) -> None:
        try:
            if isinstance(request, PeerwireError):
                raise request
            response = {"id": request_id, "ok": True, "result": await self._run(request)}
        except PeerwireError as exc:
            response = {"id": request_id, "ok": False, "error": exc.to_dict()}
        except CallerGone:
            response = {"id": request_id, "cancelled": True}
        except sqlite3.Error as exc:  # outside a transaction: a read of a disk that failed
            error = storage_error(exc, self.ops.store.database.path)
            if error is None:
                log.exception("operation failed")
                error = PeerwireError(Code.INTERNAL, f"internal error: {type(exc).__name__}: {exc}")
            response = {"id": request_id, "ok": False, "error": error.to_dict()}
        except RecursionError:
            response = {"id": request_id, "ok": False, "error": PeerwireError(
                Code.INVALID_ARGUMENT, "arguments are nested too deeply").to_dict()}
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug must not take the app down with it
            log.exception("operation failed")
            response = {"id": request_id, "ok": False, "error": PeerwireError(
                Code.INTERNAL, f"internal error: {type(exc).__name__}: {exc}").to_dict()}
        await self._send(response)

    async def _run(self, request: dict) -> dict:
        op, token = request["op"], request.get("token")
        if op != "tool":
            return await self.ops.call(op, request.get("args"), token if token is not None else self.token,
                                       request.get("meta"), operator=request.get("operator"))
        caller = ((lambda: self.ops.store.registry.caller(token)) if token is not None and token != self.token
                  else self._caller)
        return await self.ops.call_tool(request.get("profile", "messaging"), request.get("tool"),
                                        request.get("args"), request.get("meta"), caller=caller)

    def _caller(self) -> AgentRow:
        """The connection's caller, checked once (and again after an operator revokes sessions)."""
        if self._holder is None or self._holder_epoch != self.ops.sessions_epoch:
            epoch = self.ops.sessions_epoch
            self._holder = self.ops.store.registry.caller(self.token)
            self._holder_epoch = epoch
        return self._holder

    async def _send(self, message: dict) -> None:
        if self.writer.is_closing():
            return  # the caller left; what it asked for stays done
        await _write(self.writer, message)


async def _linger(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Close a refused connection without losing the refusal: end our side, then take what the caller sends until
    it closes (or :data:`REFUSAL_LINGER_S`). Closed at once, a caller that wrote its request just then would
    get a broken pipe and never read why it was refused."""
    try:
        if writer.can_write_eof():
            writer.write_eof()
        async with asyncio.timeout(REFUSAL_LINGER_S):
            while await reader.read(READ_CHUNK):
                pass
    except (ConnectionError, TimeoutError):
        pass
    finally:
        writer.close()


async def _write(writer: asyncio.StreamWriter, message: dict) -> None:
    try:
        writer.write(encode(message))
        await writer.drain()
    except ConnectionError:
        pass  # the caller gave up; what it asked for stays done


def _key(request_id: Any) -> str:
    return json.dumps(request_id)  # 7 and "7" are two ids


def in_flight(request_id: Any) -> PeerwireError:
    """The refusal of a request whose id names a call still in flight on the connection."""
    return PeerwireError(Code.INVALID_ARGUMENT,
                         f"request id {_key(request_id)[:60]} is already in flight on this connection; use another id, "
                         "or this one again after its answer", {"id": request_id, "in_flight": True})
