"""The shared SQLite store of a core with no app: every session's server process opens it itself.

Written from ``contracts/`` alone, importing nothing of peerwire's: it proves
that a design the reference does not share can pass the contract, and that
the suite's provisioner vocabulary fits it. A mailbox is the ``records``
table in ``seq`` order; a cursor is ``c.<recipient>.<seq>``; a task's claim is
a row of ``claims``, made the first time a read lists it. Each admission is
one ``BEGIN IMMEDIATE`` transaction that takes the next ``seq`` and writes the
record, committed with ``synchronous=FULL`` before the receipt is returned.

Planted bugs (``MUTANTS``), one per run, for the suite to catch:
``seq-outside-transaction`` takes the sequence number in a transaction of its
own before writing the record; ``ack-before-commit`` returns the receipt and
leaves the write to a thread that commits a moment later;
``prefix-routing`` finds a reader's mailbox by name with ``LIKE name%``;
``empty-wait-cancels`` closes the caller's claimed tasks when a receive's timed
wait ends empty; ``check-then-subscribe`` (the server's) checks the mailbox,
then starts waiting from the newest record, a moment later.
"""

from __future__ import annotations

import json
import os
import queue
import random
import secrets
import sqlite3
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone

DB_NAME = "mailbox.db"
MUTANTS = ("seq-outside-transaction", "ack-before-commit", "snapshot-wait", "case-insensitive-targets",
           "interrupt-succeeds", "prefix-routing", "empty-wait-cancels", "check-then-subscribe")

SCHEMA = """
CREATE TABLE IF NOT EXISTS agents (agent_id TEXT PRIMARY KEY, name TEXT NOT NULL, aliases TEXT NOT NULL,
    provider TEXT NOT NULL, token TEXT UNIQUE NOT NULL, registered REAL NOT NULL);
CREATE TABLE IF NOT EXISTS records (seq INTEGER PRIMARY KEY, record_id TEXT UNIQUE NOT NULL, kind TEXT NOT NULL,
    sender_id TEXT, sender_name TEXT NOT NULL, recipient_id TEXT NOT NULL, recipient_name TEXT NOT NULL,
    body TEXT NOT NULL, created_at TEXT NOT NULL, request_id TEXT, status TEXT);
CREATE INDEX IF NOT EXISTS records_by_recipient ON records (recipient_id, seq);
CREATE TABLE IF NOT EXISTS counter (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS acks (agent_id TEXT PRIMARY KEY, seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS claims (request_id TEXT PRIMARY KEY, claim_id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS closed (request_id TEXT PRIMARY KEY);
"""


class Refused(Exception):
    """A tool error: a contract code and a message."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code, self.message = code, message


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def connect(home: str) -> sqlite3.Connection:
    db = sqlite3.connect(os.path.join(home, DB_NAME), timeout=30, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("PRAGMA busy_timeout=30000")
    return db


def create(home: str) -> None:
    os.makedirs(home, exist_ok=True)
    with connect(home) as db:
        db.executescript(SCHEMA)
        db.execute("INSERT OR IGNORE INTO counter VALUES ('seq', 0)")


def register(home: str, name: str, provider: str, aliases: tuple[str, ...]) -> tuple[str, str]:
    agent_id, token = str(__import__("uuid").uuid4()), secrets.token_urlsafe(24)
    db = connect(home)
    db.execute("INSERT INTO agents VALUES (?, ?, ?, ?, ?, ?)",
               (agent_id, name, json.dumps(list(aliases)), provider, token, time.time()))
    db.close()
    return agent_id, token


class Store:
    """One session's view of the shared store (its own connection; calls run on threads, one lock)."""

    def __init__(self, home: str, mutant: str | None = None):
        self.home = home
        self.db = connect(home)
        self.lock = threading.RLock()
        self.mutant = mutant
        self.writes: queue.Queue | None = None
        if mutant == "ack-before-commit":
            self.writes = queue.Queue()
            threading.Thread(target=self._flush, daemon=True).start()

    @contextmanager
    def transaction(self, kind: str = "IMMEDIATE"):
        with self.lock:
            self.db.execute(f"BEGIN {kind}")
            try:
                yield self.db
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")

    @contextmanager
    def reading(self):
        """A read transaction on a connection of its own, so a long wait holds up none of the session's calls."""
        db = connect(self.home)
        try:
            db.execute("BEGIN DEFERRED")
            yield db
            db.execute("COMMIT")
        finally:
            db.close()

    # -- agents ----------------------------------------------------------------------------------

    def caller(self, token: str | None) -> dict:
        with self.lock:
            row = self.db.execute("SELECT agent_id, name, aliases, provider FROM agents WHERE token = ?",
                                  (token or "",)).fetchone()
        if row is None:
            raise Refused("unknown_caller", "this session's credential names no registered agent")
        return self._agent(row)

    @staticmethod
    def _agent(row) -> dict:
        return {"agent_id": row[0], "name": row[1], "aliases": json.loads(row[2]), "provider": row[3]}

    def agents(self) -> list[dict]:
        with self.lock:
            rows = self.db.execute("SELECT agent_id, name, aliases, provider FROM agents ORDER BY registered").fetchall()
        return [self._agent(r) for r in rows]

    def resolve(self, target) -> dict:
        if not isinstance(target, str) or target in ("*", "all"):
            raise Refused("broadcast_not_supported", "one target at a time: a name, an alias or an agent_id")
        fold = (lambda s: s.lower()) if self.mutant == "case-insensitive-targets" else (lambda s: s)
        found = [a for a in self.agents() if fold(target) in {fold(a["name"]), fold(a["agent_id"]),
                                                              *map(fold, a["aliases"])}]
        if not found:
            raise Refused("unknown_target", f"no agent is named {target!r}")
        if len(found) > 1:
            raise Refused("ambiguous_target", f"{len(found)} agents answer to {target!r}: use an agent_id")
        return found[0]

    # -- admission ---------------------------------------------------------------------------------

    def admit(self, kind: str, sender: dict | None, recipient: dict, body: str, request_id: str | None = None,
              status: str | None = None) -> dict:
        row = {"record_id": "ix_" + secrets.token_hex(16), "kind": kind,
               "sender_id": sender["agent_id"] if sender else None, "sender_name": sender["name"] if sender else "",
               "recipient_id": recipient["agent_id"], "recipient_name": recipient["name"], "body": body,
               "created_at": now(), "request_id": request_id, "status": status}
        if self.writes is not None:
            self.writes.put(row)  # the planted bug: the receipt goes out before anything is written
            return row
        if self.mutant == "seq-outside-transaction":
            with self.transaction() as db:  # the planted bug: the number is taken and committed on its own
                seq = db.execute("UPDATE counter SET value = value + 1 WHERE name = 'seq' RETURNING value").fetchone()[0]
            time.sleep(random.uniform(0, 0.004))  # the rest of the admission's work
            with self.transaction() as db:
                self._insert(db, seq, row)
            return row
        with self.transaction() as db:
            seq = db.execute("UPDATE counter SET value = value + 1 WHERE name = 'seq' RETURNING value").fetchone()[0]
            self._insert(db, seq, row)
        return row

    @staticmethod
    def _insert(db, seq: int, row: dict) -> None:
        db.execute("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (seq, row["record_id"], row["kind"], row["sender_id"], row["sender_name"], row["recipient_id"],
                    row["recipient_name"], row["body"], row["created_at"], row["request_id"], row["status"]))

    def _flush(self) -> None:
        while True:
            batch = [self.writes.get()]
            time.sleep(0.2)
            while not self.writes.empty():
                batch.append(self.writes.get())
            with self.transaction() as db:
                for row in batch:
                    seq = db.execute("UPDATE counter SET value = value + 1 WHERE name = 'seq' "
                                     "RETURNING value").fetchone()[0]
                    self._insert(db, seq, row)

    # -- reading -----------------------------------------------------------------------------------

    def page(self, db, recipient: str, after: int, limit: int) -> tuple[list[dict], bool]:
        mailbox = "recipient_id = ?" if self.mutant != "prefix-routing" else (
            "recipient_id IN (SELECT agent_id FROM agents WHERE name LIKE "
            "(SELECT name FROM agents WHERE agent_id = ?) || '%')")
        rows = db.execute("SELECT seq, record_id, kind, sender_id, sender_name, recipient_id, recipient_name, body, "
                          f"created_at, request_id, status FROM records WHERE {mailbox} AND seq > ? "
                          "ORDER BY seq LIMIT ?", (recipient, after, limit + 1)).fetchall()
        return [self._record(r) for r in rows[:limit]], len(rows) > limit

    @staticmethod
    def _record(r) -> dict:
        out = {"record_id": r[1], "kind": r[2], "seq": r[0], "sender": {"agent_id": r[3], "name": r[4]},
               "recipient": {"agent_id": r[5], "name": r[6]}, "body": r[7], "created_at": r[8]}
        if r[9]:
            out["request_id"] = r[9]
        if r[10]:
            out["status"] = r[10]
        return out

    def acked(self, db, agent_id: str) -> int:
        row = db.execute("SELECT seq FROM acks WHERE agent_id = ?", (agent_id,)).fetchone()
        return row[0] if row else 0

    def acknowledge(self, agent_id: str, seq: int) -> None:
        with self.transaction() as db:
            db.execute("INSERT INTO acks VALUES (?, ?) ON CONFLICT(agent_id) DO UPDATE SET seq = max(seq, excluded.seq)",
                       (agent_id, seq))

    def claims_for(self, agent_id: str, records: list[dict]) -> list[dict]:
        """A claim for each task of ``records`` not acknowledged past and not replied to; made once, kept."""
        with self.transaction() as db:
            acked = self.acked(db, agent_id)
            out = []
            for record in records:
                if record["kind"] != "task" or record["seq"] <= acked:
                    continue
                rq = record["request_id"]
                if db.execute("SELECT 1 FROM records WHERE kind = 'reply' AND request_id = ?", (rq,)).fetchone():
                    continue
                db.execute("INSERT OR IGNORE INTO claims VALUES (?, ?)", (rq, "cl_" + secrets.token_hex(8)))
                claim = db.execute("SELECT claim_id FROM claims WHERE request_id = ?", (rq,)).fetchone()[0]
                out.append({"request_id": rq, "claim_id": claim})
        return out

    def task(self, request_id: str) -> dict | None:
        with self.lock:
            row = self.db.execute("SELECT seq, record_id, kind, sender_id, sender_name, recipient_id, recipient_name, "
                                  "body, created_at, request_id, status FROM records WHERE kind = 'task' AND "
                                  "request_id = ?", (request_id,)).fetchone()
        return self._record(row) if row else None

    def replied(self, request_id: str) -> bool:
        with self.lock:
            return self.db.execute("SELECT 1 FROM records WHERE kind = 'reply' AND request_id = ? UNION ALL "
                                   "SELECT 1 FROM closed WHERE request_id = ?",
                                   (request_id, request_id)).fetchone() is not None

    def close_claimed(self, agent_id: str) -> None:
        """The planted ``empty-wait-cancels``: every task claimed by ``agent_id`` and not replied to is closed."""
        with self.transaction() as db:
            db.execute("INSERT OR IGNORE INTO closed SELECT c.request_id FROM claims c JOIN records r ON "
                       "r.request_id = c.request_id AND r.kind = 'task' WHERE r.recipient_id = ?", (agent_id,))

    def latest(self, recipient: str) -> int:
        with self.lock:
            row = self.db.execute("SELECT max(seq) FROM records WHERE recipient_id = ?", (recipient,)).fetchone()
        return row[0] or 0
