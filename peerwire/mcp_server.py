"""``peerwire mcp serve``: the MCP server a Codex agent launches.

It only frames. Newline-delimited JSON-RPC 2.0 on stdio (:mod:`peerwire.jsonrpc`)
comes in; each ``tools/call`` goes to the app named by ``PEERWIRE_HOME`` as
``(profile, tool, arguments, meta)`` over one persistent control connection
(:class:`~peerwire.control.ControlChannel`), as the caller named by
``PEERWIRE_SESSION_ID``; the app validates the arguments, applies defaults and
runs the tool. Only JSON-RPC lines ever reach stdout; logs go to stderr.
``initialize``, ``server/discover`` and ``tools/list`` need no home and no app:
the tool schemas come straight from ``contracts/``.

One asyncio task per request, so a long wait never holds up another call.
``notifications/cancelled`` cancels its call (its waits end, it claims nothing,
and it gets no answer); closing stdin does the same for every call still in
flight, answers those that finish, and exits.

Protocol revisions (:data:`REVISIONS`): the ``initialize`` handshake for
2024-11-05 to 2025-11-25 (batches only under 2025-03-26, the one revision that
has them), and the stateless 2026-07-28 revision: ``server/discover`` and
requests that carry their revision in ``params._meta``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import stat
import sys
from typing import Any, Awaitable, Callable

from . import __version__, contract, jsonrpc
from .control import CallCancelled, ControlChannel
from .errors import Code, PeerwireError
from .framing import Lines, Oversize, out_of_range_at
from .home import HOME_ENV, SESSION_ENV, Home
from .jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, Batch, Notification, Rejected, Request
from .limits import ANSWER_GRACE_S, MAX_CALLS_IN_FLIGHT, OUTPUT_HIGH_WATER_BYTES

log = logging.getLogger("peerwire.mcp")

HANDSHAKE_REVISIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
"""Revisions negotiated by ``initialize``, newest first."""
STATELESS_REVISIONS = ("2026-07-28",)
"""Revisions where each request carries its revision and capabilities in ``params._meta``."""
REVISIONS = STATELESS_REVISIONS + HANDSHAKE_REVISIONS
BATCH_REVISIONS = ("2025-03-26",)
"""The revisions that allow JSON-RPC batches (added in 2025-03-26, removed in 2025-06-18)."""

UNSUPPORTED_PROTOCOL_VERSION = -32022
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"

SERVER_INFO = {"name": "peerwire", "title": "peerwire messaging", "version": __version__}
INSTRUCTIONS = (
    "Peer messaging between agents. send_message shares information; followup_task assigns "
    "work and returns a request_id; the assignee answers with reply; wait_agent and "
    "receive_messages collect what arrives."
)
CAPABILITIES = {"tools": {"listChanged": False}}
READ_CHUNK = 65536


def tool_result(result: dict[str, Any]) -> dict[str, Any]:
    return {
        # An empty result (collab send_message/followup_task) is an empty output.
        "content": [{"type": "text", "text": json.dumps(result, ensure_ascii=False)}] if result else [],
        "structuredContent": result,
        "isError": False,
    }


def tool_error(error: PeerwireError) -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": f"{error.code.value}: {error.message}"}],
        "structuredContent": {"error": error.to_dict()},
        "isError": True,
    }


def call_meta(params: dict[str, Any]) -> dict[str, Any]:
    """The caller's receipt data from ``params._meta`` (Codex sends call and turn ids)."""
    meta = params.get("_meta")
    out: dict[str, Any] = {"via": "mcp"}
    if not isinstance(meta, dict):
        return out
    call_id = meta.get("callId") or meta.get("call_id")
    if isinstance(call_id, str):
        out["call_id"] = call_id
    turn = meta.get("x-codex-turn-metadata")
    if isinstance(turn, str):
        try:
            turn = json.loads(turn, parse_constant=lambda name: None)
        except (ValueError, RecursionError):
            turn = None
    if isinstance(turn, dict):
        out["turn"] = {k: v for k, v in turn.items() if isinstance(v, (str, int))}
    return out


class ProtocolError(Exception):
    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class McpSession:
    """One MCP session: requests in, one answer line per request out (``write``)."""

    def __init__(self, write: Callable[[bytes], None], env: dict[str, str], profile: str = "messaging"):
        self.profile = profile
        self.tool_names = contract.PROFILES[profile][1]
        self.env = env
        self._write = write
        self.revision: str | None = None
        self._calls: dict[str, asyncio.Task] = {}
        self._cancelled: set[asyncio.Task] = set()
        """Calls cancelled by the client and still ending: they are answered to no one."""
        self._channel: ControlChannel | None = None
        self._warming: asyncio.Future | None = None

    # -- input ----------------------------------------------------------------------

    def receive(self, raw: bytes | Oversize) -> None:
        """Handle one input line: answer at once or start a task that will.

        A request (or a refused message) whose id is still in flight is refused
        with -32600 naming the id, whatever it asks: the call in flight keeps
        its id, its answer and its cancellation.
        """
        if isinstance(raw, Oversize):
            msg_id = raw.member("id")
            live = self._live(msg_id) if isinstance(msg_id, (str, int)) and not isinstance(msg_id, bool) else None
            self._send(self._rejection(live) if live is not None else self._oversize(raw))
            return
        message = jsonrpc.read_line(raw, batches=self.revision in BATCH_REVISIONS)
        if message is None:
            return
        if isinstance(message, Batch):
            self._receive_batch(message)
        elif isinstance(message, Notification):
            self._notified(message)
        elif (live := self._live(message.id)) is not None:
            self._send(self._rejection(live))
        elif isinstance(message, Rejected):
            self._send(self._rejection(message))
        elif message.method == "tools/call":
            self._start(self._answered(message), message.id)
        else:
            self._send(self._answer_now(message))

    def _live(self, msg_id: str | int | None) -> Rejected | None:
        """The refusal of ``msg_id`` when a request with that id is in flight, else ``None``."""
        if msg_id is None or jsonrpc.id_key(msg_id) not in self._calls:
            return None
        return jsonrpc.in_flight(msg_id)

    @staticmethod
    def _rejection(message: Rejected) -> dict[str, Any]:
        return jsonrpc.error(message.id, message.code, message.message)

    def _receive_batch(self, batch: Batch) -> None:
        # Each id is checked against the calls in flight and against the batch's earlier items.
        items: list[Request | Notification | Rejected] = []
        taken: set[str] = set()
        for item in batch.items:
            if not isinstance(item, Notification) and item.id is not None:
                key = jsonrpc.id_key(item.id)
                if key in taken or key in self._calls:
                    item = jsonrpc.in_flight(item.id)
                taken.add(key)
            items.append(item)
        if any(isinstance(i, Request) and i.method == "tools/call" for i in items):
            # Each call is in flight under its own id from now on, so notifications/cancelled reaches it.
            answers = [self._start(self._answer(i), i.id) if isinstance(i, Request) and i.method == "tools/call"
                       else self._answer_item(i) for i in items]
            self._start(self._batch(answers), None)
        else:  # nothing in it waits: answer it in order, like a single request
            self._send([r for r in map(self._answer_item, items) if r is not None] or None)

    @staticmethod
    def _oversize(line: Oversize) -> dict[str, Any]:
        """The answer to a line over the limit: ``message_too_large`` for that call, when its id is known."""
        msg_id, method = line.member("id"), line.member("method")
        if isinstance(msg_id, bool) or not isinstance(msg_id, (str, int)):
            msg_id = None
        if msg_id is not None and method == "tools/call":
            return {"jsonrpc": "2.0", "id": msg_id, "result": tool_error(line.error())}
        return jsonrpc.error(msg_id, jsonrpc.INVALID_REQUEST, f"Invalid Request: {line.error().message}")

    async def room(self) -> None:
        """Return once fewer than :data:`~peerwire.limits.MAX_CALLS_IN_FLIGHT` calls are in flight."""
        while len(self._calls) >= MAX_CALLS_IN_FLIGHT:
            await asyncio.wait(list(self._calls.values()), return_when=asyncio.FIRST_COMPLETED)

    def _start(self, work: Any, msg_id: Any) -> asyncio.Task:
        task = asyncio.ensure_future(work)
        key = jsonrpc.id_key(msg_id) if msg_id is not None else f"batch-{id(task)}"
        self._calls[key] = task

        def done(_: asyncio.Future) -> None:
            # The id is free again for the client's next request.
            if self._calls.get(key) is task:
                del self._calls[key]
            self._cancelled.discard(task)

        task.add_done_callback(done)
        return task

    def _notified(self, note: Notification) -> None:
        if note.method != "notifications/cancelled" or not isinstance(note.params, dict):
            return  # initialized, progress, unknown: nothing to do, nothing to answer
        target = note.params.get("requestId")
        if isinstance(target, bool) or not isinstance(target, (str, int)):
            return
        key = jsonrpc.id_key(target)
        task = self._calls.get(key)
        if task is not None and not task.done():
            # MCP: a cancelled request gets no answer, so its id is the client's again at once; the call
            # ends (releasing its waits in the app) on its own time, answering no one.
            del self._calls[key]
            self._cancelled.add(task)
            task.cancel()

    async def closed(self, grace: float = ANSWER_GRACE_S) -> None:
        """stdin closed: the client is gone. Release every call's waits, answer what finishes, stop."""
        if self._channel is not None:
            self._channel.release_all()
        running = [*self._calls.values(), *self._cancelled]
        if running:
            await asyncio.wait(running, timeout=grace)
        for task in running:
            task.cancel()
        if self._channel is not None:
            await self._channel.close()

    # -- answers ------------------------------------------------------------------------

    def _send(self, message: dict[str, Any] | list | None) -> None:
        if message is None:
            return
        try:
            line = jsonrpc.encode(message)
        except ValueError:  # NaN or Infinity in our own answer: a bug, never written
            log.exception("an answer could not be encoded as JSON")
            msg_id = message.get("id") if isinstance(message, dict) else None
            line = jsonrpc.encode(jsonrpc.error(msg_id, INTERNAL_ERROR, "Internal error: unencodable result"))
        self._write(line)

    async def _answered(self, request: Request) -> None:
        response = await self._answer(request)
        if asyncio.current_task() not in self._cancelled:
            self._send(response)

    async def _answer(self, request: Request) -> dict[str, Any] | None:
        """The response to ``request``, or ``None`` when it was cancelled. Never raises."""
        try:
            if request.method == "tools/call":
                result = await self.call_tool(request.params)
            else:
                return self._answer_now(request)
        except ProtocolError as exc:
            return _error(request.id, exc)
        except (asyncio.CancelledError, CallCancelled):
            return None
        except Exception as exc:  # a bug of ours: the call still gets an answer
            log.exception("internal error in %s", request.method)
            return jsonrpc.error(request.id, INTERNAL_ERROR, f"Internal error: {type(exc).__name__}")
        return {"jsonrpc": "2.0", "id": request.id, "result": self._stamped(request, result)}

    def _answer_now(self, request: Request) -> dict[str, Any]:
        try:
            result = self.dispatch(request)
        except ProtocolError as exc:
            return _error(request.id, exc)
        except Exception as exc:
            log.exception("internal error in %s", request.method)
            return jsonrpc.error(request.id, INTERNAL_ERROR, f"Internal error: {type(exc).__name__}")
        return {"jsonrpc": "2.0", "id": request.id, "result": self._stamped(request, result)}

    def _answer_item(self, item: Request | Notification | Rejected) -> dict[str, Any] | None:
        if isinstance(item, Rejected):
            return jsonrpc.error(item.id, item.code, item.message)
        if isinstance(item, Request):
            return self._answer_now(item)
        return None  # a notification in a batch: nothing to cancel, nothing to answer

    async def _batch(self, answers: list[asyncio.Task | dict[str, Any] | None]) -> None:
        """One answer line for a batch, once each of its calls has finished."""
        calls = [a for a in answers if isinstance(a, asyncio.Task)]
        if calls:
            await asyncio.wait(calls)
        responses = []
        for answer in answers:
            if isinstance(answer, asyncio.Task):
                answer = None if answer.cancelled() else answer.result()  # a cancelled call is left out
            if answer is not None:
                responses.append(answer)
        if responses:
            self._send(responses)

    # -- methods ----------------------------------------------------------------------

    def dispatch(self, request: Request) -> dict[str, Any]:
        method, params = request.method, request.params
        if method == "initialize":
            return self.initialize(params)
        if method == "server/discover":
            return self.discover(params)
        self._stateless_revision(params)
        if method == "ping":
            return {}
        if method == "tools/list":
            return {"tools": list(contract.tools(self.profile))}
        raise ProtocolError(METHOD_NOT_FOUND, f"Method not found: {jsonrpc.shown(method)}")

    def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        requested = params.get("protocolVersion")
        self.revision = requested if requested in HANDSHAKE_REVISIONS else HANDSHAKE_REVISIONS[0]
        return {"protocolVersion": self.revision, "capabilities": CAPABILITIES, "serverInfo": SERVER_INFO,
                "instructions": INSTRUCTIONS}

    def discover(self, params: dict[str, Any]) -> dict[str, Any]:
        """``server/discover`` (2026-07-28): the stateless revisions, capabilities and identity."""
        meta = params.get("_meta")
        if isinstance(meta, dict) and VERSION_KEY in meta:
            self._stateless_revision(params)
        return {"supportedVersions": list(STATELESS_REVISIONS), "capabilities": CAPABILITIES,
                "instructions": INSTRUCTIONS, "ttlMs": 0, "cacheScope": "public"}

    @staticmethod
    def _stateless_revision(params: dict[str, Any]) -> str | None:
        """The revision a stateless request names in ``_meta`` (checked), or ``None`` for a handshake request."""
        meta = params.get("_meta")
        if not isinstance(meta, dict) or VERSION_KEY not in meta:
            return None
        version = meta[VERSION_KEY]
        if not isinstance(version, str):
            raise ProtocolError(INVALID_PARAMS, f"Invalid params: _meta {VERSION_KEY} must be a string")
        if version not in STATELESS_REVISIONS:
            raise ProtocolError(UNSUPPORTED_PROTOCOL_VERSION, f"Unsupported protocol version {jsonrpc.shown(version)}",
                                {"supported": list(STATELESS_REVISIONS), "requested": version})
        if not isinstance(meta.get(CAPABILITIES_KEY), dict):
            raise ProtocolError(INVALID_PARAMS, f"Invalid params: _meta needs the object {CAPABILITIES_KEY}")
        return version

    def _stamped(self, request: Request, result: dict[str, Any]) -> dict[str, Any]:
        """A stateless request's result carries resultType, cache hints for lists, and the server's identity."""
        meta = request.params.get("_meta")
        if request.method != "server/discover" and not (isinstance(meta, dict) and VERSION_KEY in meta):
            return result
        stamped = {**result, "resultType": "complete", "_meta": {SERVER_INFO_KEY: SERVER_INFO}}
        if request.method == "tools/list":
            stamped.update(ttlMs=0, cacheScope="public")
        return stamped

    async def call_tool(self, params: dict[str, Any]) -> dict[str, Any]:
        self._stateless_revision(params)
        name = params.get("name")
        if not isinstance(name, str):
            raise ProtocolError(INVALID_PARAMS, "Invalid params: tools/call needs a tool name")
        if name not in self.tool_names:
            raise ProtocolError(INVALID_PARAMS, f"Unknown tool: {jsonrpc.shown(name)}")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ProtocolError(INVALID_PARAMS, "Invalid params: arguments must be an object")
        if (where := out_of_range_at(arguments, "arguments")) is not None:
            # Valid JSON (1e400), but it reads as infinity, which no hop can carry on: the caller's mistake.
            return tool_error(PeerwireError(Code.INVALID_ARGUMENT, f"{where} is a number out of range: it "
                                            "overflows a 64-bit float; send a finite number"))
        try:
            result = await self._control().call_tool(self.profile, name, arguments, call_meta(params))
        except PeerwireError as exc:
            return tool_error(exc)
        return tool_result(result)

    def warm(self) -> None:
        """Open the control connection in the background, so the first tool call finds it ready."""
        try:
            channel = self._control()
        except PeerwireError:
            return  # no home or no caller: each tool call says so
        self._warming = asyncio.ensure_future(channel.warm())

    def _control(self) -> ControlChannel:
        if self._channel is not None:
            return self._channel
        home = self.env.get(HOME_ENV)
        if not home:
            raise PeerwireError(
                Code.APP_UNAVAILABLE,
                f"{HOME_ENV} is not set in this MCP server's environment; set it to the home of a running "
                "`peerwire app`",
            )
        token = self.env.get(SESSION_ENV)
        if not token:
            raise PeerwireError(
                Code.UNKNOWN_CALLER,
                f"{SESSION_ENV} is not set: give this MCP server the session token of a registered agent",
            )
        self._channel = ControlChannel(Home.from_env(home), token)
        return self._channel


def _error(msg_id: Any, exc: ProtocolError) -> dict[str, Any]:
    response = jsonrpc.error(msg_id, exc.code, exc.message)
    if exc.data is not None:
        response["error"]["data"] = exc.data
    return response


# -- stdio ------------------------------------------------------------------------------


def _pollable(fd: int) -> bool:
    """Pipes and sockets can be driven by the event loop; files and devices (/dev/null) cannot."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


async def _input(fd: int) -> Callable[[], Awaitable[bytes]]:
    """stdin as chunks, read only when asked for (so an unread answer backlog stops the reading):
    a pipe transport when possible, else a read in a thread per chunk."""
    loop = asyncio.get_running_loop()
    if not _pollable(fd):
        return lambda: loop.run_in_executor(None, os.read, fd, READ_CHUNK)
    # The transport pauses once this much is buffered unread, so the pipe fills and the client's writes block.
    reader = asyncio.StreamReader(limit=READ_CHUNK * 4)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", 0, closefd=False))
    return lambda: reader.read(READ_CHUNK)


class Output:
    """Whole lines to stdout, and :meth:`room`: whether the client reads them (a pipe transport when possible).

    Writes never block; :meth:`room` waits while more than
    :data:`~peerwire.limits.OUTPUT_HIGH_WATER_BYTES` of written lines are still
    unread by the client (the reading of stdin waits on it).
    """

    def __init__(self, fd: int):
        self.fd = fd
        self._transport: asyncio.WriteTransport | None = None
        self._drained = asyncio.Event()
        self._drained.set()

    async def open(self) -> "Output":
        if _pollable(self.fd):
            output = self

            class Flow(asyncio.Protocol):
                def pause_writing(self) -> None:
                    output._drained.clear()

                def resume_writing(self) -> None:
                    output._drained.set()

                def connection_lost(self, exc: Exception | None) -> None:
                    output._drained.set()  # nobody reads any more: nothing to wait for

            loop = asyncio.get_running_loop()
            self._transport, _ = await loop.connect_write_pipe(Flow, os.fdopen(self.fd, "wb", 0, closefd=False))
            self._transport.set_write_buffer_limits(high=OUTPUT_HIGH_WATER_BYTES)
        return self

    def write(self, data: bytes) -> None:
        if self._transport is None:  # a file or a device: written through at once
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view):]
        elif not self._transport.is_closing():
            self._transport.write(data)

    async def room(self) -> None:
        """Return once the unread answers are below the high-water mark (at once when the client is gone)."""
        await self._drained.wait()


async def serve(profile: str = "messaging", stdin_fd: int = 0, stdout_fd: int = 1,
                env: dict[str, str] | None = None) -> int:
    """Serve one MCP session on stdio until stdin closes.

    Memory is bounded whatever the client sends: a line is at most
    :data:`~peerwire.limits.MAX_LINE_BYTES`; before each line is taken up the
    unread answers must be under :data:`~peerwire.limits.OUTPUT_HIGH_WATER_BYTES`
    and the calls in flight under :data:`~peerwire.limits.MAX_CALLS_IN_FLIGHT`,
    else reading waits (the pipe fills and the client's writes block).
    """
    read = await _input(stdin_fd)
    output = await Output(stdout_fd).open()
    session = McpSession(output.write, dict(os.environ if env is None else env), profile)
    session.warm()
    lines = Lines()
    while chunk := await read():
        for line in lines.feed(chunk):
            await output.room()
            await session.room()
            session.receive(line)
    if (rest := lines.rest()) is not None:
        session.receive(rest)
    await session.closed()
    return 0


def serve_stdio(profile: str = "messaging") -> int:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="peerwire mcp: %(levelname)s %(message)s")
    try:
        return asyncio.run(serve(profile))
    except KeyboardInterrupt:
        return 0
