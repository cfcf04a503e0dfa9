"""The mailbox: admission of records, their lifecycles and evidence, claims, and receiving.

State changes go through the lifecycle tables (:mod:`peerwire.lifecycle`); an
illegal event raises inside the transaction and nothing is written. The mailbox
does no waiting and no delivery: it only records facts. The app wakes waiters and
runs provider adapters after a transaction commits.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from .. import cursor as cursors
from ..errors import Code, PeerwireError
from ..lifecycle import CLAIM_EVENTS, INFORMATION, LIFECYCLES, NOTICE, REPLY, TASK, Claimant, Event, Kind, Stage
from ..registry import SYSTEM_SENDER, AgentRow
from .db import new_id, now
from .registry import Registry
from .views import export_record, interaction_row, record_view, request_row


REPLY_STATUSES = ("done", "blocked", "failed")


@dataclass
class Page:
    """One receive batch. ``new_work`` names the tasks this call claimed."""

    records: list[dict[str, Any]]
    cursor: str
    has_more: bool
    new_work: list[str] = field(default_factory=list)


class Mailbox(Registry):
    """Records, their evidence rows, requests, claims and cursors."""

    def admit_information(self, sender: AgentRow, recipient: AgentRow, body: str, *, receipt: dict | None = None,
                          run_id: str | None = None) -> dict[str, Any]:
        with self.write() as db:
            ix = self._insert(db, Kind.INFORMATION, INFORMATION.initial, sender, recipient, body,
                              receipt=receipt, run_id=run_id)
        return self._receipt(ix)

    def admit_task(self, sender: AgentRow, recipient: AgentRow, body: str, *, receipt: dict | None = None,
                   run_id: str | None = None) -> dict[str, Any]:
        request_id = new_id("rq")
        with self.write() as db:
            ix = self._insert(db, Kind.TASK, TASK.initial, sender, recipient, body,
                              request_id=request_id, receipt=receipt, run_id=run_id)
            db.execute(
                """INSERT INTO requests(request_id, task_interaction_id, requester_id, recipient_id, created_at)
                   VALUES (?, ?, ?, ?, ?)""",
                (request_id, ix["interaction_id"], sender.agent_id, recipient.agent_id, ix["created_at"]),
            )
        return self._receipt(ix)

    def admit_reply(
        self,
        caller: AgentRow,
        request_id: str,
        status: str,
        body: str,
        *,
        receipt: dict | None = None,
    ) -> dict[str, Any]:
        """Record the explicit reply to ``request_id``; only its recipient may reply, once.

        The request decides the destination: the reply goes to the requester.
        """
        if status not in REPLY_STATUSES:
            raise PeerwireError(Code.INVALID_ARGUMENT, f"status must be one of {', '.join(REPLY_STATUSES)}")
        with self.write() as db:
            req = self._request(db, request_id)
            if req["recipient_id"] != caller.agent_id:
                raise PeerwireError(
                    Code.NOT_AUTHORIZED,
                    "only the task's recipient may reply to it",
                    {"request_id": request_id},
                )
            ix = self._close_request(db, req, caller, status, body, source="explicit", receipt=receipt)
        return self._receipt(ix)

    def _close_request(
        self,
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
    ) -> sqlite3.Row:
        """Write the one reply of a request (explicit, from a turn, or from peerwire)."""
        request_id = req["request_id"]
        if req["reply_interaction_id"] is not None:
            raise PeerwireError(
                Code.ALREADY_REPLIED,
                f"request {request_id} already has its reply {req['reply_interaction_id']}",
                {"request_id": request_id, "reply_interaction_id": req["reply_interaction_id"]},
            )
        task = self._interaction(db, req["task_interaction_id"])
        self._transition(db, task, Event.REPLY, {"source": source})
        requester = self.agent(req["requester_id"])
        ix = self._insert(db, Kind.REPLY, REPLY.initial, sender, requester, body, request_id=request_id,
                          reply_status=status, notice_code=code, receipt=receipt, run_id=task["run_id"],
                          evidence_detail={"source": source, **(detail or {})})
        db.execute(
            "UPDATE requests SET reply_interaction_id = ?, reply_source = ? WHERE request_id = ?",
            (ix["interaction_id"], source, request_id),
        )
        self._evidence(db, task["interaction_id"], Stage.REPLIED,
                       {"reply_interaction_id": ix["interaction_id"], "status": status, "source": source})
        return ix

    def add_notice(
        self, recipient: AgentRow, code: str, body: str, *, request_id: str | None = None, detail: dict | None = None
    ) -> dict[str, Any]:
        """A record from peerwire itself to ``recipient`` (never from an agent)."""
        with self.write() as db:
            ix = self._insert(db, Kind.NOTICE, NOTICE.initial, None, recipient, body,
                              request_id=request_id, notice_code=code, evidence_detail=detail)
        return self._receipt(ix)

    def _insert(
        self,
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
    ) -> sqlite3.Row:
        interaction_id = new_id("ix")
        stamp = now()
        db.execute(
            """INSERT INTO interactions(interaction_id, kind, state, sender_id, sender_name, recipient_id,
                   recipient_name, body, request_id, reply_status, notice_code, run_id, tool_receipt,
                   created_at, updated_at)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            (interaction_id, kind, state, sender.agent_id if sender else None,
             sender.name if sender else SYSTEM_SENDER, recipient.agent_id, recipient.name, body, request_id,
             reply_status, notice_code, run_id, json.dumps(receipt) if receipt else None, stamp, stamp),
        )
        detail: dict[str, Any] = {"recipient": recipient.ref, "bytes": len(body.encode("utf-8"))}
        if not recipient.sendable:
            detail["resolution"] = "enabled_not_sendable"  # the resolver's fallback: no sendable agent matched
        if receipt:
            detail["tool_receipt"] = receipt
        self._evidence(db, interaction_id, Stage.ADMITTED, {**detail, **(evidence_detail or {})})
        return self._interaction(db, interaction_id)

    def _receipt(self, ix: sqlite3.Row) -> dict[str, Any]:
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

    def transition(self, interaction_id: str, event: Event, detail: dict | None = None) -> str:
        """Apply ``event`` to an interaction's lifecycle and record the evidence."""
        with self.write() as db:
            row = self._interaction(db, interaction_id)
            return self._transition(db, row, event, detail)

    def _transition(self, db: sqlite3.Connection, row: sqlite3.Row, event: Event, detail: dict | None = None) -> str:
        lifecycle = LIFECYCLES[row["kind"]]
        new_state = lifecycle.next(row["state"], event)
        db.execute(
            "UPDATE interactions SET state = ?, updated_at = ? WHERE interaction_id = ?",
            (new_state, now(), row["interaction_id"]),
        )
        self._evidence(db, row["interaction_id"], lifecycle.stage(event),
                       {"from": row["state"], "to": new_state, **(detail or {})})
        return new_state

    def add_evidence(self, interaction_id: str, stage: Stage, detail: dict | None = None) -> None:
        with self.write() as db:
            self._interaction(db, interaction_id)
            self._evidence(db, interaction_id, stage, detail or {})

    @staticmethod
    def _evidence(db: sqlite3.Connection, interaction_id: str, stage: Stage, detail: dict) -> None:
        db.execute(
            "INSERT INTO evidence(interaction_id, stage, at, detail) VALUES (?, ?, ?, ?)",
            (interaction_id, stage, now(), json.dumps(detail, sort_keys=True, ensure_ascii=False)),
        )

    def claim_for_dispatch(self, request_id: str) -> str | None:
        """Claim a pending task for automatic delivery; ``None`` if someone has it."""
        with self.write() as db:
            task = self._task(db, request_id)
            if task["state"] != TASK.initial:
                return None
            return self._claim(db, task, Claimant.DISPATCH)

    def release_claim(self, request_id: str, reason: str) -> None:
        """Give a dispatch claim back (the provider proved nothing was admitted)."""
        with self.write() as db:
            task = self._task(db, request_id)
            self._transition(db, task, Event.RELEASE, {"reason": reason})
            db.execute(
                "UPDATE claims SET released_at = ?, release_reason = ? WHERE request_id = ? AND released_at IS NULL",
                (now(), reason, request_id),
            )

    def _claim(self, db: sqlite3.Connection, task: sqlite3.Row, claimant: Claimant) -> str:
        claim_id = new_id("cl")
        self._transition(db, task, CLAIM_EVENTS[claimant], {"claim_id": claim_id})
        db.execute(
            "INSERT INTO claims(claim_id, request_id, claimant, claimed_at) VALUES (?, ?, ?, ?)",
            (claim_id, task["request_id"], claimant, now()),
        )
        return claim_id

    def pending_tasks(self, recipient_id: str) -> list[str]:
        return [r[0] for r in self.db.execute(
            "SELECT request_id FROM interactions WHERE kind = ? AND recipient_id = ? AND state = ? ORDER BY seq",
            (Kind.TASK, recipient_id, TASK.initial),
        )]

    def receive(
        self, caller: AgentRow, *, cursor: str | None = None, ack_cursor: str | None = None, limit: int
    ) -> Page:
        """Acknowledge ``ack_cursor``, then read up to ``limit`` records after ``cursor``.

        Without ``cursor`` the read starts after the caller's last acknowledgement,
        so unacknowledged records are offered again. Tasks first seen here are
        claimed (the durable claim) and listed in ``new_work``; a replayed cursor
        returns the same records and claims nothing new.
        """
        with self.write() as db:
            acked = self._acked(db, caller.agent_id)
            if ack_cursor is not None:
                upto = self._position(db, caller, ack_cursor)
                if upto > acked:
                    for row in db.execute(
                        "SELECT interaction_id FROM interactions WHERE recipient_id = ? AND seq > ? AND seq <= ?",
                        (caller.agent_id, acked, upto),
                    ).fetchall():
                        self._evidence(db, row[0], Stage.ACKNOWLEDGED, {"by": caller.ref})
                    db.execute(
                        "UPDATE cursors SET acked_seq = ?, updated_at = ? WHERE agent_id = ?",
                        (upto, now(), caller.agent_id),
                    )
                    acked = upto
            start = self._position(db, caller, cursor) if cursor is not None else acked
            rows = db.execute(
                "SELECT * FROM interactions WHERE recipient_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                (caller.agent_id, start, limit + 1),
            ).fetchall()
            has_more = len(rows) > limit
            rows = rows[:limit]
            new_work: list[str] = []
            stamp = now()
            for row in rows:
                if row["received_at"] is None:
                    db.execute("UPDATE interactions SET received_at = ? WHERE seq = ?", (stamp, row["seq"]))
                    self._evidence(db, row["interaction_id"], Stage.RECEIVED, {"by": caller.ref})
                if row["kind"] == Kind.TASK and row["state"] == TASK.initial:
                    self._claim(db, row, Claimant.RECEIVE)
                    new_work.append(row["request_id"])
            end = rows[-1]["seq"] if rows else start
        return Page(
            records=[record_view(r) for r in rows],
            cursor=cursors.encode(self._cursor_secret, caller.agent_id, end),
            has_more=has_more,
            new_work=new_work,
        )

    def unacknowledged(self, agent_id: str) -> int:
        """How many records wait in the mailbox after the last acknowledgement."""
        acked = self._acked(self.db, agent_id)
        return self.db.execute(
            "SELECT COUNT(*) FROM interactions WHERE recipient_id = ? AND seq > ?", (agent_id, acked)
        ).fetchone()[0]

    def _acked(self, db: sqlite3.Connection, agent_id: str) -> int:
        row = db.execute("SELECT acked_seq FROM cursors WHERE agent_id = ?", (agent_id,)).fetchone()
        return row[0] if row else 0

    def _position(self, db: sqlite3.Connection, caller: AgentRow, cursor: str) -> int:
        seq = cursors.decode(self._cursor_secret, caller.agent_id, cursor)
        newest = db.execute(
            "SELECT COALESCE(MAX(seq), 0) FROM interactions WHERE recipient_id = ?", (caller.agent_id,)
        ).fetchone()[0]
        if seq > newest:
            raise PeerwireError(Code.CURSOR_INVALID, "cursor points past the end of your mailbox")
        return seq

    # -- lookups (the rows behind records and requests) -------------------------------------

    @staticmethod
    def _interaction(db: sqlite3.Connection, interaction_id: str) -> sqlite3.Row:
        return interaction_row(db, interaction_id)

    @staticmethod
    def _request(db: sqlite3.Connection, request_id: str) -> sqlite3.Row:
        return request_row(db, request_id)

    def _task(self, db: sqlite3.Connection, request_id: str) -> sqlite3.Row:
        req = self._request(db, request_id)
        return self._interaction(db, req["task_interaction_id"])

    def request(self, request_id: str) -> dict[str, Any]:
        req = self._request(self.db, request_id)
        task = self._interaction(self.db, req["task_interaction_id"])
        return {**dict(req), "state": task["state"]}

    def interaction(self, interaction_id: str) -> dict[str, Any]:
        """One record with its state, tool receipt and timestamps (as the export shows it)."""
        return export_record(self._interaction(self.db, interaction_id))
