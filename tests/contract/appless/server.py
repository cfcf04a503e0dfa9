"""The MCP server of a core with no app: ``python server.py [--mutant NAME]``, one process per session.

It reads ``APPLESS_HOME`` (the shared store's folder) and ``APPLESS_TOKEN``
(the caller's credential) from its environment, serves newline-delimited
JSON-RPC on stdio, and answers each tools/call on a thread of its own, so a
long wait never holds up a cheap call. Waits poll the store: each poll is a
new read, so a record another process commits during the wait is seen (the
planted ``snapshot-wait`` bug reads one snapshot for the whole wait). The tool
schemas it advertises are ``contracts/tools`` with their references to
``definitions.json`` bundled in. Written from ``contracts/`` alone.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

from jsonschema import Draft202012Validator

sys.path.insert(0, str(Path(__file__).resolve().parent))
from store import MUTANTS, Refused, Store  # noqa: E402

CONTRACTS = Path(__file__).resolve().parents[3] / "contracts"
REVISIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
POLL_S = 0.02
LOST_WINDOW_S = 0.05
BODY_BYTES = 65536


def _bundle(schema, defs: dict) -> dict:
    text = json.dumps(schema).replace('"definitions.json#/$defs/', '"#/$defs/')
    bundled = json.loads(text)
    local = json.loads(json.dumps(defs).replace('"#/$defs/', '"#/$defs/'))
    return {**bundled, "$defs": local}


def load_tools() -> list[dict]:
    defs = json.loads((CONTRACTS / "definitions.json").read_text("utf-8"))["$defs"]
    tools = []
    for path in sorted((CONTRACTS / "tools").glob("*.json")):
        tool = json.loads(path.read_text("utf-8"))
        tools.append({"name": tool["name"], "description": tool["description"],
                      "inputSchema": _bundle(tool["inputSchema"], defs),
                      "outputSchema": _bundle(tool["outputSchema"], defs)})
    return tools


class Session:
    def __init__(self, mutant: str | None):
        self.mutant = mutant
        self.home = os.environ.get("APPLESS_HOME")
        self.token = os.environ.get("APPLESS_TOKEN")
        self.store = Store(self.home, mutant) if self.home and os.path.isdir(self.home) else None
        self.tools = load_tools()
        self.inputs = {t["name"]: Draft202012Validator(t["inputSchema"]) for t in self.tools}
        self.out = threading.Lock()
        self.cancelled: set[str] = set()
        self.revision = REVISIONS[0]

    def write(self, message) -> None:
        data = json.dumps(message, ensure_ascii=False).encode("utf-8", "backslashreplace")
        with self.out:
            sys.stdout.buffer.write(data + b"\n")
            sys.stdout.buffer.flush()

    def error(self, msg_id, code: int, message: str) -> None:
        self.write({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})

    # -- framing ---------------------------------------------------------------------------------

    def line(self, raw: bytes) -> None:
        try:
            message = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
        except (ValueError, RecursionError):
            return self.error(None, -32700, "Parse error: not JSON in UTF-8")
        if isinstance(message, list):
            if self.revision != "2025-03-26" or not message:
                return self.error(None, -32600, f"Invalid Request: no batches under {self.revision}")
            for item in message:
                self.dispatch(item)
            return
        self.dispatch(message)

    def dispatch(self, message) -> None:
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str):
            if isinstance(message, dict) and "method" not in message and ("result" in message or "error" in message):
                return  # a response: nothing asked for it
            return self.error(None, -32600, "Invalid Request")
        if "id" not in message:
            if message["method"] == "notifications/cancelled" and isinstance(message.get("params"), dict):
                self.cancelled.add(json.dumps(message["params"].get("requestId")))
            return
        msg_id = message["id"]
        if isinstance(msg_id, bool) or not isinstance(msg_id, (int, str)) or _lone(msg_id):
            return self.error(None, -32600, "Invalid Request: the id is a string or an integer")
        if _lone(message["method"]):
            return self.error(msg_id, -32601, "Method not found")
        method, params = message["method"], message.get("params", {})
        if method == "initialize":
            asked = params.get("protocolVersion") if isinstance(params, dict) else None
            self.revision = asked if asked in REVISIONS else REVISIONS[0]
            return self.write({"jsonrpc": "2.0", "id": msg_id, "result": {
                "protocolVersion": self.revision, "capabilities": {"tools": {}},
                "serverInfo": {"name": "appless-core", "version": "1"}}})
        if method == "ping":
            return self.write({"jsonrpc": "2.0", "id": msg_id, "result": {}})
        if method == "tools/list":
            return self.write({"jsonrpc": "2.0", "id": msg_id, "result": {"tools": self.tools}})
        if method != "tools/call":
            return self.error(msg_id, -32601, "Method not found")
        if not isinstance(params, dict) or not isinstance(params.get("name"), str) or _lone(params["name"]):
            return self.error(msg_id, -32602, "Invalid params: tools/call needs a tool name")
        if params["name"] not in self.inputs or not isinstance(params.get("arguments", {}), dict):
            return self.error(msg_id, -32602, f"Invalid params: no tool {params['name']!r} or arguments not an object")
        threading.Thread(target=self.call, args=(msg_id, params["name"], params.get("arguments", {})),
                         daemon=True).start()

    def call(self, msg_id, name: str, arguments: dict) -> None:
        try:
            structured, is_error = getattr(self, f"tool_{name}")(self.check(name, arguments)), False
        except Refused as refused:
            structured, is_error = {"error": {"code": refused.code, "message": refused.message}}, True
        except Exception as exc:  # noqa: BLE001 - a store failure is still an answer
            structured, is_error = {"error": {"code": "storage_unavailable", "message": str(exc)}}, True
        if json.dumps(msg_id) in self.cancelled:
            return
        text = json.dumps(structured, ensure_ascii=False)
        self.write({"jsonrpc": "2.0", "id": msg_id, "result": {
            "content": [{"type": "text", "text": text}], "structuredContent": structured, "isError": is_error}})

    def check(self, name: str, arguments: dict) -> dict:
        if "target" in arguments and not isinstance(arguments["target"], str):
            raise Refused("broadcast_not_supported", "one target at a time")
        if _lone(arguments):
            raise Refused("invalid_argument", "an argument holds text that is not Unicode (a lone surrogate)")
        message = arguments.get("message")
        if isinstance(message, str) and len(message.encode("utf-8")) > BODY_BYTES:
            raise Refused("message_too_large", f"message is over {BODY_BYTES} UTF-8 bytes")
        problem = next(iter(self.inputs[name].iter_errors(arguments)), None)
        if problem is not None:
            where = "/".join(map(str, problem.absolute_path)) or "arguments"
            raise Refused("invalid_argument", f"{where}: {problem.message[:200]}")
        if self.store is None:
            raise Refused("app_unavailable", "no store: APPLESS_HOME names no folder")
        return arguments

    # -- tools -----------------------------------------------------------------------------------

    def me(self) -> dict:
        return self.store.caller(self.token)

    def tool_send_message(self, args: dict) -> dict:
        me, to = self.me(), self.store.resolve(args["target"])
        row = self.store.admit("information", me, to, args["message"])
        return {"interaction_id": row["record_id"], "kind": "information", "state": "admitted",
                "recipient": {"agent_id": to["agent_id"], "name": to["name"]}, "created_at": row["created_at"]}

    def tool_followup_task(self, args: dict) -> dict:
        me, to = self.me(), self.store.resolve(args["target"])
        request_id = "rq_" + os.urandom(16).hex()
        row = self.store.admit("task", me, to, args["message"], request_id=request_id)
        return {"interaction_id": row["record_id"], "request_id": request_id, "kind": "task", "state": "admitted",
                "recipient": {"agent_id": to["agent_id"], "name": to["name"]}, "created_at": row["created_at"]}

    def tool_reply(self, args: dict) -> dict:
        me, task = self.me(), self.store.task(args["request_id"])
        if task is None:
            raise Refused("unknown_request", f"no task has request_id {args['request_id']!r}")
        if task["recipient"]["agent_id"] != me["agent_id"]:
            raise Refused("not_authorized", "only the task's recipient replies to it")
        if self.store.replied(args["request_id"]):
            raise Refused("already_replied", "this request has its reply")
        requester = {"agent_id": task["sender"]["agent_id"], "name": task["sender"]["name"]}
        row = self.store.admit("reply", me, requester, args["message"], request_id=args["request_id"],
                               status=args["status"])
        return {"interaction_id": row["record_id"], "request_id": args["request_id"], "kind": "reply",
                "state": "admitted", "status": args["status"], "recipient": requester, "created_at": row["created_at"]}

    def _position(self, me: dict, cursor: str) -> int:
        prefix = f"c.{me['agent_id']}."
        tail = cursor[len(prefix):] if cursor.startswith(prefix) else ""
        if not tail.isdigit() or int(tail) > self.store.latest(me["agent_id"]):
            raise Refused("cursor_invalid", "this cursor was not issued to you")
        return int(tail)

    def tool_receive_messages(self, args: dict) -> dict:
        me = self.me()
        if "ack_cursor" in args:
            self.store.acknowledge(me["agent_id"], self._position(me, args["ack_cursor"]))
        limit, timeout = args.get("limit", 50), args.get("timeout_ms", 0) / 1000
        deadline = time.monotonic() + timeout
        snapshot = self.mutant == "snapshot-wait" and timeout > 0
        with self.store.reading() as db:
            after = self._position(me, args["cursor"]) if "cursor" in args else self.store.acked(db, me["agent_id"])
            if self.mutant == "check-then-subscribe" and timeout > 0 and not self.store.page(db, me["agent_id"],
                                                                                             after, 1)[0]:
                after = self._lost_window(db, me)
            while True:
                records, more = self.store.page(db, me["agent_id"], after, limit)
                if records or time.monotonic() >= deadline:
                    break
                if not snapshot:  # each poll a new read: commits of other sessions become visible
                    db.execute("COMMIT")
                    time.sleep(POLL_S)
                    db.execute("BEGIN DEFERRED")
                else:
                    time.sleep(POLL_S)
        if self.mutant == "empty-wait-cancels" and timeout > 0 and not records:
            self.store.close_claimed(me["agent_id"])
        claims = self.store.claims_for(me["agent_id"], records)
        return {"records": records, "cursor": f"c.{me['agent_id']}.{records[-1]['seq'] if records else after}",
                "has_more": more, "timed_out": not records and timeout > 0,
                "new_work": [c["request_id"] for c in claims], "claims": claims}

    def tool_wait_agent(self, args: dict) -> dict:
        me = self.me()
        timeout = args.get("timeout_ms", 60000) / 1000
        deadline = time.monotonic() + timeout
        with self.store.reading() as db:
            acked = self.store.acked(db, me["agent_id"])
            start = self.store.page(db, me["agent_id"], acked, 100)[0]
            if start:
                return {"woke": True, "timed_out": False, "wake_reason": "unacknowledged_activity",
                        "pending": len(start)}
            if self.mutant == "check-then-subscribe":
                acked = self._lost_window(db, me)
            while time.monotonic() < deadline:
                if self.mutant != "snapshot-wait":
                    db.execute("COMMIT")
                    time.sleep(POLL_S)
                    db.execute("BEGIN DEFERRED")
                else:
                    time.sleep(POLL_S)
                if self.store.page(db, me["agent_id"], acked, 1)[0]:
                    return {"woke": True, "timed_out": False, "wake_reason": "mailbox_activity", "pending": 1}
        return {"woke": False, "timed_out": True, "wake_reason": "timeout", "pending": 0}

    def _lost_window(self, db, me: dict) -> int:
        """The planted ``check-then-subscribe``: a moment between the check and the subscription, then waiting
        only for what is newer than the newest record: whatever was admitted in between never wakes it."""
        db.execute("COMMIT")
        time.sleep(LOST_WINDOW_S)
        db.execute("BEGIN DEFERRED")
        return self.store.latest(me["agent_id"])

    def tool_interrupt_agent(self, args: dict) -> dict:
        self.me()
        target = self.store.resolve(args["target"])
        if target["provider"] == "manual":
            raise Refused("unsupported", f"{target['name']} is a manual agent: it has no turn to interrupt")
        if self.mutant == "interrupt-succeeds":
            return {"target": {"agent_id": target["agent_id"], "name": target["name"]},
                    "previous_status": "idle", "state": "interrupt_requested"}
        raise Refused("not_active", f"{target['name']} has no active turn (this core runs none)")

    def tool_list_agents(self, args: dict) -> dict:
        me = self.me()
        agents = [a for a in self.store.agents() if a["name"].startswith(args.get("name_prefix", ""))
                  and args.get("provider") in (None, a["provider"])]
        return {"agents": [{"name": a["name"], "agent_id": a["agent_id"], "aliases": a["aliases"],
                            "provider": a["provider"], "status": "registered", "sendable": True,
                            "is_caller": a["agent_id"] == me["agent_id"]} for a in agents]}


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _lone(value) -> bool:
    if isinstance(value, str):
        return any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, dict):
        return any(_lone(k) or _lone(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_lone(v) for v in value)
    return False


def main(argv: list[str]) -> int:
    mutant = argv[argv.index("--mutant") + 1] if "--mutant" in argv else None
    if mutant is not None and mutant not in MUTANTS:
        sys.stderr.write(f"--mutant: one of {', '.join(MUTANTS)}\n")
        return 2
    session = Session(mutant)
    for raw in sys.stdin.buffer:
        raw = raw.rstrip(b"\r\n")
        if raw.strip():
            session.line(raw)
    os._exit(0)  # stdin closed: the session ends, and calls still waiting end with it


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
