"""A JSON-RPC peer over a child process's stdio: the client side of an agent's server.

The Codex app-server (:mod:`peerwire.codex.app_server`) and an ACP agent
(:mod:`peerwire.acp.client`) speak the same wire: newline-delimited JSON-RPC 2.0
on the child's stdin (to it) and stdout (from it). :class:`StdioPeer` is that
wire once: it frames lines, correlates request ids with their answers (an id
is never reused while its request is unanswered, and an answer that matches no
request in flight is kept in ``unmatched_responses``, never taken for
another's), refuses a server request that reuses the id of one it is still
answering (-32600), keeps
notifications in arrival order (each with its ``index``), answers the requests
the server sends with a handler, and records every line both ways in a
:class:`Transcript`. It knows no method names; the typed clients do.

The messages are :mod:`peerwire.jsonrpc`'s (:class:`~peerwire.jsonrpc.Request`,
:class:`~peerwire.jsonrpc.Notification`, :class:`~peerwire.jsonrpc.Response`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from .jsonrpc import (INTERNAL_ERROR, METHOD_NOT_FOUND, Notification, Request, Response, error_object, id_key,
                      in_flight, read_peer_message)

DEFAULT_REQUEST_TIMEOUT = 30.0
DEFAULT_SHUTDOWN_TIMEOUT = 5.0

# One line can carry a whole conversation (a resumed thread returns its turns),
# far beyond asyncio's 64 KiB default line limit.
LINE_LIMIT = 64 * 1024 * 1024
_STDERR_TAIL_LINES = 40
# After stdout closes, how long to wait for stderr and the exit status.
_EXIT_GRACE_S = 1.0


class PeerError(Exception):
    """Base class for failures talking to a stdio JSON-RPC server."""


class JsonRpcError(PeerError):
    """A JSON-RPC error response: ``code``, ``message`` and optional ``data`` as sent.

    Raised by :meth:`StdioPeer.request` (with ``method`` set to the request's
    method); a server-request handler may raise it to answer with an error.
    """

    def __init__(self, code: int, message: str, data: Any = None, *, method: str | None = None):
        super().__init__(f"{method or 'request'} failed: [{code}] {message}")
        self.code = code
        self.message = message
        self.data = data
        self.method = method


class PeerExited(PeerError):
    """The server closed its stdout (exited or crashed).

    Pending requests and notification waiters fail with this; ``stderr_tail``
    holds the last lines the process wrote to stderr, for diagnosis.
    """

    peer = "stdio server"
    """What the message calls the process (a subclass names its own)."""

    def __init__(self, returncode: int | None, stderr_tail: Sequence[str]):
        tail = "\n".join(stderr_tail[-10:])
        super().__init__(f"{self.peer} exited (returncode {returncode})" + (f":\n{tail}" if tail else ""))
        self.returncode = returncode
        self.stderr_tail = list(stderr_tail)


@dataclass(frozen=True)
class HandledRequest:
    """A server-initiated request together with the JSON-RPC answer the client sent."""

    request: Request
    response: dict[str, Any]


RequestHandler = Callable[[Request], Awaitable[Any]]


async def refuse_request(request: Request) -> Any:
    """A handler that can do nothing: every server request is answered -32601 (method not found)."""
    raise JsonRpcError(METHOD_NOT_FOUND, f"{request.method} is not handled by this client")


Redactor = Callable[[dict[str, Any]], dict[str, Any]]
"""Turns a message into what the transcript may keep of it (credentials out); must not change its input."""


class Transcript:
    """Every line in both directions, in order, as JSONL.

    Each entry is ``{"seq", "mono", "wall", "dir", "message"}`` where ``dir`` is
    ``sent`` or ``received``, ``mono`` a ``time.monotonic()`` stamp (orders entries
    within one process) and ``wall`` Unix time (lines up with other evidence). A
    line that is not JSON is kept verbatim under ``raw`` instead of ``message``.
    ``redact``, when given, sees each message first (a session credential handed
    to the agent never reaches the file). Entries are also kept in memory
    (``entries``).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, redact: Redactor | None = None):
        self.path = Path(path) if path is not None else None
        self.entries: list[dict[str, Any]] = []
        self._redact = redact
        self._file: IO[str] | None = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("w", encoding="utf-8")

    def record(self, direction: str, line: str) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "seq": len(self.entries),
            "mono": time.monotonic(),
            "wall": time.time(),
            "dir": direction,
        }
        try:
            message = json.loads(line)
        except ValueError:
            entry["raw"] = line
        else:
            entry["message"] = self._redact(message) if self._redact is not None and isinstance(message, dict) \
                else message
        self.entries.append(entry)
        if self._file is not None:
            self._file.write(json.dumps(entry, ensure_ascii=False) + "\n")
            # Flushed per line so a crashed run still leaves its transcript.
            self._file.flush()
        return entry

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class TranscriptFile(Protocol):
    @property
    def path(self) -> Path | None:
        """Where the session's lines are written (``None``: kept in memory only, or nowhere)."""


class PeerSession(Protocol):
    """What an adapter uses of any peer's session, whatever its protocol: a live :class:`StdioPeer`, or a
    recorded exchange replayed through the same surface. Each protocol's session adds its requests."""

    @property
    def received(self) -> list[Notification]: ...

    @property
    def transcript(self) -> TranscriptFile: ...

    initialize_result: dict[str, Any] | None
    """The peer's answer to ``initialize`` (it names the peer and its version); None when not known."""

    @property
    def pid(self) -> int: ...

    @property
    def exited(self) -> PeerExited | None: ...

    def notifications(self, *, since: int = 0) -> AsyncIterator[Notification]: ...

    async def close(self, timeout: float = DEFAULT_SHUTDOWN_TIMEOUT) -> int | None: ...


async def spawn(argv: Sequence[str], *, cwd: str | os.PathLike[str],
                env: Mapping[str, str]) -> asyncio.subprocess.Process:
    """Start a server child with piped stdio, in its own process group (so closing it also reaches what
    it started, such as the MCP servers an agent launched)."""
    return await asyncio.create_subprocess_exec(
        *argv,
        cwd=os.fspath(cwd),
        env=dict(env),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=LINE_LIMIT,
        **_own_process_group(),
    )


class Arrivals:
    """The notifications a peer received, in order, each carrying its index.

    Any number of consumers read it independently, each from an index it took
    before acting (``len(arrivals.received)``), waiting for more. Once it has
    ended, a reader that has seen everything gets the end's exception, or
    simply stops when the end carries none.
    """

    def __init__(self) -> None:
        self.received: list[Notification] = []
        self._changed = asyncio.Condition()
        self._ended = False
        self._error: BaseException | None = None

    async def add(self, method: str, params: Any) -> Notification:
        async with self._changed:
            note = Notification(method, params, len(self.received))
            self.received.append(note)
            self._changed.notify_all()
        return note

    async def end(self, error: BaseException | None = None) -> None:
        """No more will come: readers drain what there is, then get ``error`` (or stop, without one)."""
        async with self._changed:
            self._ended, self._error = True, error
            self._changed.notify_all()

    async def since(self, index: int) -> list[Notification]:
        """The notifications from ``index`` on, waiting until there is one; ``[]`` once ended without an
        error, the end's error with one."""
        async with self._changed:
            await self._changed.wait_for(lambda: index < len(self.received) or self._ended)
            if index < len(self.received):
                return self.received[index:]
        if self._error is not None:
            raise self._error
        return []

    async def iterate(self, since: int = 0) -> AsyncIterator[Notification]:
        """Yield the notifications from index ``since`` in arrival order, waiting for new ones, until the end."""
        index = since
        while batch := await self.since(index):
            for note in batch:
                yield note
                index = note.after


class StdioPeer:
    """One server child process and its JSON-RPC session, seen from the client.

    Notifications are kept in arrival order in ``received``; server-initiated
    requests go to the handler and are kept, with the answer sent, in
    ``server_requests``. End it with :meth:`close` or ``async with``.
    """

    Exited: type[PeerExited] = PeerExited
    """The error raised once the server is gone (a subclass names its process)."""

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        *,
        transcript: Transcript,
        server_request_handler: RequestHandler = refuse_request,
        stderr_path: str | os.PathLike[str] | None = None,
    ):
        self.process = process
        self.transcript = transcript
        self.arrivals = Arrivals()
        self.server_requests: list[HandledRequest] = []
        self.malformed_lines: list[str] = []
        self.unmatched_responses: list[Response] = []
        """Answers that match no request in flight: a late one (after its timeout), a second one, an id we
        never sent (``"7"`` is not ``7``)."""
        self._handler = server_request_handler
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[str, asyncio.Future[Any]]] = {}
        self._answering: set[str] = set()
        """The ids (:func:`~peerwire.jsonrpc.id_key`) of the server requests whose handler is still running."""
        self._exited: PeerExited | None = None
        self._stderr_tail: deque[str] = deque(maxlen=_STDERR_TAIL_LINES)
        self._stderr_file: IO[str] | None = (
            Path(stderr_path).open("w", encoding="utf-8") if stderr_path is not None else None
        )
        self._write_lock = asyncio.Lock()
        self._handler_tasks: set[asyncio.Task[None]] = set()
        self._reader = asyncio.create_task(self._read_stdout(), name="peer-stdout")
        self._stderr_reader = asyncio.create_task(self._read_stderr(), name="peer-stderr")

    async def __aenter__(self) -> StdioPeer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def exited(self) -> PeerExited | None:
        """Why the session ended, once the server's stdout has closed."""
        return self._exited

    # -- JSON-RPC ---------------------------------------------------------

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = DEFAULT_REQUEST_TIMEOUT,
        sent: asyncio.Event | None = None,
    ) -> Any:
        """Send a request and return its ``result``.

        Raises :class:`JsonRpcError` for an error response, :attr:`Exited` if the
        server goes away first and ``TimeoutError`` after ``timeout`` seconds
        (``None``: no bound; a late answer is then only recorded in the
        transcript: the request may still have taken effect). ``sent`` is set
        once the request is written, for a caller that waits for a long answer
        but acts as soon as the request is out.
        """
        if self._exited is not None:
            raise self._exited
        request_id = next(self._ids)
        while request_id in self._pending:  # never reuse an id still in flight, even after a wrap-around
            request_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = (method, future)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = dict(params)
        try:
            await self._send(message)
            if sent is not None:
                sent.set()
            return await asyncio.wait_for(future, timeout)
        finally:
            self._pending.pop(request_id, None)

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send a notification (no answer expected)."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = dict(params)
        await self._send(message)

    async def wait_for_notification(
        self,
        method: str,
        where: Callable[[dict[str, Any]], bool] | None = None,
        *,
        since: int = 0,
        timeout: float,
    ) -> Notification:
        """Return the first notification named ``method`` (and whose params satisfy
        ``where``) at index ``since`` or later in ``received``, waiting for it if it
        has not arrived yet.

        Earlier arrivals count, so match on ids or pass ``since`` (e.g.
        ``len(client.received)`` taken before acting) when the same method can
        occur more than once. Raises ``TimeoutError`` after ``timeout`` seconds
        and :attr:`Exited` if the server goes away first.
        """
        async with asyncio.timeout(timeout):
            index = since
            while True:
                for notification in await self.arrivals.since(index):
                    if notification.method == method and (where is None or where(notification.params)):
                        return notification
                    index = notification.after

    async def notifications(self, *, since: int = 0) -> AsyncIterator[Notification]:
        """Yield notifications in arrival order from index ``since``, waiting for new ones;
        raises :attr:`Exited` once the server is gone and every received notification
        has been yielded. Any number of consumers may iterate independently."""
        async for notification in self.arrivals.iterate(since):
            yield notification

    @property
    def received(self) -> list[Notification]:
        """Every notification received so far, in order (an index into it is where a reader resumes)."""
        return self.arrivals.received

    # -- lifecycle -----------------------------------------------------------

    async def close(self, timeout: float = DEFAULT_SHUTDOWN_TIMEOUT) -> int | None:
        """Shut the server down and return its exit code.

        Closes stdin (a stdio server exits on EOF), waits up to ``timeout``
        seconds, then terminates and finally kills the process group. Whatever
        else is left in the group afterwards (children that ignored EOF) gets
        SIGTERM. Safe to call more than once.
        """
        stdin = self.process.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()
            with contextlib.suppress(ConnectionError, BrokenPipeError):
                await stdin.wait_closed()
        if not await self._wait_exit(timeout):
            self._signal_group(signal.SIGTERM)
            if not await self._wait_exit(timeout):
                self._signal_group(getattr(signal, "SIGKILL", signal.SIGTERM))
                await self.process.wait()
        self._signal_group(signal.SIGTERM)
        # A straggler that kept our stdout/stderr open must not hang the close.
        readers = {self._reader, self._stderr_reader}
        _, stuck = await asyncio.wait(readers, timeout=timeout)
        for task in stuck | self._handler_tasks:
            task.cancel()
        await asyncio.gather(*stuck, *self._handler_tasks, return_exceptions=True)
        self.transcript.close()
        if self._stderr_file is not None:
            self._stderr_file.close()
            self._stderr_file = None
        return self.process.returncode

    async def _wait_exit(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self.process.wait(), timeout)
        except TimeoutError:
            return False
        return True

    def _signal_group(self, sig: int) -> None:
        if os.name != "posix":
            if self.process.returncode is None:
                self.process.send_signal(sig)
            return
        # The child leads its own group (see spawn), so the group id is its pid;
        # ESRCH means nobody in the group is left.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, sig)

    # -- wire ------------------------------------------------------------------

    async def _send(self, message: dict[str, Any]) -> None:
        line = json.dumps(message, ensure_ascii=False)
        stdin = self.process.stdin
        assert stdin is not None
        async with self._write_lock:
            self.transcript.record("sent", line)
            try:
                stdin.write(line.encode("utf-8") + b"\n")
                await stdin.drain()
            except (ConnectionError, BrokenPipeError) as error:
                raise self._exited or self.Exited(self.process.returncode, list(self._stderr_tail)) from error

    async def _read_stdout(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        try:
            while line_bytes := await stdout.readline():
                line = line_bytes.decode("utf-8", errors="replace").rstrip("\r\n")
                if line:
                    await self._dispatch(line)
        finally:
            # stderr may still hold the reason for the exit: give it a moment to drain.
            await asyncio.wait({self._stderr_reader}, timeout=_EXIT_GRACE_S)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.process.wait(), _EXIT_GRACE_S)
            self._exited = self.Exited(self.process.returncode, list(self._stderr_tail))
            for _, future in self._pending.values():
                if not future.done():
                    future.set_exception(self._exited)
            await self.arrivals.end(self._exited)

    async def _read_stderr(self) -> None:
        stderr = self.process.stderr
        assert stderr is not None
        while line_bytes := await stderr.readline():
            line = line_bytes.decode("utf-8", errors="replace").rstrip("\r\n")
            self._stderr_tail.append(line)
            if self._stderr_file is not None:
                self._stderr_file.write(line + "\n")
                self._stderr_file.flush()

    async def _dispatch(self, line: str) -> None:
        self.transcript.record("received", line)
        try:
            message = read_peer_message(json.loads(line))
        except ValueError:
            message = None
        if message is None:
            self.malformed_lines.append(line)
        elif isinstance(message, Response):
            self._resolve(message)
        elif isinstance(message, Request):
            self._start_answer(message)
        else:
            await self.arrivals.add(message.method, message.params)

    def _start_answer(self, request: Request) -> None:
        key = id_key(request.id) if isinstance(request.id, (str, int)) else None
        if key is not None and key in self._answering:
            # Our answer names the request by id alone: a second request under a live id is refused unrun.
            refusal = in_flight(request.id)
            response = {"jsonrpc": "2.0", "id": request.id, "error": error_object(refusal.code, refusal.message)}
            self.server_requests.append(HandledRequest(request, response))
            task = asyncio.create_task(self._send_quietly(response), name=f"server-request-{request.method}")
        else:
            if key is not None:
                self._answering.add(key)
            task = asyncio.create_task(self._answer(request), name=f"server-request-{request.method}")
            if key is not None:
                task.add_done_callback(lambda _: self._answering.discard(key))
        self._handler_tasks.add(task)
        task.add_done_callback(self._handler_tasks.discard)

    def _resolve(self, message: Response) -> None:
        # type() and not isinstance(): the id true is not the id 1, nor "1" the id 1.
        pending = self._pending.get(message.id) if type(message.id) is int else None
        if pending is None or pending[1].done():
            self.unmatched_responses.append(message)
            return
        method, future = pending
        if message.error is not None:
            error = message.error
            future.set_exception(
                JsonRpcError(error.get("code", 0), error.get("message", ""), error.get("data"), method=method)
            )
        else:
            future.set_result(message.result)

    async def _answer(self, request: Request) -> None:
        response: dict[str, Any] = {"jsonrpc": "2.0", "id": request.id}
        try:
            response["result"] = await self._handler(request)
        except JsonRpcError as error:
            response["error"] = error_object(error.code, error.message, error.data)
        except Exception as error:  # a broken handler must still answer, or the server waits forever
            response["error"] = error_object(INTERNAL_ERROR, f"client handler failed: {error!r}")
        self.server_requests.append(HandledRequest(request, response))
        await self._send_quietly(response)

    async def _send_quietly(self, response: dict[str, Any]) -> None:
        with contextlib.suppress(PeerExited):
            await self._send(response)


def _own_process_group() -> dict[str, Any]:
    if os.name == "posix":
        return {"start_new_session": True}
    if sys.platform == "win32":
        import subprocess

        return {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}
    return {}
