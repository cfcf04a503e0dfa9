"""Asyncio client of an agent that speaks the Agent Client Protocol (ACP) on stdio.

ACP is JSON-RPC 2.0 over the agent's stdin and stdout, the generic stdio peer
(:class:`peerwire.stdio_peer.StdioPeer`). This module adds what is ACP's: the
``initialize`` handshake (protocol version 1), the typed session methods the
adapter uses, and what "no" looks like for each request an agent may send its
client. peerwire is a client with no person at a keyboard, no file system and
no terminal to lend: it declares neither capability, and it grants no
permission an agent asks for.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ..jsonrpc import METHOD_NOT_FOUND, Request
from ..stdio_peer import (
    DEFAULT_REQUEST_TIMEOUT,
    JsonRpcError,
    PeerExited,
    PeerSession,
    RequestHandler,
    StdioPeer,
    Transcript,
    spawn,
)

PROTOCOL_VERSION = 1
"""The ACP protocol version peerwire speaks (the agent answers the one it chose)."""

REDACTED = "[redacted]"
_CREDENTIAL_METHODS = ("session/new", "session/load", "session/resume", "session/fork")


class AgentExited(PeerExited):
    """The ACP agent closed its stdout (exited or crashed); ``stderr_tail`` says why."""

    peer = "ACP agent"


def _reject_option(options: Sequence[Mapping[str, Any]]) -> str | None:
    for kind in ("reject_once", "reject_always"):
        for option in options:
            if option.get("kind") == kind and isinstance(option.get("optionId"), str):
                return option["optionId"]
    return None


async def decline_agent_request(request: Request) -> Any:
    """Default handler of the requests an agent sends its client: refuse everything safely.

    ``session/request_permission`` is answered with the agent's own reject
    option (``reject_once``, else ``reject_always``), or ``cancelled`` when it
    offers none: no person is there to allow anything, and the tools peerwire
    needs are allowed by the agent's configuration, not at run time. File
    system and terminal requests (capabilities peerwire never declares) and
    anything else are JSON-RPC error -32601.
    """
    if request.method == "session/request_permission":
        option = _reject_option(request.params.get("options") or [])
        if option is None:
            return {"outcome": {"outcome": "cancelled"}}
        return {"outcome": {"outcome": "selected", "optionId": option}}
    raise JsonRpcError(METHOD_NOT_FOUND, f"{request.method} is not handled by this client")


def redact_credentials(message: dict[str, Any]) -> dict[str, Any]:
    """The message without the values of the MCP servers' environment and headers it hands an agent.

    ``session/new`` (and load, resume, fork) carry each MCP server's environment,
    which holds the agent's peerwire session credential: the transcript keeps the
    names and replaces each value with :data:`REDACTED`.
    """
    params = message.get("params")
    if message.get("method") not in _CREDENTIAL_METHODS or not isinstance(params, dict) \
            or not isinstance(params.get("mcpServers"), list):
        return message
    out = copy.deepcopy(message)
    for server in out["params"]["mcpServers"]:
        if not isinstance(server, dict):
            continue
        for key in ("env", "headers"):
            for pair in server.get(key) or []:
                if isinstance(pair, dict) and "value" in pair:
                    pair["value"] = REDACTED
    return out


def stdio_mcp_server(name: str, command: Sequence[str], env: Mapping[str, str]) -> dict[str, Any]:
    """An ACP ``McpServer`` entry for a server the agent launches on stdio (``command`` absolute)."""
    return {"name": name, "command": command[0], "args": list(command[1:]),
            "env": [{"name": key, "value": value} for key, value in env.items()]}


def text_block(text: str) -> dict[str, Any]:
    """An ACP text content block."""
    return {"type": "text", "text": text}


class AcpSession(PeerSession, Protocol):
    """What the ACP adapter uses of an agent's session.

    :class:`AcpClient` is the live one; a recorded exchange replays through the
    same surface (``tests.acp.replay.ReplaySession``). Each method is the ACP
    request of the same name; see :class:`AcpClient` for what each returns. The
    ``initialize`` answer holds ``agentInfo`` and ``agentCapabilities``.
    """

    async def session_new(self, cwd: str, mcp_servers: Sequence[Mapping[str, Any]], *,
                          timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[str, Any]: ...

    async def session_load(self, session_id: str, cwd: str, mcp_servers: Sequence[Mapping[str, Any]], *,
                           timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[str, Any]: ...

    async def session_prompt(self, session_id: str, prompt: Sequence[Mapping[str, Any]], *,
                             message_id: str | None = None, sent: Any = None,
                             timeout: float | None = None) -> dict[str, Any]: ...

    async def session_cancel(self, session_id: str) -> None: ...


class AcpClient(StdioPeer):
    """One ACP agent child process (``opencode acp``, ...) and its JSON-RPC session.

    Start it with :meth:`start` (spawns and runs ``initialize``); end it with
    :meth:`close`. Notifications (``session/update``) are kept in arrival order
    in ``received``; the agent's requests go to the handler.
    """

    Exited = AgentExited

    def __init__(self, process: Any, *, transcript: Transcript,
                 server_request_handler: RequestHandler = decline_agent_request,
                 stderr_path: str | os.PathLike[str] | None = None):
        super().__init__(process, transcript=transcript, server_request_handler=server_request_handler,
                         stderr_path=stderr_path)
        self.initialize_result: dict[str, Any] | None = None

    @classmethod
    async def start(
        cls,
        *,
        command: Sequence[str],
        cwd: str | os.PathLike[str],
        env: Mapping[str, str | None] | None = None,
        transcript_path: str | os.PathLike[str] | None = None,
        stderr_path: str | os.PathLike[str] | None = None,
        server_request_handler: RequestHandler = decline_agent_request,
        client_name: str = "peerwire",
        client_version: str = "0",
        timeout: float = DEFAULT_REQUEST_TIMEOUT,
    ) -> AcpClient:
        """Spawn the agent's ACP command and complete ``initialize``.

        ``env`` overlays the current environment; a value of ``None`` removes
        that variable (so a setting of the app's own environment cannot leak
        into the agent's private home). The transcript keeps no credential
        (:func:`redact_credentials`). If the handshake fails the child is
        closed and the error re-raised.
        """
        child_env = dict(os.environ)
        for key, value in (env or {}).items():
            if value is None:
                child_env.pop(key, None)
            else:
                child_env[key] = value
        process = await spawn(list(command), cwd=cwd, env=child_env)
        client = cls(process, transcript=Transcript(transcript_path, redact=redact_credentials),
                     server_request_handler=server_request_handler, stderr_path=stderr_path)
        try:
            client.initialize_result = await client.request("initialize", {
                "protocolVersion": PROTOCOL_VERSION,
                "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False},
                "clientInfo": {"name": client_name, "version": client_version},
            }, timeout=timeout)
        except BaseException:
            await client.close()
            raise
        return client

    async def __aenter__(self) -> AcpClient:
        return self

    async def session_new(self, cwd: str, mcp_servers: Sequence[Mapping[str, Any]], *,
                          timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[str, Any]:
        """``session/new``: a new conversation in ``cwd`` with these MCP servers (``result["sessionId"]``)."""
        return await self.request("session/new", {"cwd": cwd, "mcpServers": [dict(s) for s in mcp_servers]},
                                  timeout=timeout)

    async def session_load(self, session_id: str, cwd: str, mcp_servers: Sequence[Mapping[str, Any]], *,
                           timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[str, Any]:
        """``session/load`` of a known session (capability ``loadSession``): the agent replays its history as
        ``session/update`` notifications before answering."""
        return await self.request("session/load", {"sessionId": session_id, "cwd": cwd,
                                                   "mcpServers": [dict(s) for s in mcp_servers]}, timeout=timeout)

    async def session_prompt(self, session_id: str, prompt: Sequence[Mapping[str, Any]], *,
                             message_id: str | None = None, sent: Any = None,
                             timeout: float | None = None) -> dict[str, Any]:
        """``session/prompt``: one turn. The answer (``stopReason``) comes when the turn has ended.

        ``message_id`` names the user message (the agent echoes it as
        ``userMessageId``); ``sent`` (an ``asyncio.Event``) is set as soon as the
        request is written. No bound by default: a turn takes what it takes.
        """
        params: dict[str, Any] = {"sessionId": session_id, "prompt": [dict(block) for block in prompt]}
        if message_id is not None:
            params["messageId"] = message_id
        return await self.request("session/prompt", params, timeout=timeout, sent=sent)

    async def session_cancel(self, session_id: str) -> None:
        """``session/cancel`` (a notification): the running turn ends, its prompt answered ``cancelled``."""
        await self.notify("session/cancel", {"sessionId": session_id})
