"""Asyncio client for `codex app-server` over stdio.

The wire is newline-delimited JSON-RPC 2.0: one JSON object per line on the
child's stdin (client to server) and stdout (server to client). This module
frames lines, correlates request ids, surfaces notifications and
server-initiated requests, and records every line. It knows Codex method
names (the typed helpers) but nothing about peerwire tasks or replies.
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

DEFAULT_REQUEST_TIMEOUT = 30.0
DEFAULT_SHUTDOWN_TIMEOUT = 5.0

# One app-server line can carry a whole thread (thread/resume returns its
# turns), far beyond asyncio's 64 KiB default line limit.
_LINE_LIMIT = 64 * 1024 * 1024
_STDERR_TAIL_LINES = 40
# After stdout closes, how long to wait for stderr and the exit status.
_EXIT_GRACE_S = 1.0

# JSON-RPC 2.0 reserved codes used when answering server-initiated requests.
METHOD_NOT_FOUND = -32601
INTERNAL_ERROR = -32603


class AppServerError(Exception):
    """Base class for failures talking to `codex app-server`."""


class JsonRpcError(AppServerError):
    """A JSON-RPC error response: `code`, `message` and optional `data` as sent.

    Raised by `AppServerClient.request` (with `method` set to the request's
    method); a server-request handler may raise it to answer with an error.
    """

    def __init__(self, code: int, message: str, data: Any = None, *, method: str | None = None):
        super().__init__(f"{method or 'request'} failed: [{code}] {message}")
        self.code = code
        self.message = message
        self.data = data
        self.method = method


class AppServerExited(AppServerError):
    """The app-server closed its stdout (exited or crashed).

    Pending requests and notification waiters fail with this; `stderr_tail`
    holds the last lines the process wrote to stderr, for diagnosis.
    """

    def __init__(self, returncode: int | None, stderr_tail: Sequence[str]):
        tail = "\n".join(stderr_tail[-10:])
        super().__init__(
            f"codex app-server exited (returncode {returncode})" + (f":\n{tail}" if tail else "")
        )
        self.returncode = returncode
        self.stderr_tail = list(stderr_tail)


@dataclass(frozen=True)
class Notification:
    """A server notification; `index` is its position in `AppServerClient.received`."""

    index: int
    method: str
    params: dict[str, Any]


@dataclass(frozen=True)
class ServerRequest:
    """A request the server sent to the client (approvals, elicitations, ...)."""

    id: int | str
    method: str
    params: dict[str, Any]


@dataclass(frozen=True)
class HandledServerRequest:
    """A server request together with the JSON-RPC answer the client sent."""

    request: ServerRequest
    response: dict[str, Any]


ServerRequestHandler = Callable[[ServerRequest], Awaitable[Any]]

# What "no" looks like for each server request Codex 0.171.0 can send
# (shapes from `codex app-server generate-json-schema`).
_DECLINED: dict[str, dict[str, Any]] = {
    "item/commandExecution/requestApproval": {"decision": "decline"},
    "item/fileChange/requestApproval": {"decision": "decline"},
    "execCommandApproval": {"decision": "denied"},
    "applyPatchApproval": {"decision": "denied"},
    "mcpServer/elicitation/request": {"action": "decline"},
    "item/permissions/requestApproval": {"permissions": {}},
    "item/tool/call": {
        "success": False,
        "contentItems": [{"type": "inputText", "text": "declined: this client runs no dynamic tools"}],
    },
}


async def decline_server_request(request: ServerRequest) -> Any:
    """Default server-request handler: refuse everything safely.

    Approvals are declined/denied, elicitations declined, permission requests
    granted nothing and dynamic tool calls fail. Anything else (auth token
    refresh, attestation, user input) is answered with JSON-RPC error -32601,
    which Codex treats as "the client cannot do this".
    """
    declined = _DECLINED.get(request.method)
    if declined is None:
        raise JsonRpcError(METHOD_NOT_FOUND, f"{request.method} is not handled by this client")
    return json.loads(json.dumps(declined))  # a fresh copy per answer


def text_input(text: str) -> list[dict[str, Any]]:
    """The `input` of turn/start and turn/steer for one plain text message."""
    return [{"type": "text", "text": text}]


class Transcript:
    """Every app-server line in both directions, in order, as JSONL.

    Each entry is `{"seq", "mono", "wall", "dir", "message"}` where `dir` is
    `sent` or `received`, `mono` a `time.monotonic()` stamp (orders entries
    within one process) and `wall` Unix time (lines up with rollouts). A line
    that is not JSON is kept verbatim under `raw` instead of `message`.
    Entries are also kept in memory (`entries`).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None):
        self.path = Path(path) if path is not None else None
        self.entries: list[dict[str, Any]] = []
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
            entry["message"] = json.loads(line)
        except ValueError:
            entry["raw"] = line
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
    path: Path | None
    """Where the session's lines are written (``None``: kept in memory only, or nowhere)."""


class AppServerSession(Protocol):
    """What the Codex adapter uses of an app-server session.

    `AppServerClient` is the live one; a recorded exchange replays through the
    same surface (`harness.lab.recorded.replay.ReplaySession`), and so does the
    scripted stand-in of the claim tests. Each method is the typed Codex request
    of the same name; see `AppServerClient` for what each returns and raises.
    """

    received: list[Notification]
    transcript: TranscriptFile
    initialize_result: dict[str, Any] | None
    """The server's answer to ``initialize`` (its ``userAgent`` names its version); None when not known."""

    @property
    def pid(self) -> int: ...

    @property
    def exited(self) -> AppServerExited | None: ...

    def notifications(self, *, since: int = 0) -> AsyncIterator[Notification]: ...

    async def thread_start(self, *, cwd: str | os.PathLike[str] | None = None,
                           extra: Mapping[str, Any] | None = None,
                           timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[str, Any]: ...

    async def thread_resume(self, thread_id: str, *, extra: Mapping[str, Any] | None = None,
                            timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[str, Any]: ...

    async def thread_fork(self, thread_id: str, *, extra: Mapping[str, Any] | None = None,
                          timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[str, Any]: ...

    async def thread_set_name(self, thread_id: str, name: str, *,
                              timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[str, Any]: ...

    async def mcp_server_status(self, thread_id: str, *,
                                timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[str, Any]: ...

    async def thread_read(self, thread_id: str, *, include_turns: bool = False,
                          timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[str, Any]: ...

    async def turn_start(self, thread_id: str, input: str | Sequence[Mapping[str, Any]], *,
                         extra: Mapping[str, Any] | None = None,
                         timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[str, Any]: ...

    async def turn_steer(self, thread_id: str, expected_turn_id: str, input: str | Sequence[Mapping[str, Any]], *,
                         extra: Mapping[str, Any] | None = None,
                         timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[str, Any]: ...

    async def turn_interrupt(self, thread_id: str, turn_id: str, *,
                             timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[str, Any]: ...

    async def thread_inject_items(self, thread_id: str, items: Sequence[Mapping[str, Any]], *,
                                  timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[str, Any]: ...

    async def close(self, timeout: float = DEFAULT_SHUTDOWN_TIMEOUT) -> int | None: ...


class AppServerClient:
    """One `codex app-server` child process and its JSON-RPC session.

    Start it with `AppServerClient.start(...)` (spawns and runs the
    `initialize` / `initialized` handshake) and end it with `close()` or
    `async with`. Notifications are kept in arrival order in `received`;
    server-initiated requests go to the handler and are kept, with the answer
    sent, in `server_requests`.
    """

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        *,
        transcript: Transcript,
        server_request_handler: ServerRequestHandler = decline_server_request,
        stderr_path: str | os.PathLike[str] | None = None,
    ):
        self.process = process
        self.transcript = transcript
        self.received: list[Notification] = []
        self.server_requests: list[HandledServerRequest] = []
        self.malformed_lines: list[str] = []
        self.initialize_result: dict[str, Any] | None = None
        self._handler = server_request_handler
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[str, asyncio.Future[Any]]] = {}
        self._arrival = asyncio.Condition()
        self._exited: AppServerExited | None = None
        self._stderr_tail: deque[str] = deque(maxlen=_STDERR_TAIL_LINES)
        self._stderr_file: IO[str] | None = (
            Path(stderr_path).open("w", encoding="utf-8") if stderr_path is not None else None
        )
        self._write_lock = asyncio.Lock()
        self._handler_tasks: set[asyncio.Task[None]] = set()
        self._reader = asyncio.create_task(self._read_stdout(), name="app-server-stdout")
        self._stderr_reader = asyncio.create_task(self._read_stderr(), name="app-server-stderr")

    @classmethod
    async def start(
        cls,
        *,
        codex: str | os.PathLike[str] | Sequence[str] = "codex",
        codex_home: str | os.PathLike[str],
        cwd: str | os.PathLike[str],
        env: Mapping[str, str] | None = None,
        args: Sequence[str] = (),
        transcript_path: str | os.PathLike[str] | None = None,
        stderr_path: str | os.PathLike[str] | None = None,
        server_request_handler: ServerRequestHandler = decline_server_request,
        client_name: str = "peerwire",
        client_version: str = "0",
        experimental_api: bool = True,
        timeout: float = DEFAULT_REQUEST_TIMEOUT,
    ) -> AppServerClient:
        """Spawn `codex app-server` and complete the handshake.

        `codex` is the executable, or a command prefix such as
        `["node", "codex.js"]`; `app-server` and `args` are appended. `env` is
        the child's whole environment when given (the caller decides what is
        inherited); otherwise the current environment is inherited.
        `CODEX_HOME` is always set to `codex_home`. `experimental_api` opts
        into the protocol's experimental methods and fields. The child
        runs in its own process group so `close()` also reaches the MCP
        servers it launched. If the handshake fails the child is closed and
        the error re-raised.
        """
        child_env = dict(os.environ if env is None else env)
        child_env["CODEX_HOME"] = os.fspath(codex_home)
        prefix = [os.fspath(codex)] if isinstance(codex, (str, os.PathLike)) else list(codex)
        process = await asyncio.create_subprocess_exec(
            *prefix,
            "app-server",
            *args,
            cwd=os.fspath(cwd),
            env=child_env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=_LINE_LIMIT,
            **_own_process_group(),
        )
        client = cls(
            process,
            transcript=Transcript(transcript_path),
            server_request_handler=server_request_handler,
            stderr_path=stderr_path,
        )
        try:
            client.initialize_result = await client.request(
                "initialize",
                {
                    "clientInfo": {"name": client_name, "version": client_version},
                    "capabilities": {"experimentalApi": experimental_api},
                },
                timeout=timeout,
            )
            await client.notify("initialized")
        except BaseException:
            await client.close()
            raise
        return client

    async def __aenter__(self) -> AppServerClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def exited(self) -> AppServerExited | None:
        """Why the session ended, once the server's stdout has closed."""
        return self._exited

    # -- JSON-RPC ---------------------------------------------------------

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float = DEFAULT_REQUEST_TIMEOUT,
    ) -> Any:
        """Send a request and return its `result`.

        Raises `JsonRpcError` for an error response, `AppServerExited` if the
        server goes away first and `TimeoutError` after `timeout` seconds (a
        late answer is then only recorded in the transcript: the request may
        still have taken effect).
        """
        if self._exited is not None:
            raise self._exited
        request_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = (method, future)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = dict(params)
        try:
            await self._send(message)
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
        """Return the first notification named `method` (and whose params satisfy
        `where`) at index `since` or later in `received`, waiting for it if it
        has not arrived yet.

        Earlier arrivals count, so match on ids (thread, turn) or pass
        `since` (e.g. `len(client.received)` taken before acting) when the same
        method can occur more than once. Raises `TimeoutError` after `timeout`
        seconds and `AppServerExited` if the server goes away first.
        """
        async with asyncio.timeout(timeout):
            index = since
            while True:
                for notification in await self._arrivals_from(index):
                    if notification.method == method and (where is None or where(notification.params)):
                        return notification
                    index = notification.index + 1

    async def notifications(self, *, since: int = 0) -> AsyncIterator[Notification]:
        """Yield notifications in arrival order from index `since`, waiting for
        new ones; raises `AppServerExited` once the server is gone and every
        received notification has been yielded. Any number of consumers may
        iterate independently."""
        index = since
        while True:
            for notification in await self._arrivals_from(index):
                yield notification
                index = notification.index + 1

    async def _arrivals_from(self, index: int) -> list[Notification]:
        """The notifications from `index` on, waiting until there is one;
        raises `AppServerExited` when none will come."""
        async with self._arrival:
            await self._arrival.wait_for(lambda: index < len(self.received) or self._exited is not None)
            if index < len(self.received):
                return self.received[index:]
        assert self._exited is not None
        raise self._exited

    # -- typed Codex methods -----------------------------------------------

    async def thread_start(
        self,
        *,
        cwd: str | os.PathLike[str] | None = None,
        extra: Mapping[str, Any] | None = None,
        timeout: float = DEFAULT_REQUEST_TIMEOUT,
    ) -> dict[str, Any]:
        """`thread/start`; the new thread is `result["thread"]` (its id at `["id"]`)."""
        params = {**(extra or {})}
        if cwd is not None:
            params["cwd"] = os.fspath(cwd)
        return await self.request("thread/start", params, timeout=timeout)

    async def thread_resume(
        self,
        thread_id: str,
        *,
        extra: Mapping[str, Any] | None = None,
        timeout: float = DEFAULT_REQUEST_TIMEOUT,
    ) -> dict[str, Any]:
        """`thread/resume` of a thread with a recorded rollout (a thread that
        never ran a turn has none and the server answers with an error, unless
        it was named: see `thread_set_name`)."""
        return await self.request("thread/resume", {**(extra or {}), "threadId": thread_id}, timeout=timeout)

    async def mcp_server_status(self, thread_id: str, *,
                                timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[str, Any]:
        """`mcpServerStatus/list` of a thread's MCP servers (`result["data"]`, each with its `runtimeStatus`),
        without their tool inventories."""
        return await self.request("mcpServerStatus/list", {"threadId": thread_id, "detail": "toolsAndAuthOnly"},
                                  timeout=timeout)

    async def thread_set_name(self, thread_id: str, name: str, *,
                              timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[str, Any]:
        """`thread/name/set`: names the thread, which also writes it down, so a thread that ran no turn
        yet can be resumed (subscribed to) by another connection."""
        return await self.request("thread/name/set", {"threadId": thread_id, "name": name}, timeout=timeout)

    async def thread_fork(
        self,
        thread_id: str,
        *,
        extra: Mapping[str, Any] | None = None,
        timeout: float = DEFAULT_REQUEST_TIMEOUT,
    ) -> dict[str, Any]:
        """`thread/fork`: a new thread (`result["thread"]`) holding the finished history of
        `thread_id`; a turn in progress there is cut, not copied."""
        return await self.request("thread/fork", {**(extra or {}), "threadId": thread_id}, timeout=timeout)

    async def thread_read(
        self,
        thread_id: str,
        *,
        include_turns: bool = False,
        timeout: float = DEFAULT_REQUEST_TIMEOUT,
    ) -> dict[str, Any]:
        """`thread/read`: the thread (`result["thread"]`), with its `turns` and their items
        when `include_turns` is set."""
        return await self.request("thread/read", {"threadId": thread_id, "includeTurns": include_turns},
                                  timeout=timeout)

    async def turn_start(
        self,
        thread_id: str,
        input: str | Sequence[Mapping[str, Any]],
        *,
        extra: Mapping[str, Any] | None = None,
        timeout: float = DEFAULT_REQUEST_TIMEOUT,
    ) -> dict[str, Any]:
        """`turn/start`; the answer (`result["turn"]`) arrives before the turn
        runs: watch `turn/started` / `turn/completed` for its progress."""
        params = {**(extra or {}), "threadId": thread_id, "input": _user_input(input)}
        return await self.request("turn/start", params, timeout=timeout)

    async def turn_steer(
        self,
        thread_id: str,
        expected_turn_id: str,
        input: str | Sequence[Mapping[str, Any]],
        *,
        extra: Mapping[str, Any] | None = None,
        timeout: float = DEFAULT_REQUEST_TIMEOUT,
    ) -> dict[str, Any]:
        """`turn/steer` into the active turn, fenced by `expectedTurnId`.

        When no turn is active or the active turn is another one, the server
        answers JSON-RPC error -32600 and admits nothing.
        """
        params = {
            **(extra or {}),
            "threadId": thread_id,
            "expectedTurnId": expected_turn_id,
            "input": _user_input(input),
        }
        return await self.request("turn/steer", params, timeout=timeout)

    async def turn_interrupt(
        self, thread_id: str, turn_id: str, *, timeout: float = DEFAULT_REQUEST_TIMEOUT
    ) -> dict[str, Any]:
        """`turn/interrupt`; the turn then completes with status `interrupted`."""
        return await self.request(
            "turn/interrupt", {"threadId": thread_id, "turnId": turn_id}, timeout=timeout
        )

    async def thread_inject_items(
        self, thread_id: str, items: Sequence[Mapping[str, Any]], *, timeout: float = DEFAULT_REQUEST_TIMEOUT
    ) -> dict[str, Any]:
        """`thread/inject_items`: append raw Responses items to the thread's
        model-visible history without starting a turn or calling the model."""
        return await self.request(
            "thread/inject_items",
            {"threadId": thread_id, "items": [dict(item) for item in items]},
            timeout=timeout,
        )

    # -- lifecycle -----------------------------------------------------------

    async def close(self, timeout: float = DEFAULT_SHUTDOWN_TIMEOUT) -> int | None:
        """Shut the server down and return its exit code.

        Closes stdin (the server exits on EOF), waits up to `timeout` seconds,
        then terminates and finally kills the process group. Whatever else is
        left in the group afterwards (MCP servers that ignored EOF) gets
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
        # The child leads its own group (see _own_process_group), so the
        # group id is its pid; ESRCH means nobody in the group is left.
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
                raise self._exited or AppServerExited(
                    self.process.returncode, list(self._stderr_tail)
                ) from error

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
            self._exited = AppServerExited(self.process.returncode, list(self._stderr_tail))
            for _, future in self._pending.values():
                if not future.done():
                    future.set_exception(self._exited)
            async with self._arrival:
                self._arrival.notify_all()

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
            message = json.loads(line)
        except ValueError:
            self.malformed_lines.append(line)
            return
        if not isinstance(message, dict):
            self.malformed_lines.append(line)
            return
        method = message.get("method")
        if method is None:
            self._resolve(message)
        elif "id" in message:
            request = ServerRequest(message["id"], method, message.get("params") or {})
            task = asyncio.create_task(self._answer(request), name=f"server-request-{method}")
            self._handler_tasks.add(task)
            task.add_done_callback(self._handler_tasks.discard)
        else:
            async with self._arrival:
                self.received.append(Notification(len(self.received), method, message.get("params") or {}))
                self._arrival.notify_all()

    def _resolve(self, message: dict[str, Any]) -> None:
        request_id = message.get("id")
        pending = self._pending.get(request_id) if isinstance(request_id, int) else None
        if pending is None:
            return  # an answer to a request that already timed out
        method, future = pending
        if future.done():
            return
        if "error" in message:
            error = message["error"] or {}
            future.set_exception(
                JsonRpcError(error.get("code", 0), error.get("message", ""), error.get("data"), method=method)
            )
        else:
            future.set_result(message.get("result"))

    async def _answer(self, request: ServerRequest) -> None:
        response: dict[str, Any] = {"jsonrpc": "2.0", "id": request.id}
        try:
            response["result"] = await self._handler(request)
        except JsonRpcError as error:
            response["error"] = _error_body(error.code, error.message, error.data)
        except Exception as error:  # a broken handler must still answer, or Codex waits forever
            response["error"] = _error_body(INTERNAL_ERROR, f"client handler failed: {error!r}", None)
        self.server_requests.append(HandledServerRequest(request, response))
        with contextlib.suppress(AppServerExited):
            await self._send(response)


def _error_body(code: int, message: str, data: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return body


def _user_input(input: str | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(input, str):
        return text_input(input)
    return [dict(item) for item in input]


def _own_process_group() -> dict[str, Any]:
    if os.name == "posix":
        return {"start_new_session": True}
    if sys.platform == "win32":
        import subprocess

        return {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}
    return {}
