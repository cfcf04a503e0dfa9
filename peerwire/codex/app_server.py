"""Asyncio client for `codex app-server` over stdio.

The wire is newline-delimited JSON-RPC 2.0, spoken by the generic stdio peer
(:class:`peerwire.stdio_peer.StdioPeer`: framing, request ids, notifications,
server-initiated requests, the transcript). This module adds what is Codex's:
the `initialize` / `initialized` handshake, the typed Codex methods, what "no"
looks like for each server request, and the session Protocol the adapter is
written against. It knows nothing about peerwire tasks or replies.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, cast

from ..jsonrpc import INTERNAL_ERROR, METHOD_NOT_FOUND, Notification, Request
from ..stdio_peer import (
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_SHUTDOWN_TIMEOUT,
    HandledRequest,
    JsonRpcError,
    PeerError,
    PeerExited,
    PeerSession,
    RequestHandler,
    StdioPeer,
    Transcript,
    TranscriptFile,
    spawn,
)

__all__ = ["DEFAULT_REQUEST_TIMEOUT", "DEFAULT_SHUTDOWN_TIMEOUT", "INTERNAL_ERROR", "METHOD_NOT_FOUND",
           "AppServerClient", "AppServerError", "AppServerExited", "AppServerSession", "HandledServerRequest",
           "JsonRpcError", "Notification", "ServerRequest", "ServerRequestHandler", "Transcript", "TranscriptFile",
           "decline_server_request", "text_input"]

AppServerError = PeerError
"""Base class for failures talking to `codex app-server` (those of any stdio JSON-RPC server)."""


class AppServerExited(PeerExited):
    """The app-server closed its stdout (exited or crashed); ``stderr_tail`` says why."""

    peer = "codex app-server"


ServerRequest = Request
"""A request the server sent to the client (approvals, elicitations, ...)."""
HandledServerRequest = HandledRequest
ServerRequestHandler = RequestHandler

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


class AppServerSession(PeerSession, Protocol):
    """What the Codex adapter uses of an app-server session.

    `AppServerClient` is the live one; a recorded exchange replays through the
    same surface (`harness.lab.recorded.replay.ReplaySession`), and so does the
    scripted stand-in of the claim tests. Each method is the typed Codex request
    of the same name; see `AppServerClient` for what each returns and raises.
    The ``initialize`` answer's ``userAgent`` names the Codex version.
    """

    @property
    def exited(self) -> AppServerExited | None: ...

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


class AppServerClient(StdioPeer):
    """One `codex app-server` child process and its JSON-RPC session.

    Start it with `AppServerClient.start(...)` (spawns and runs the
    `initialize` / `initialized` handshake) and end it with `close()` or
    `async with`. Notifications are kept in arrival order in `received`;
    server-initiated requests go to the handler and are kept, with the answer
    sent, in `server_requests`.
    """

    Exited = AppServerExited

    def __init__(
        self,
        process: Any,
        *,
        transcript: Transcript,
        server_request_handler: ServerRequestHandler = decline_server_request,
        stderr_path: str | os.PathLike[str] | None = None,
    ):
        super().__init__(process, transcript=transcript, server_request_handler=server_request_handler,
                         stderr_path=stderr_path)
        self.initialize_result: dict[str, Any] | None = None

    @property
    def exited(self) -> AppServerExited | None:
        # What StdioPeer keeps is built from Exited, AppServerExited here.
        return cast("AppServerExited | None", super().exited)

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
        process = await spawn([*prefix, "app-server", *args], cwd=cwd, env=child_env)
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


def _user_input(input: str | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(input, str):
        return text_input(input)
    return [dict(item) for item in input]
