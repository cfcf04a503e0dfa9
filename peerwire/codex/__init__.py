"""The Codex provider: automatic delivery into Codex agents through `codex app-server`.

* :mod:`.app_server` — the wire: the JSON-RPC client of one app-server process,
  and the session Protocol a recorded or scripted exchange also speaks;
* :mod:`.adapter` — :class:`~.adapter.CodexProvider`, the app's provider: owners,
  dispatch, steering, injection, turn outcomes;
* :mod:`.outcome` — what a finished turn means for its bound tasks (pure rules);
* :mod:`.capabilities` and :mod:`.surface` — what each Codex version offers, and the
  part of the protocol peerwire depends on, as data.

The package exports the wire (the names below); what a task, a claim or a reply
means stays in the core's store and lifecycle tables.
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
