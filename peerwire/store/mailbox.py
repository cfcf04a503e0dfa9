"""The mailbox: admission of records, their lifecycles and evidence, claims, and receiving.

State changes go through the lifecycle tables (:mod:`peerwire.lifecycle`); an
illegal event raises inside the transaction and nothing is written. The mailbox
does no waiting and no delivery: it only records facts. The app wakes waiters and
runs provider adapters after a transaction commits.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Any, Callable

from .. import cursor as cursors
from ..errors import Code, PeerwireError
from ..lifecycle import CLAIM_EVENTS, LIFECYCLES, NOTICE, TASK, Claimant, Event, Kind, Stage
from ..registry_rules import AgentRow
from . import calls, records
from .calls import Call, Entry
from .db import Database, new_id, now
from .views import export_record, record_view


REPLY_STATUSES = ("done", "blocked", "failed")

# A task in this state holds a live receive claim (and only a receive puts it there).
_CLAIMED_BY_RECEIVE = TASK.next(TASK.initial, Event.CLAIM_BY_RECEIVE)

Job = Callable[[sqlite3.Connection], Any]


@dataclass
class Page:
    """One receive batch and the work in it.

    ``claims`` holds ``{"request_id", "claim_id"}`` for every task of the batch
    that is the caller's to do: claimed by a receive of the caller's, neither
    acknowledged past nor answered. ``new_work`` is their request ids, in order.
    """

    records: list[dict[str, Any]]
    cursor: str
    has_more: bool
    claims: list[dict[str, str]] = field(default_factory=list)

    @property
    def new_work(self) -> list[str]:
        return [claim["request_id"] for claim in self.claims]


class Mailbox:
    """Records, their evidence rows, requests, claims and cursors."""

    def __init__(self, database: Database):
        self.database = database

    # Each admission is a job: one transaction holds the record and every evidence row its receipt
    # promises. The app runs it through the group commit (:meth:`.Database.commit`); the methods below run it
    # in a transaction of its own.

    def admit_information(self, sender: AgentRow, recipient: AgentRow, body: str, **how: Any) -> dict[str, Any]:
        with self.database.write() as db:
            return self.information_job(sender, recipient, body, **how)(db)

    def admit_task(self, sender: AgentRow, recipient: AgentRow, body: str, **how: Any) -> dict[str, Any]:
        with self.database.write() as db:
            return self.task_job(sender, recipient, body, **how)(db)

    def information_job(self, sender: AgentRow, recipient: AgentRow, body: str, **how: Any) -> Job:
        """Admit an information record (or answer a retry of ``call`` with its first receipt)."""
        return self._admission(Kind.INFORMATION, sender, recipient, body, **how)

    def task_job(self, sender: AgentRow, recipient: AgentRow, body: str, **how: Any) -> Job:
        """Admit a task and its request (or answer a retry of ``call`` with its first receipt)."""
        return self._admission(Kind.TASK, sender, recipient, body, **how)

    def _admission(
        self, kind: Kind, sender: AgentRow, recipient: AgentRow, body: str, *, receipt: dict | None = None,
        run_id: str | None = None, call: Call | None = None, entry: Entry | None = None,
    ) -> Job:
        def job(db: sqlite3.Connection) -> dict[str, Any]:
            if (prior := self._answered(db, sender, call)) is not None:
                return prior
            request_id = new_id("rq") if kind is Kind.TASK else None
            ix = records.insert(db, kind, LIFECYCLES[kind].initial, sender, recipient, body,
                                request_id=request_id, receipt=receipt, run_id=run_id, entry=entry)
            if request_id is not None:
                db.execute(
                    """INSERT INTO requests(request_id, task_interaction_id, requester_id, recipient_id, created_at)
                       VALUES (?, ?, ?, ?, ?)""",
                    (request_id, ix["interaction_id"], sender.agent_id, recipient.agent_id, ix["created_at"]),
                )
            return self._answer(db, sender, call, ix)
        return job

    def admit_reply(self, caller: AgentRow, request_id: str, status: str, body: str, **how: Any) -> dict[str, Any]:
        with self.database.write() as db:
            return self.reply_job(caller, request_id, status, body, **how)(db)

    def reply_job(
        self,
        caller: AgentRow,
        request_id: str,
        status: str,
        body: str,
        *,
        receipt: dict | None = None,
        call: Call | None = None,
        entry: Entry | None = None,
    ) -> Job:
        """Record the explicit reply to ``request_id``; only its recipient may reply, once.

        The request decides the destination: the reply goes to the requester.
        A retry of the same ``call`` gets the first reply's receipt.
        """
        if status not in REPLY_STATUSES:
            raise PeerwireError(Code.INVALID_ARGUMENT, f"status must be one of {', '.join(REPLY_STATUSES)}")

        def job(db: sqlite3.Connection) -> dict[str, Any]:
            if (prior := self._answered(db, caller, call)) is not None:
                return prior
            req = records.request(db, request_id)
            if req["recipient_id"] != caller.agent_id:
                raise PeerwireError(
                    Code.NOT_AUTHORIZED,
                    "only the task's recipient may reply to it",
                    {"request_id": request_id},
                )
            ix = records.close_request(db, req, caller, status, body, source="explicit", receipt=receipt,
                                       entry=entry)
            return self._answer(db, caller, call, ix)
        return job

    # -- retried calls and refused requests -----------------------------------------------

    def knows_call(self, caller: AgentRow, call: Call | None) -> bool:
        """Whether the caller made a call with ``call``'s id before (a read; nothing is written)."""
        return calls.known(self.database.db, caller.agent_id, call)

    def retry_job(self, caller: AgentRow, call: Call) -> Job:
        """The first receipt of ``call`` if the caller made it before (then nothing is admitted again).

        ``None`` for a call not seen yet; ``invalid_argument`` for a call id the
        caller already used for a different call. Records the retry as evidence.
        """
        return lambda db: self._answered(db, caller, call)

    def _answered(self, db: sqlite3.Connection, caller: AgentRow, call: Call | None) -> dict[str, Any] | None:
        interaction_id = calls.first_answer(db, caller.agent_id, call) if call is not None else None
        if interaction_id is None:
            return None
        assert call is not None
        records.evidence(db, interaction_id, Stage.RETRIED, {"call_id": call.call_id, "op": call.op})
        return records.receipt(records.interaction(db, interaction_id))

    def _answer(self, db: sqlite3.Connection, caller: AgentRow, call: Call | None, ix: sqlite3.Row) -> dict[str, Any]:
        """``ix``'s receipt, remembered for ``call`` in the same transaction as the record."""
        receipt = records.receipt(ix)
        if call is not None:
            calls.remember(db, caller.agent_id, call, ix["interaction_id"], ix["created_at"])
        return receipt

    @staticmethod
    def rejection_job(entry: Entry, caller_id: str | None, error: PeerwireError, summary: dict[str, Any]) -> Job:
        """Record a request refused before anything was admitted, so its trace explains it."""
        return lambda db: calls.record_rejection(db, entry, caller_id, error, summary)

    def add_notice(
        self, recipient: AgentRow, code: str, body: str, *, request_id: str | None = None, detail: dict | None = None
    ) -> dict[str, Any]:
        """A record from peerwire itself to ``recipient`` (never from an agent)."""
        with self.database.write() as db:
            ix = records.insert(db, Kind.NOTICE, NOTICE.initial, None, recipient, body,
                                request_id=request_id, notice_code=code, evidence_detail=detail)
        return records.receipt(ix)

    def transition(self, interaction_id: str, event: Event, detail: dict | None = None) -> str:
        """Apply ``event`` to an interaction's lifecycle and record the evidence."""
        with self.database.write() as db:
            row = records.interaction(db, interaction_id)
            return records.transition(db, row, event, detail)

    def add_evidence(self, interaction_id: str, stage: Stage, detail: dict | None = None) -> None:
        with self.database.write() as db:
            records.interaction(db, interaction_id)
            records.evidence(db, interaction_id, stage, detail or {})

    def claim_for_dispatch(self, request_id: str) -> str | None:
        """Claim a pending task for automatic delivery; ``None`` if someone has it."""
        with self.database.write() as db:
            task = records.task(db, request_id)
            if task["state"] != TASK.initial:
                return None
            return self._claim(db, task, Claimant.DISPATCH)

    def release_claim(self, request_id: str, reason: str) -> None:
        """Give a dispatch claim back (the provider proved nothing was admitted)."""
        with self.database.write() as db:
            task = records.task(db, request_id)
            records.transition(db, task, Event.RELEASE, {"reason": reason})
            db.execute(
                "UPDATE claims SET released_at = ?, release_reason = ? WHERE request_id = ? AND released_at IS NULL",
                (now(), reason, request_id),
            )

    def _claim(self, db: sqlite3.Connection, task: sqlite3.Row, claimant: Claimant) -> str:
        claim_id = new_id("cl")
        records.transition(db, task, CLAIM_EVENTS[claimant], {"claim_id": claim_id})
        db.execute(
            "INSERT INTO claims(claim_id, request_id, claimant, claimed_at) VALUES (?, ?, ?, ?)",
            (claim_id, task["request_id"], claimant, now()),
        )
        return claim_id

    # Literal, not bound: SQLite uses a partial index (interactions_pending_tasks) only for a query whose
    # WHERE names the index's own terms, so dispatch reads the pending tasks, not the whole mailbox.
    _PENDING_TASKS = f"kind = '{Kind.TASK}' AND state = '{TASK.initial}'"

    def pending_tasks(self, recipient_id: str) -> list[str]:
        """The request ids of the recipient's tasks that no one has claimed, oldest first."""
        return [r[0] for r in self.database.db.execute(
            f"SELECT request_id FROM interactions WHERE recipient_id = ? AND {self._PENDING_TASKS} ORDER BY seq",
            (recipient_id,),
        )]

    def has_pending_tasks(self, recipient_id: str) -> bool:
        """Whether any of the recipient's tasks waits for a claim (one probe of an index, no list)."""
        return self.database.db.execute(
            f"SELECT EXISTS (SELECT 1 FROM interactions WHERE recipient_id = ? AND {self._PENDING_TASKS})",
            (recipient_id,)).fetchone()[0] == 1

    def receive(
        self, caller: AgentRow, *, cursor: str | None = None, ack_cursor: str | None = None, limit: int
    ) -> Page:
        with self.database.write() as db:
            return self.receive_job(caller, cursor=cursor, ack_cursor=ack_cursor, limit=limit)(db)

    def receive_job(
        self, caller: AgentRow, *, cursor: str | None = None, ack_cursor: str | None = None, limit: int
    ) -> Callable[[sqlite3.Connection], Page]:
        """Acknowledge ``ack_cursor``, then read up to ``limit`` records after ``cursor``.

        Without ``cursor`` the read starts after the caller's last acknowledgement,
        so unacknowledged records are offered again. A pending task the read
        returns is claimed for the caller (the durable claim, which automatic
        dispatch then never takes). Exposure follows acknowledgement, not the
        answer: every read that returns a task claimed by a receive lists it in
        ``claims`` under that one claim until the caller acknowledges past it or
        the task is answered, so an answer the caller never saw loses nothing.
        A replayed cursor returns the same records and creates no claim.
        """

        def job(db: sqlite3.Connection) -> Page:
            acked = self._acked(db, caller.agent_id)
            if ack_cursor is not None:
                upto = self._position(db, caller, ack_cursor)
                if upto > acked:
                    self._acknowledge(db, caller, acked, upto)
                    acked = upto
            start = self._position(db, caller, cursor) if cursor is not None else acked
            rows = db.execute(
                "SELECT * FROM interactions WHERE recipient_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                (caller.agent_id, start, limit + 1),
            ).fetchall()
            has_more = len(rows) > limit
            rows = rows[:limit]
            stamp = now()
            claimed: dict[str, str] = {}
            for row in rows:
                if row["received_at"] is None:
                    db.execute("UPDATE interactions SET received_at = ? WHERE seq = ?", (stamp, row["seq"]))
                    records.evidence(db, row["interaction_id"], Stage.RECEIVED, {"by": caller.ref})
                if row["kind"] == Kind.TASK and row["state"] == TASK.initial:
                    claimed[row["request_id"]] = self._claim(db, row, Claimant.RECEIVE)
            work = [row for row in rows if row["kind"] == Kind.TASK and row["seq"] > acked
                    and (row["request_id"] in claimed or row["state"] == _CLAIMED_BY_RECEIVE)]
            live = self._receive_claims(db, [row["request_id"] for row in work if row["request_id"] not in claimed])
            end = rows[-1]["seq"] if rows else start
            return Page(
                records=[record_view(r) for r in rows],
                cursor=cursors.encode(self.database.cursor_secret, caller.agent_id, end),
                has_more=has_more,
                claims=[{"request_id": row["request_id"],
                         "claim_id": claimed.get(row["request_id"]) or live[row["request_id"]]} for row in work],
            )
        return job

    @staticmethod
    def _receive_claims(db: sqlite3.Connection, request_ids: list[str]) -> dict[str, str]:
        """The live receive claim of each of ``request_ids`` (tasks in the claimed state have one)."""
        if not request_ids:
            return {}
        marks = ", ".join("?" * len(request_ids))
        return {row[0]: row[1] for row in db.execute(
            f"SELECT request_id, claim_id FROM claims WHERE request_id IN ({marks}) AND released_at IS NULL "
            "AND claimant = ?", (*request_ids, Claimant.RECEIVE))}

    def _acknowledge(self, db: sqlite3.Connection, caller: AgentRow, acked: int, upto: int) -> None:
        """Move the caller's acknowledgement from ``acked`` to ``upto``: one position update and one evidence row.

        The row sits on the last record acknowledged and names the whole range (first and last seq and
        record id, and how many records it covers), so an acknowledgement costs the same whether it covers
        one record or a hundred thousand, and holds the writer no longer for the larger one.
        """
        first = db.execute(
            "SELECT seq, interaction_id, mailbox_index FROM interactions WHERE recipient_id = ? AND seq > ? "
            "ORDER BY seq LIMIT 1", (caller.agent_id, acked)).fetchone()
        last = db.execute(
            "SELECT seq, interaction_id, mailbox_index FROM interactions WHERE recipient_id = ? AND seq <= ? "
            "ORDER BY seq DESC LIMIT 1", (caller.agent_id, upto)).fetchone()
        db.execute("UPDATE cursors SET acked_seq = ?, updated_at = ? WHERE agent_id = ?",
                   (upto, now(), caller.agent_id))
        if first is None or last is None or first["seq"] > last["seq"]:
            return  # the positions between hold no record (a lost tail): nothing to name
        records.evidence(db, last["interaction_id"], Stage.ACKNOWLEDGED, {
            "by": caller.ref, "first_seq": first["seq"], "last_seq": last["seq"],
            "first_record_id": first["interaction_id"], "last_record_id": last["interaction_id"],
            "count": last["mailbox_index"] - first["mailbox_index"] + 1})

    # The caller's acknowledged position, inside one statement so each question reads one snapshot.
    _ACKED = "COALESCE((SELECT acked_seq FROM cursors WHERE agent_id = :agent), 0)"

    def unacknowledged(self, agent_id: str) -> int:
        """How many records wait in the mailbox after the last acknowledgement.

        A difference of two mailbox numbers, each found on the mailbox index: the
        same cost with ten records waiting or a hundred thousand.
        """
        newest = ("SELECT mailbox_index FROM interactions WHERE recipient_id = :agent "
                  "ORDER BY seq DESC LIMIT 1")
        acked = (f"SELECT mailbox_index FROM interactions WHERE recipient_id = :agent AND seq <= {self._ACKED} "
                 "ORDER BY seq DESC LIMIT 1")
        return self.database.db.execute(f"SELECT COALESCE(({newest}), 0) - COALESCE(({acked}), 0)",
                                        {"agent": agent_id}).fetchone()[0]

    def has_unacknowledged(self, agent_id: str) -> bool:
        """Whether any record waits after the last acknowledgement: one probe of the mailbox index, no count."""
        return self.database.db.execute(
            f"SELECT EXISTS (SELECT 1 FROM interactions WHERE recipient_id = :agent AND seq > {self._ACKED})",
            {"agent": agent_id}).fetchone()[0] == 1

    def _acked(self, db: sqlite3.Connection, agent_id: str) -> int:
        row = db.execute("SELECT acked_seq FROM cursors WHERE agent_id = ?", (agent_id,)).fetchone()
        return row[0] if row else 0

    def _position(self, db: sqlite3.Connection, caller: AgentRow, cursor: str) -> int:
        seq = cursors.decode(self.database.cursor_secret, caller.agent_id, cursor)
        newest = db.execute(
            "SELECT COALESCE(MAX(seq), 0) FROM interactions WHERE recipient_id = ?", (caller.agent_id,)
        ).fetchone()[0]
        if seq > newest:
            raise PeerwireError(Code.CURSOR_INVALID, "cursor points past the end of your mailbox")
        return seq

    # -- lookups (the rows behind records and requests) -------------------------------------

    def request(self, request_id: str) -> dict[str, Any]:
        req = records.request(self.database.db, request_id)
        task = records.interaction(self.database.db, req["task_interaction_id"])
        return {**dict(req), "state": task["state"]}

    def interaction(self, interaction_id: str) -> dict[str, Any]:
        """One record with its state, tool receipt and timestamps (as the export shows it)."""
        return export_record(records.interaction(self.database.db, interaction_id))
