"""A small MCP messaging server of another surface than the contract's: the sender is an argument and an inbox
is read by name. It is the example binding's server in docs/mailbox-profile.md ("Writing a binding"), and its
verdicts on the mailbox profile are pinned in tests/contract/test_mailbox_profile.py.

Newline-delimited JSON-RPC on stdio, plain Python; its state is a SQLite file (``POSTBOX_DB``), committed before
an answer, so it survives a SIGKILL. Tools: ``join(name)``, ``post(sender, to, text)``, ``inbox(owner)`` (the
owner's unacknowledged letters, oldest first) and ``ack(owner, letter)``.

``POSTBOX_MUTANT`` plants one bug, each a realistic one that exactly one class of the profile's requirements
must catch: ``lossy`` (every fifth post answered but never stored), ``duplicating`` (every fourth post stored
twice), ``newest-first`` (the inbox read newest first), ``nocase`` (recipients looked up ignoring case and
padding) and ``volatile`` (letters kept in memory until the process exits cleanly).
"""

import json
import os
import sqlite3
import sys

MUTANT = os.environ.get("POSTBOX_MUTANT", "")
COUNT = [0]
TOOLS = [
    {"name": "join", "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}},
                                     "required": ["name"]}},
    {"name": "post", "inputSchema": {"type": "object", "required": ["sender", "to", "text"], "properties": {
        "sender": {"type": "string"}, "to": {"type": "string"}, "text": {"type": "string"}}}},
    {"name": "inbox", "inputSchema": {"type": "object", "properties": {"owner": {"type": "string"}},
                                      "required": ["owner"]}},
    {"name": "ack", "inputSchema": {"type": "object", "required": ["owner", "letter"], "properties": {
        "owner": {"type": "string"}, "letter": {"type": "integer"}}}},
]


def tool(db, name, args):
    if name == "join":
        db.execute("INSERT OR IGNORE INTO member(name) VALUES (?)", (args["name"],))
        return {"joined": args["name"]}
    if name == "post":
        to = args["to"]
        if MUTANT == "nocase":
            found = db.execute("SELECT name FROM member WHERE name = TRIM(?) COLLATE NOCASE", (to,)).fetchone()
            to = found[0] if found else to
        if not db.execute("SELECT 1 FROM member WHERE name = ?", (to,)).fetchone():
            raise LookupError(f"no member named {args['to']!r}")
        COUNT[0] += 1
        if MUTANT == "lossy" and COUNT[0] % 5 == 0:
            return {"letter": 10**9 + COUNT[0]}
        cur = db.execute("INSERT INTO letter(sender, owner, text) VALUES (?, ?, ?)", (args["sender"], to, args["text"]))
        if MUTANT == "duplicating" and COUNT[0] % 4 == 0:
            db.execute("INSERT INTO letter(sender, owner, text) VALUES (?, ?, ?)", (args["sender"], to, args["text"]))
        return {"letter": cur.lastrowid}
    if name == "inbox":
        order = "DESC" if MUTANT == "newest-first" else "ASC"
        rows = db.execute(f"SELECT id, sender, text FROM letter WHERE owner = ? AND NOT acked ORDER BY id {order}",
                          (args["owner"],)).fetchall()
        return {"letters": [{"letter": i, "sender": s, "text": t} for i, s, t in rows]}
    if name == "ack":
        db.execute("UPDATE letter SET acked = 1 WHERE id = ? AND owner = ?", (args["letter"], args["owner"]))
        return {"acked": args["letter"]}
    raise LookupError(f"no tool {name!r}")


def answer(db, message):
    method, params = message.get("method"), message.get("params") or {}
    if method == "initialize":
        return {"protocolVersion": params.get("protocolVersion", "2025-06-18"), "capabilities": {"tools": {}},
                "serverInfo": {"name": "postbox", "version": "1.0"}}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        try:
            with db:
                value = tool(db, params.get("name"), params.get("arguments") or {})
            return {"content": [{"type": "text", "text": json.dumps(value)}], "structuredContent": value}
        except (LookupError, KeyError) as exc:
            return {"content": [{"type": "text", "text": str(exc)}], "isError": True,
                    "structuredContent": {"error": str(exc)}}
    if method == "ping":
        return {}
    raise NotImplementedError(method)


def main():
    db = sqlite3.connect(":memory:" if MUTANT == "volatile" else os.environ["POSTBOX_DB"], isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE IF NOT EXISTS member(name TEXT PRIMARY KEY)")
    db.execute("CREATE TABLE IF NOT EXISTS letter(id INTEGER PRIMARY KEY, sender TEXT, owner TEXT, text TEXT,"
               " acked INTEGER NOT NULL DEFAULT 0)")
    db.isolation_level = "DEFERRED"
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            reply = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
        else:
            if not isinstance(message, dict) or "id" not in message:
                continue
            try:
                reply = {"jsonrpc": "2.0", "id": message["id"], "result": answer(db, message)}
            except NotImplementedError as exc:
                reply = {"jsonrpc": "2.0", "id": message["id"],
                         "error": {"code": -32601, "message": f"Method not found: {exc}"}}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
