"""An MCP stdio server that answers every line as JSON-RPC 2.0 and MCP 2025-11-25 say, and nothing more.

No SDK: one JSON value a line, read strictly (UTF-8, no NaN, no duplicate
guessing), each request answered with its own id, anything whose id cannot be
read answered with an error whose id is null or, where the negotiated revision
allows it (MCP 2025-11-25), left out. Batches are received under 2025-03-26,
the one revision that has them, and refused under the others. The protocol
profile's verdict on it is pinned in ``test_spec_exact_server.py``: every
protocol MUST passes, whichever legal form it answers in.

    --missing-id null|omit   the id of an error whose request id cannot be read
    --batch array|lines      a batch's answers in one array, or one line each
"""

from __future__ import annotations

import argparse
import json
import sys

REVISIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
TOOL = {"name": "echo", "description": "Returns its text.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}


def _no_constant(token: str) -> None:
    raise ValueError(f"{token} is not JSON")


class Session:
    def __init__(self, missing_id: str):
        self.missing_id = missing_id
        self.revision: str | None = None

    def error(self, msg_id, code: int, message: str) -> dict:
        answer = {"jsonrpc": "2.0", "error": {"code": code, "message": message}}
        unreadable = msg_id is None
        if not (unreadable and self.missing_id == "omit" and (self.revision or REVISIONS[-1]) >= "2025-11-25"):
            answer["id"] = msg_id
        return answer

    def handle(self, message) -> dict | None:
        """The answer to one message, or None (a notification, or a response to nothing this server sent)."""
        if not isinstance(message, dict):
            return self.error(None, -32600, "Invalid Request: not an object")
        msg_id = message.get("id")
        readable = "id" in message and isinstance(msg_id, (int, str)) and not isinstance(msg_id, bool) \
            and not (isinstance(msg_id, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in msg_id))
        method = message.get("method")
        if message.get("jsonrpc") != "2.0" or not isinstance(method, str):
            if "method" not in message and ("result" in message or "error" in message):
                return None
            return self.error(msg_id if readable else None, -32600, "Invalid Request")
        if "id" not in message:
            return None  # a notification is never answered
        if not readable:
            return self.error(None, -32600, "Invalid Request: the id is not a string or an integer")
        params = message.get("params", {})
        if not isinstance(params, dict):
            return self.error(msg_id, -32602, "Invalid params: params must be an object")
        if method == "initialize":
            asked = params.get("protocolVersion")
            if not isinstance(asked, str):
                return self.error(msg_id, -32602, "Invalid params: protocolVersion must be a string")
            if self.revision is None:
                self.revision = asked if asked in REVISIONS else REVISIONS[-1]
            return {"jsonrpc": "2.0", "id": msg_id, "result": {
                "protocolVersion": self.revision, "capabilities": {"tools": {}},
                "serverInfo": {"name": "spec-exact", "version": "1"}}}
        if method == "ping":
            return {"jsonrpc": "2.0", "id": msg_id, "result": {}}
        if method == "tools/list":
            if "cursor" in params and not isinstance(params["cursor"], str):
                return self.error(msg_id, -32602, "Invalid params: cursor must be a string")
            return {"jsonrpc": "2.0", "id": msg_id, "result": {"tools": [TOOL]}}
        if method == "tools/call":
            args = params.get("arguments", {})
            if params.get("name") != TOOL["name"] or not isinstance(args, dict) or not isinstance(args.get("text"),
                                                                                                  str):
                return self.error(msg_id, -32602, f"Invalid params: no such tool, or bad arguments: {params}")
            return {"jsonrpc": "2.0", "id": msg_id, "result": {"content": [{"type": "text", "text": args["text"]}]}}
        return self.error(msg_id, -32601, f"Method not found: {method}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--missing-id", choices=("null", "omit"), default="null")
    parser.add_argument("--batch", choices=("array", "lines"), default="array")
    options = parser.parse_args()
    session = Session(options.missing_id)
    out = sys.stdout.buffer

    def write(answer) -> None:
        out.write(json.dumps(answer, separators=(",", ":")).encode() + b"\n")

    for raw in sys.stdin.buffer:
        if not raw.strip():
            continue
        try:
            message = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
        except (ValueError, RecursionError):
            write(session.error(None, -32700, "Parse error"))
            out.flush()
            continue
        if isinstance(message, list) and message and session.revision == "2025-03-26":
            answers = [a for a in (session.handle(m) for m in message) if a is not None]
            if answers and options.batch == "array":
                write(answers)
            for answer in answers if options.batch == "lines" else ():
                write(answer)
        elif isinstance(message, list):
            write(session.error(None, -32600, "Invalid Request: an empty batch, or a batch this revision lacks"))
        else:
            answer = session.handle(message)
            if answer is not None:
                write(answer)
        out.flush()


if __name__ == "__main__":
    main()
