"""How stored rows are shown: the record a recipient reads, the export's parts, traces, the raw dump.

Functions of a connection, so they serve the running app's store and a
read-only connection to a stopped home (:mod:`peerwire.export`) alike.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ..errors import Code, PeerwireError
from ..lifecycle import Kind, Stage
from .db import json_column


def record_view(row: sqlite3.Row) -> dict[str, Any]:
    """The immutable, typed record a recipient reads (no mutable state in it)."""
    out: dict[str, Any] = {
        "record_id": row["interaction_id"],
        "kind": row["kind"],
        "seq": row["seq"],
        "sender": {"agent_id": row["sender_id"], "name": row["sender_name"]},
        "recipient": {"agent_id": row["recipient_id"], "name": row["recipient_name"]},
        "body": row["body"],
        "created_at": row["created_at"],
    }
    if row["request_id"]:
        out["request_id"] = row["request_id"]
    if row["reply_status"]:
        out["status"] = row["reply_status"]
    if row["notice_code"]:
        out["code"] = row["notice_code"]
    if row["run_id"]:
        out["run_id"] = row["run_id"]
    return out


def export_record(row: sqlite3.Row) -> dict[str, Any]:
    """A record as the export (and the app) sees it: the record a recipient reads, plus its state, its tool
    receipt and timestamps."""
    return {**record_view(row), "state": row["state"], "tool_receipt": json_column(row["tool_receipt"]),
            "updated_at": row["updated_at"], "received_at": row["received_at"]}


def interaction_row(db: sqlite3.Connection, interaction_id: str) -> sqlite3.Row:
    row = db.execute("SELECT * FROM interactions WHERE interaction_id = ?", (interaction_id,)).fetchone()
    if row is None:
        raise PeerwireError(Code.UNKNOWN_INTERACTION, f"no interaction {interaction_id!r} in this home")
    return row


def request_row(db: sqlite3.Connection, request_id: str) -> sqlite3.Row:
    row = db.execute("SELECT * FROM requests WHERE request_id = ?", (request_id,)).fetchone()
    if row is None:
        raise PeerwireError(
            Code.UNKNOWN_REQUEST,
            f"no task has request_id {request_id!r}; reply takes the request_id of a task you received",
            {"request_id": request_id},
        )
    return row


def trace(db: sqlite3.Connection, ident: str) -> dict[str, Any]:
    """Every recorded stage of one interaction, or of a request's task, reply and notices (``rq_…``).

    An entry id (``en_…``, in the details of a refused call's error) names a
    request as it came in: refused, its trace is ``entered`` then ``rejected``
    with the reason; admitted, the trace of its record.
    """
    if ident.startswith("en_"):
        return _entry_trace(db, ident)
    if ident.startswith("rq_"):
        req = request_row(db, ident)
        ids = [req["task_interaction_id"]] + ([req["reply_interaction_id"]] if req["reply_interaction_id"] else [])
        ids += [r[0] for r in db.execute(
            "SELECT interaction_id FROM interactions WHERE request_id = ? AND kind = ? ORDER BY seq",
            (ident, Kind.NOTICE))]
    else:
        ids = [interaction_row(db, ident)["interaction_id"]]
    out = []
    for interaction_id in ids:
        row = interaction_row(db, interaction_id)
        rows = db.execute("SELECT * FROM evidence WHERE interaction_id = ? ORDER BY evidence_id",
                          (interaction_id,)).fetchall()
        if not any(e["stage"] == Stage.ACKNOWLEDGED for e in rows) and (covering := _acknowledgement(db, row)):
            rows = sorted([*rows, covering], key=lambda e: e["evidence_id"])
        stages = [{"stage": e["stage"], "at": e["at"], "detail": json_column(e["detail"]) or {}} for e in rows]
        out.append({**export_record(row), "stages": stages})
    bindings = []
    if ident.startswith("rq_"):
        bindings = [dict(b) for b in db.execute(
            "SELECT * FROM bindings WHERE request_id = ? ORDER BY created_at", (ident,))]
    return {"id": ident, "interactions": out, "bindings": bindings}


def _acknowledgement(db: sqlite3.Connection, record: sqlite3.Row) -> sqlite3.Row | None:
    """The acknowledged row whose range covers ``record`` (it sits on the range's last record), if any.

    Acknowledgements only move forward, so their ranges do not overlap: the covering row is the first
    one on a record of the same mailbox at or after this one. Only records acknowledged at all are searched.
    """
    acked = db.execute("SELECT acked_seq FROM cursors WHERE agent_id = ?", (record["recipient_id"],)).fetchone()
    if acked is None or record["seq"] > acked[0]:
        return None
    found = db.execute(
        """SELECT evidence.* FROM interactions JOIN evidence USING (interaction_id)
           WHERE interactions.recipient_id = ? AND interactions.seq >= ? AND evidence.stage = ?
           ORDER BY interactions.seq LIMIT 1""", (record["recipient_id"], record["seq"], Stage.ACKNOWLEDGED)).fetchone()
    if found is None or json_column(found["detail"]).get("first_seq", 0) > record["seq"]:
        return None
    return found


def _entry_trace(db: sqlite3.Connection, entry_id: str) -> dict[str, Any]:
    row = db.execute("SELECT * FROM rejected_requests WHERE entry_id = ?", (entry_id,)).fetchone()
    if row is None:
        admitted = db.execute(
            "SELECT interaction_id FROM evidence WHERE stage = ? AND json_extract(detail, '$.entry_id') = ?",
            (Stage.ENTERED, entry_id)).fetchone()
        if admitted is None:
            raise PeerwireError(Code.UNKNOWN_INTERACTION, f"no request entered as {entry_id!r} in this home")
        return {**trace(db, admitted[0]), "id": entry_id}
    request = {key: row[key] for key in ("entry_id", "op", "agent_id", "via", "call_id", "code", "reason")}
    request["summary"] = json_column(row["summary"])
    entered = {"entry_id": entry_id, "op": row["op"], "via": row["via"],
               **({"call_id": row["call_id"]} if row["call_id"] else {})}
    return {"id": entry_id, "interactions": [], "bindings": [], "rejected": request,
            "stages": [{"stage": Stage.ENTERED.value, "at": row["entered_at"], "detail": entered},
                       {"stage": Stage.REJECTED.value, "at": row["rejected_at"],
                        "detail": {"code": row["code"], "reason": row["reason"]}}]}


def dump(db: sqlite3.Connection) -> dict[str, list[dict[str, Any]]]:
    """Every row of every table, raw, without session credential hashes or the cursor secret."""
    tables = [r[0] for r in db.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
    out: dict[str, list[dict[str, Any]]] = {}
    for table in tables:
        rows = [dict(r) for r in db.execute(f"SELECT * FROM {table}")]
        if table == "sessions":
            rows = [{k: v for k, v in r.items() if k != "token_hash"} for r in rows]
        if table == "meta":
            rows = [r for r in rows if r["key"] != "cursor_secret"]
        out[table] = rows
    return out


def exported(db: sqlite3.Connection) -> dict[str, list[dict[str, Any]]]:
    """The export's parts (``contracts/export.schema.json``), each in the order the format fixes."""
    def rows(sql: str) -> list[dict[str, Any]]:
        return [dict(r) for r in db.execute(sql)]

    aliases: dict[str, list[str]] = {}
    for row in db.execute("SELECT agent_id, alias FROM agent_aliases ORDER BY alias"):
        aliases.setdefault(row["agent_id"], []).append(row["alias"])
    records = [export_record(row) for row in db.execute("SELECT * FROM interactions ORDER BY seq")]
    seqs = {record["record_id"]: record["seq"] for record in records}
    return {
        "agents": [_agent(row, aliases.get(row["agent_id"], []))
                   for row in rows("SELECT * FROM agents ORDER BY row_order")],
        "records": records,
        "evidence": [{"evidence_id": row["evidence_id"], "record_id": row["interaction_id"], "stage": row["stage"],
                      "at": row["at"], "detail": _detail(row, seqs)}
                     for row in rows("SELECT * FROM evidence ORDER BY evidence_id")],
        "requests": [{"request_id": row["request_id"], "task_record_id": row["task_interaction_id"],
                      "requester_id": row["requester_id"], "recipient_id": row["recipient_id"],
                      "reply_record_id": row["reply_interaction_id"], "reply_source": row["reply_source"],
                      "created_at": row["created_at"]}
                     for row in rows("SELECT * FROM requests ORDER BY created_at, rowid")],
        "claims": [{key: row[key] for key in ("claim_id", "request_id", "claimant", "claimed_at", "released_at",
                                              "release_reason")}
                   for row in rows("SELECT * FROM claims ORDER BY claimed_at, rowid")],
        "bindings": [{**{key: row[key] for key in ("binding_id", "request_id", "claim_id", "agent_id", "generation",
                                                  "thread_id", "turn_id", "state")},
                      "outcome": json_column(row["outcome"]), "created_at": row["created_at"],
                      "updated_at": row["updated_at"]}
                     for row in rows("SELECT * FROM bindings ORDER BY created_at, rowid")],
    }


def _detail(row: dict[str, Any], seqs: dict[str, int]) -> dict[str, Any]:
    detail = json_column(row["detail"]) or {}
    if row["stage"] == Stage.ACKNOWLEDGED and "first_seq" not in detail:
        # A store written before acknowledgements named their range kept one row per record:
        # each is the range of that one record.
        record_id, seq = row["interaction_id"], seqs[row["interaction_id"]]
        detail = {**detail, "first_seq": seq, "last_seq": seq, "first_record_id": record_id,
                  "last_record_id": record_id, "count": 1}
    return detail


def _agent(row: dict[str, Any], aliases: list[str]) -> dict[str, Any]:
    # Columns added by later migrations are absent from an older store read as it is.
    return {
        "agent_id": row["agent_id"], "name": row["name"], "aliases": aliases, "provider": row["provider"],
        "provider_session_id": row["provider_session_id"], "generation": row["generation"],
        "status": row["status"], "enabled": bool(row["enabled"]), "sendable": bool(row["sendable"]),
        "source": row["source"], "path": row.get("path"), "parent_agent_id": row.get("parent_agent_id"),
        "created_at": row["created_at"], "updated_at": row["updated_at"], "last_error": row["last_error"],
    }
