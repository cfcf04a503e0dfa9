"""Records inside a transaction: the row writes the mailbox and the bindings share.

Every function here takes the connection of a transaction its caller already holds
(a :meth:`~.db.Database.write` or a group-commit job) and neither opens nor commits
one, so a record, its state change and every evidence row its receipt promises land
together or not at all. State changes go through the lifecycle tables
(:mod:`peerwire.lifecycle`); an illegal event raises and the caller's transaction
keeps nothing.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ..errors import Code, PeerwireError
from ..lifecycle import LIFECYCLES, REPLY, Event, Kind, Stage
from ..registry_rules import SYSTEM_SENDER, AgentRow
from .calls import Entry
from .db import new_id, now
from .registry_rows import agent_row
from .views import interaction_row, request_row


def interaction(db: sqlite3.Connection, interaction_id: str) -> sqlite3.Row:
    """The record's row, or ``unknown_interaction``."""
    return interaction_row(db, interaction_id)


def request(db: sqlite3.Connection, request_id: str) -> sqlite3.Row:
    """The request's row, or ``unknown_request``."""
    return request_row(db, request_id)


def task(db: sqlite3.Connection, request_id: str) -> sqlite3.Row:
    """The task record a request was made with."""
    return interaction(db, request(db, request_id)["task_interaction_id"])


def evidence(db: sqlite3.Connection, interaction_id: str, stage: Stage, detail: dict, *,
             at: str | None = None) -> None:
    """One evidence row of a record (``at`` defaults to now)."""
    db.execute(
        "INSERT INTO evidence(interaction_id, stage, at, detail) VALUES (?, ?, ?, ?)",
        (interaction_id, stage, at or now(), json.dumps(detail, sort_keys=True, ensure_ascii=False)),
    )


def transition(db: sqlite3.Connection, row: sqlite3.Row, event: Event, detail: dict | None = None) -> str:
    """Apply ``event`` to the record's lifecycle and write the stage's evidence; returns the new state."""
    lifecycle = LIFECYCLES[row["kind"]]
    new_state = lifecycle.next(row["state"], event)
    db.execute(
        "UPDATE interactions SET state = ?, updated_at = ? WHERE interaction_id = ?",
        (new_state, now(), row["interaction_id"]),
    )
    evidence(db, row["interaction_id"], lifecycle.stage(event),
             {"from": row["state"], "to": new_state, **(detail or {})})
    return new_state


def insert(
    db: sqlite3.Connection,
    kind: Kind,
    state: str,
    sender: AgentRow | None,
    recipient: AgentRow,
    body: str,
    *,
    request_id: str | None = None,
    reply_status: str | None = None,
    notice_code: str | None = None,
    receipt: dict | None = None,
    run_id: str | None = None,
    evidence_detail: dict | None = None,
    entry: Entry | None = None,
) -> sqlite3.Row:
    """A new record in ``recipient``'s mailbox (``sender`` ``None``: from peerwire), with its admission evidence."""
    interaction_id = new_id("ix")
    stamp = now()
    db.execute(
        """INSERT INTO interactions(interaction_id, kind, state, sender_id, sender_name, recipient_id,
               recipient_name, body, request_id, reply_status, notice_code, run_id, tool_receipt,
               created_at, updated_at, mailbox_index)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        (interaction_id, kind, state, sender.agent_id if sender else None,
         sender.name if sender else SYSTEM_SENDER, recipient.agent_id, recipient.name, body, request_id,
         reply_status, notice_code, run_id, json.dumps(receipt) if receipt else None, stamp, stamp,
         newest_index(db, recipient.agent_id) + 1),
    )
    detail: dict[str, Any] = {"recipient": recipient.ref, "bytes": len(body.encode("utf-8"))}
    if not recipient.sendable:
        detail["resolution"] = "enabled_not_sendable"  # the resolver's fallback: no sendable agent matched
    if entry is not None:
        # Stamped when the request came in, before it was checked; written with the record.
        evidence(db, interaction_id, Stage.ENTERED, entry.detail(), at=entry.entered_at)
    evidence(db, interaction_id, Stage.ADMITTED, {**detail, **(evidence_detail or {})})
    return interaction(db, interaction_id)


def receipt(ix: sqlite3.Row) -> dict[str, Any]:
    """What the sender is told about an admitted record."""
    out: dict[str, Any] = {
        "interaction_id": ix["interaction_id"],
        "kind": ix["kind"],
        "state": "admitted",
        "recipient": {"agent_id": ix["recipient_id"], "name": ix["recipient_name"]},
        "created_at": ix["created_at"],
    }
    if ix["request_id"]:
        out["request_id"] = ix["request_id"]
    if ix["reply_status"]:
        out["status"] = ix["reply_status"]
    return out


def close_request(
    db: sqlite3.Connection,
    req: sqlite3.Row,
    sender: AgentRow | None,
    status: str,
    body: str,
    *,
    source: str,
    receipt: dict | None = None,
    code: str | None = None,
    detail: dict | None = None,
    entry: Entry | None = None,
) -> sqlite3.Row:
    """Write the one reply of a request (explicit, from a turn, or from peerwire); ``already_replied`` after that."""
    request_id = req["request_id"]
    if req["reply_interaction_id"] is not None:
        raise PeerwireError(
            Code.ALREADY_REPLIED,
            f"request {request_id} already has its reply {req['reply_interaction_id']}",
            {"request_id": request_id, "reply_interaction_id": req["reply_interaction_id"]},
        )
    task_row = interaction(db, req["task_interaction_id"])
    transition(db, task_row, Event.REPLY, {"source": source})
    requester = agent_row(db, req["requester_id"])
    ix = insert(db, Kind.REPLY, REPLY.initial, sender, requester, body, request_id=request_id,
                reply_status=status, notice_code=code, receipt=receipt, run_id=task_row["run_id"],
                evidence_detail={"source": source, **(detail or {})}, entry=entry)
    db.execute(
        "UPDATE requests SET reply_interaction_id = ?, reply_source = ? WHERE request_id = ?",
        (ix["interaction_id"], source, request_id),
    )
    evidence(db, task_row["interaction_id"], Stage.REPLIED,
             {"reply_interaction_id": ix["interaction_id"], "status": status, "source": source})
    return ix


def newest_index(db: sqlite3.Connection, agent_id: str) -> int:
    """How many records the mailbox holds (its newest record's mailbox number; 0 when empty)."""
    row = db.execute("SELECT mailbox_index FROM interactions WHERE recipient_id = ? ORDER BY seq DESC LIMIT 1",
                     (agent_id,)).fetchone()
    return row[0] if row else 0
