"""MCP sessions over stdio for bindings: one server process per session, tool calls with a bound wait."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from ..endpoints import RawEndpoint

CALL_S = 60.0
"""How long one tool call may take (a foreign server may be slow; the profile's own waits are separate)."""
STARTUP_S = 120.0


class ToolError(Exception):
    """A call that got no answer, or a protocol error instead of a tool result."""


class Session:
    """One MCP session: ``call`` returns ``(is_error, structured or text content)``."""

    def __init__(self, argv: Sequence[str], env: dict[str, str], stderr: Path):
        self.endpoint = RawEndpoint.open(argv, env, stderr=stderr)
        self.server_info = (self.endpoint.handshake(STARTUP_S).get("result") or {}).get("serverInfo") or {}

    @property
    def pid(self) -> int:
        return self.endpoint.server.process.pid

    def call(self, tool: str, arguments: dict[str, Any], *, timeout_s: float = CALL_S) -> tuple[bool, Any]:
        outcome = self.endpoint.call_tool(tool, arguments, timeout=timeout_s).outcome(timeout_s)
        if outcome.response is None:
            raise ToolError(f"{tool}: no answer ({outcome.failure or 'timed out'})")
        if outcome.protocol_error is not None:
            return True, {"protocol_error": outcome.protocol_error}
        result = outcome.result or {}
        value = result.get("structuredContent")
        if value is None:
            texts = [c.get("text", "") for c in result.get("content") or [] if c.get("type") == "text"]
            try:
                value = json.loads("".join(texts)) if texts else None
            except ValueError:
                value = "".join(texts)
        return bool(result.get("isError")), value

    def exchange(self, limit: int = 20) -> list[dict[str, Any]]:
        return self.endpoint.server.exchange(limit=limit)

    def close(self) -> None:
        self.endpoint.close()


def error_text(value: Any) -> str:
    """A tool error's code or text, for a report."""
    if isinstance(value, dict):
        error = value.get("error") or value.get("protocol_error")
        if isinstance(error, dict):
            return str(error.get("code", "")) + (f": {error.get('message')}" if error.get("message") else "")
        if error:
            return str(error)
    return json.dumps(value, ensure_ascii=False)[:300] if not isinstance(value, str) else value[:300]
