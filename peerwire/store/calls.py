"""Calls as they come in: a retry recognised by its call id, a refused request kept for its trace.

A caller that lost the answer to a call sends it again with the same call id (an
MCP ``_meta.callId``, a CLI idempotency key); the store answers it with the first
call's receipt and admits nothing (the ``calls`` table, written in the same
transaction as the record). A request refused before anything was admitted is
kept in ``rejected_requests``, so ``trace`` can say what came in and why it was
refused.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from ..errors import Code, PeerwireError
from .db import new_id, now


@dataclass(frozen=True)
class Call:
    """A caller's identity for one tool call, so a retry of it is recognised.

    ``call_id`` is the caller's (an MCP ``_meta.callId``, a CLI idempotency
    key); ``fingerprint`` digests the operation and its arguments, so a call id
    reused for a different call is refused instead of answered wrongly.
    """

    call_id: str
    op: str
    fingerprint: str

    @classmethod
    def of(cls, meta: dict[str, Any] | None, op: str, args: dict[str, Any]) -> "Call | None":
        call_id = (meta or {}).get("call_id")
        if not isinstance(call_id, str) or not call_id:
            return None
        digest = hashlib.sha256(json.dumps([op, args], sort_keys=True, ensure_ascii=False).encode("utf-8"))
        return cls(call_id, op, digest.hexdigest())


@dataclass(frozen=True)
class Entry:
    """A request entering the send pipeline, stamped before anything about it is checked.

    Admitted, it becomes the ``entered`` stage of its record; refused, a
    rejected request that ``trace(entry_id)`` explains.
    """

    entry_id: str
    op: str
    via: str
    call_id: str | None
    entered_at: str

    @classmethod
    def begin(cls, op: str, meta: dict[str, Any] | None) -> "Entry":
        meta = meta or {}
        call_id = meta.get("call_id")
        return cls(new_id("en"), op, str(meta.get("via", "control")), call_id if isinstance(call_id, str) else None,
                   now())

    def detail(self) -> dict[str, Any]:
        return {"entry_id": self.entry_id, "op": self.op, "via": self.via,
                **({"call_id": self.call_id} if self.call_id else {})}


def known(db: sqlite3.Connection, agent_id: str, call: Call | None) -> bool:
    """Whether the caller made a call with ``call``'s id before (a read; nothing is written)."""
    return call is not None and db.execute(
        "SELECT 1 FROM calls WHERE agent_id = ? AND call_id = ?", (agent_id, call.call_id)).fetchone() is not None


def first_answer(db: sqlite3.Connection, agent_id: str, call: Call) -> str | None:
    """The interaction the caller's first call with ``call``'s id admitted, or ``None`` for a new one.

    A call id the caller already used for a different call (another operation
    or other arguments) is ``invalid_argument``: answering it with the other
    call's receipt would be wrong, admitting it would break the first call's retries.
    """
    row = db.execute("SELECT * FROM calls WHERE agent_id = ? AND call_id = ?", (agent_id, call.call_id)).fetchone()
    if row is None:
        return None
    if (row["op"], row["fingerprint"]) != (call.op, call.fingerprint):
        raise PeerwireError(
            Code.INVALID_ARGUMENT,
            f"call id {call.call_id!r} was already used for another call ({row['op']}, other arguments); "
            "a retry must repeat its call exactly, a new call needs a new call id",
            {"call_id": call.call_id, "op": row["op"]})
    return row["interaction_id"]


def remember(db: sqlite3.Connection, agent_id: str, call: Call, interaction_id: str, at: str) -> None:
    """Keep ``interaction_id`` as the answer to ``call`` (in the transaction that admits its record).

    The receipt is not stored again: it is made from the record's columns, which never
    change, so a retry rebuilds it byte for byte (rows of older stores keep a copy, unread).
    """
    db.execute(
        """INSERT INTO calls(agent_id, call_id, op, fingerprint, interaction_id, receipt, created_at)
           VALUES (?, ?, ?, ?, ?, '', ?)""",
        (agent_id, call.call_id, call.op, call.fingerprint, interaction_id, at))


def record_rejection(db: sqlite3.Connection, entry: Entry, agent_id: str | None, error: PeerwireError,
                     summary: dict[str, Any]) -> None:
    """Keep a request refused before anything was admitted, so its trace explains it."""
    db.execute(
        """INSERT INTO rejected_requests(entry_id, op, agent_id, via, call_id, summary, entered_at,
               rejected_at, code, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        (entry.entry_id, entry.op, agent_id, entry.via, entry.call_id, json.dumps(summary, ensure_ascii=False),
         entry.entered_at, now(), error.code.value, error.message))
