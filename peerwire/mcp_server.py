"""``peerwire mcp serve``: the MCP server a Codex agent launches.

Newline-delimited JSON-RPC 2.0 on stdio. Framing and protocol errors are
handled here; every tool call is validated against the contract and forwarded
to the app named by ``PEERWIRE_HOME`` as the caller named by
``PEERWIRE_SESSION_ID``. Only JSON-RPC lines ever reach stdout; logs go to
stderr. ``initialize`` and ``tools/list`` need no home and no app.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any

from . import __version__, collab, contract
from .control import ControlClient
from .errors import Code, PeerwireError
from .home import HOME_ENV, SESSION_ENV, Home

log = logging.getLogger("peerwire.mcp")

PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

_WAITING_TOOLS = ("receive_messages", "wait_agent")


class ProtocolError(Exception):
    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


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
            turn = json.loads(turn)
        except ValueError:
            turn = None
    if isinstance(turn, dict):
        out["turn"] = {k: v for k, v in turn.items() if isinstance(v, (str, int, float))}
    return out


class McpServer:
    """One MCP session on a pair of byte streams."""

    def __init__(self, stdin: IO[bytes], stdout: IO[bytes], env: dict[str, str] | None = None,
                 profile: str = "messaging"):
        self.profile = profile
        self.order = contract.PROFILES[profile][1]
        self.stdin = stdin
        self.stdout = stdout
        self.env = dict(os.environ if env is None else env)
        self._write_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="tool")

    # -- framing --------------------------------------------------------------

    def serve(self) -> int:
        try:
            for raw in self.stdin:
                self.handle_line(raw)
        finally:
            self._pool.shutdown(wait=True)
        return 0

    def handle_line(self, raw: bytes) -> None:
        line = raw.strip()
        if not line:
            return
        try:
            message = json.loads(line)
        except (ValueError, UnicodeDecodeError) as exc:
            self._error(None, PARSE_ERROR, f"Parse error: {exc}")
            return
        except RecursionError:  # deeply nested input must not take the server down
            self._error(None, PARSE_ERROR, "Parse error: nested too deeply")
            return
        if isinstance(message, list):
            self._error(None, INVALID_REQUEST, "Invalid Request: batches are not supported")
            return
        if not isinstance(message, dict):
            self._error(None, INVALID_REQUEST, "Invalid Request: a message is a JSON object")
            return
        if "method" not in message and ("result" in message or "error" in message):
            return  # a response to a request we never send; nothing to answer
        is_notification = "id" not in message
        msg_id = message.get("id")
        if not is_notification and (isinstance(msg_id, bool) or not isinstance(msg_id, (str, int))):
            self._error(None, INVALID_REQUEST, "Invalid Request: id must be a string or an integer")
            return
        if message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str):
            if not is_notification:
                self._error(msg_id, INVALID_REQUEST, 'Invalid Request: needs "jsonrpc": "2.0" and a method')
            return
        if is_notification:
            return  # notifications/initialized, notifications/cancelled, ...: nothing to answer
        method = message["method"]
        params = message.get("params", {})
        if params is None:
            params = {}
        if not isinstance(params, dict):
            self._error(msg_id, INVALID_PARAMS, "Invalid params: params must be an object")
            return
        if method == "tools/call":
            # Tool calls may wait up to a minute; serve them off the reading thread.
            self._pool.submit(self._answer, msg_id, method, params)
        else:
            self._answer(msg_id, method, params)

    def _answer(self, msg_id: Any, method: str, params: dict[str, Any]) -> None:
        try:
            result = self.dispatch(method, params)
        except ProtocolError as exc:
            self._error(msg_id, exc.code, exc.message, exc.data)
            return
        except Exception as exc:  # never let one call take the server down
            log.exception("internal error in %s", method)
            self._error(msg_id, INTERNAL_ERROR, f"Internal error: {type(exc).__name__}")
            return
        self._send({"jsonrpc": "2.0", "id": msg_id, "result": result})

    def _send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
        with self._write_lock:
            self.stdout.write(data)
            self.stdout.flush()

    def _error(self, msg_id: Any, code: int, message: str, data: Any = None) -> None:
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        self._send({"jsonrpc": "2.0", "id": msg_id, "error": error})

    # -- methods ----------------------------------------------------------------

    def dispatch(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "initialize":
            return self.initialize(params)
        if method == "ping":
            return {}
        if method == "tools/list":
            return {"tools": list(contract.tools(self.profile))}
        if method == "tools/call":
            return self.call_tool(params)
        raise ProtocolError(METHOD_NOT_FOUND, f"Method not found: {method}")

    def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        requested = params.get("protocolVersion")
        version = requested if requested in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "peerwire", "title": "peerwire messaging", "version": __version__},
            "instructions": (
                "Peer messaging between agents. send_message shares information; followup_task assigns "
                "work and returns a request_id; the assignee answers with reply; wait_agent and "
                "receive_messages collect what arrives."
            ),
        }

    def call_tool(self, params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("name")
        if not isinstance(name, str):
            raise ProtocolError(INVALID_PARAMS, "Invalid params: tools/call needs a tool name")
        if name not in self.order:
            raise ProtocolError(INVALID_PARAMS, f"Unknown tool: {name}")
        arguments = params.get("arguments", {})
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ProtocolError(INVALID_PARAMS, "Invalid params: arguments must be an object")
        try:
            contract.validate_arguments(name, arguments, self.profile)
            client = self._client()
            if self.profile == "collab":
                wait_s = collab.wait_timeout_ms(arguments.get("timeout_ms")) / 1000 if name == "wait_agent" else 0.0
                op = f"collab.{name}"
            else:
                wait_s = arguments.get("timeout_ms", 60_000 if name == "wait_agent" else 0) / 1000 \
                    if name in _WAITING_TOOLS else 0.0
                op = name
            result = client.call(op, arguments, meta=call_meta(params), wait_s=wait_s)
        except PeerwireError as exc:
            return tool_error(exc)
        return tool_result(result)

    def _client(self) -> ControlClient:
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
        return ControlClient(Home.from_env(home), token)


def serve_stdio(profile: str = "messaging") -> int:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="peerwire mcp: %(levelname)s %(message)s")
    return McpServer(sys.stdin.buffer, sys.stdout.buffer, profile=profile).serve()
