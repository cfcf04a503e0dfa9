"""Codex provider transport: the `codex app-server` JSON-RPC client.

Only the wire lives here; what a task, a claim or a reply means stays in the core.
"""

from peerwire.codex.app_server import (
    AppServerClient,
    AppServerError,
    AppServerExited,
    JsonRpcError,
    Notification,
    ServerRequest,
    Transcript,
    decline_server_request,
    text_input,
)

__all__ = [
    "AppServerClient",
    "AppServerError",
    "AppServerExited",
    "JsonRpcError",
    "Notification",
    "ServerRequest",
    "Transcript",
    "decline_server_request",
    "text_input",
]
