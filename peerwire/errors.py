"""Machine-readable error codes shared by the app, the CLI and the MCP server.

Every failure a caller can see carries one of these codes and a human message
that says what to do. The same code travels unchanged from the app over the
control socket to an MCP ``isError`` result or a CLI exit status.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class Code(StrEnum):
    INVALID_ARGUMENT = "invalid_argument"
    MESSAGE_TOO_LARGE = "message_too_large"
    UNKNOWN_TARGET = "unknown_target"
    AMBIGUOUS_TARGET = "ambiguous_target"
    BROADCAST_NOT_SUPPORTED = "broadcast_not_supported"
    TARGET_NOT_SENDABLE = "target_not_sendable"
    UNKNOWN_PROVIDER = "unknown_provider"
    UNKNOWN_CALLER = "unknown_caller"
    APP_UNAVAILABLE = "app_unavailable"
    APP_NOT_RESPONDING = "app_not_responding"
    NOT_AUTHORIZED = "not_authorized"
    UNKNOWN_REQUEST = "unknown_request"
    UNKNOWN_INTERACTION = "unknown_interaction"
    ALREADY_REPLIED = "already_replied"
    CURSOR_INVALID = "cursor_invalid"
    NOT_ACTIVE = "not_active"
    UNSUPPORTED = "unsupported"
    LIMIT_EXCEEDED = "limit_exceeded"
    TOO_MANY_WAITERS = "too_many_waiters"
    TOO_MANY_CONNECTIONS = "too_many_connections"
    HOME_LOCKED = "home_locked"
    HOME_MISSING = "home_missing"
    HOME_INVALID = "home_invalid"
    STORE_DAMAGED = "store_damaged"
    STORAGE_UNAVAILABLE = "storage_unavailable"
    ILLEGAL_TRANSITION = "illegal_transition"
    INTERNAL = "internal"


EXIT_STATUS: dict[Code, int] = {
    Code.HOME_LOCKED: 3,
    Code.HOME_INVALID: 4,
    Code.STORE_DAMAGED: 5,
}
"""Exit statuses of ``peerwire app`` and the CLI for failures of the local state.

Distinct from an ordinary error (1 for the CLI, 2 for the app), so a script or
supervisor can tell "fix the home" from "the call was refused".
"""


class PeerwireError(Exception):
    """A failure with a stable code, a human message and optional details."""

    def __init__(self, code: Code | str, message: str, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.code = Code(code)
        self.message = message
        self.details = details or {}

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code.value, "message": self.message}
        if self.details:
            out["details"] = self.details
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PeerwireError":
        code = data.get("code", Code.INTERNAL.value)
        try:
            code = Code(code)
        except ValueError:
            code = Code.INTERNAL
        return cls(code, str(data.get("message", "")), data.get("details") or None)

    def __repr__(self) -> str:
        return f"PeerwireError({self.code.value!r}, {self.message!r})"
