"""A deliberately broken MCP server: the reference behind a wrapper that breaks one rule.

    python mutant_server.py MUTATION -- SERVER_CMD...

The wrapper starts SERVER_CMD, relays newline-delimited JSON-RPC between its
own stdio and the server's, and applies one mutation on the way. The contract
suite must notice each one; ``test_mutants.py`` checks that it fails exactly
the requirement the mutation breaks. Standard library only, so it starts fast.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import unicodedata
from typing import Any, Callable

SPOOF_KEYS = ("sender", "from")


class Relay:
    """Relays messages both ways; mutations see each request and each response."""

    def __init__(self, argv: list[str]):
        self.server = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.tools: dict[str, str] = {}  # JSON id -> tool name of a pending tools/call
        self.out_lock = threading.Lock()

    def to_client(self, message: Any) -> None:
        self.write(sys.stdout.buffer, message)

    def to_server(self, message: Any) -> None:
        assert self.server.stdin is not None
        self.write(self.server.stdin, message)

    def write(self, stream, message: Any) -> None:
        data = message if isinstance(message, bytes) else json.dumps(message, ensure_ascii=False).encode("utf-8")
        with self.out_lock:
            stream.write(data.rstrip(b"\n") + b"\n")
            stream.flush()


def _arguments(message: dict) -> dict | None:
    if message.get("method") != "tools/call":
        return None
    params = message.get("params")
    arguments = params.get("arguments") if isinstance(params, dict) else None
    return arguments if isinstance(arguments, dict) else None


def _structured(message: dict) -> dict | None:
    result = message.get("result")
    if isinstance(result, dict) and isinstance(result.get("structuredContent"), dict):
        return result["structuredContent"]
    return None


def _set_structured(message: dict, structured: dict) -> None:
    message["result"]["structuredContent"] = structured
    message["result"]["content"] = [{"type": "text", "text": json.dumps(structured, ensure_ascii=False)}]


# -- mutations: (relay, message) -> message to pass on, or None to drop ------------------

def unicode_rewritten(relay: Relay, request: dict) -> dict:
    """Normalises message text (NFKC) and line breaks before the server sees it."""
    arguments = _arguments(request)
    if arguments and isinstance(arguments.get("message"), str):
        text = unicodedata.normalize("NFKC", arguments["message"])
        arguments["message"] = text.replace("\r\n", "\n").replace("\r", "\n")
    return request


def sender_honoured(relay: Relay, request: dict) -> dict:
    """Accepts a sender/from argument (silently dropping it) instead of rejecting the call."""
    arguments = _arguments(request)
    if arguments:
        for key in SPOOF_KEYS:
            arguments.pop(key, None)
    return request


def notification_answered(relay: Relay, request: dict) -> dict:
    """Answers every notification with an empty result."""
    if isinstance(request, dict) and "method" in request and "id" not in request:
        relay.to_client({"jsonrpc": "2.0", "id": None, "result": {}})
    return request


def limit_ignored(relay: Relay, request: dict) -> dict:
    """Drops receive_messages' limit: every read returns everything, any limit is accepted."""
    arguments = _arguments(request)
    if arguments and request["params"].get("name") == "receive_messages":
        arguments.pop("limit", None)
    return request


def ack_ignored(relay: Relay, request: dict) -> dict:
    """Drops receive_messages' ack_cursor: nothing is ever acknowledged."""
    arguments = _arguments(request)
    if arguments and request["params"].get("name") == "receive_messages":
        arguments.pop("ack_cursor", None)
    return request


def task_exposed_twice(relay: Relay, response: dict, tool: str | None) -> dict:
    """Lists every task record a read returns as new work, not only newly claimed ones."""
    structured = _structured(response)
    if tool == "receive_messages" and structured is not None and "records" in structured:
        structured["new_work"] = [r["request_id"] for r in structured["records"] if r.get("kind") == "task"]
        _set_structured(response, structured)
    return response


def is_error_dropped(relay: Relay, response: dict, tool: str | None) -> dict:
    """Drops isError from tool errors: a failure looks like a success."""
    result = response.get("result")
    if isinstance(result, dict) and result.get("isError") is True:
        del result["isError"]
    return response


REQUEST_MUTATIONS: dict[str, Callable[[Relay, dict], dict]] = {
    "unicode": unicode_rewritten,
    "sender-honoured": sender_honoured,
    "notification-answered": notification_answered,
    "limit-ignored": limit_ignored,
    "ack-ignored": ack_ignored,
}
RESPONSE_MUTATIONS: dict[str, Callable[[Relay, dict, str | None], dict]] = {
    "task-twice": task_exposed_twice,
    "no-iserror": is_error_dropped,
}
STARTUP_MUTATIONS = {"stdout-log"}
MUTATIONS = sorted(set(REQUEST_MUTATIONS) | set(RESPONSE_MUTATIONS) | STARTUP_MUTATIONS)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[0] not in MUTATIONS or argv[1] != "--":
        sys.stderr.write(f"usage: mutant_server.py {{{','.join(MUTATIONS)}}} -- SERVER_CMD...\n")
        return 2
    mutation, server_argv = argv[0], argv[2:]
    relay = Relay(server_argv)
    if mutation in STARTUP_MUTATIONS:
        relay.to_client(b"mutant server: starting up (a log line on stdout)")
    mutate_request = REQUEST_MUTATIONS.get(mutation)
    mutate_response = RESPONSE_MUTATIONS.get(mutation)

    def server_to_client() -> None:
        assert relay.server.stdout is not None
        for raw in relay.server.stdout:
            try:
                message = json.loads(raw)
            except ValueError:
                relay.to_client(raw)
                continue
            tool = relay.tools.pop(json.dumps(message.get("id")), None) if isinstance(message, dict) else None
            if mutate_response is not None and isinstance(message, dict):
                message = mutate_response(relay, message, tool)
            relay.to_client(message)

    pump = threading.Thread(target=server_to_client, daemon=True)
    pump.start()
    for raw in sys.stdin.buffer:
        try:
            message = json.loads(raw)
        except (ValueError, RecursionError):
            relay.to_server(raw)
            continue
        if isinstance(message, dict) and message.get("method") == "tools/call" and "id" in message:
            params = message.get("params")
            if isinstance(params, dict):
                relay.tools[json.dumps(message["id"])] = params.get("name")
        if mutate_request is not None and isinstance(message, dict):
            message = mutate_request(relay, message)
        relay.to_server(message)
    assert relay.server.stdin is not None
    relay.server.stdin.close()
    pump.join()
    return relay.server.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
