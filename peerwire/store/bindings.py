"""Provider bindings: one task admitted into one exact provider turn, and what became of it.

The binding is persisted before the turn's completion is observed; its terminal
evidence (the captured outcome) before the reply is published. Each binding event
is also an evidence row of the task (:data:`peerwire.lifecycle.BINDING` names its stage).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ..errors import Code, PeerwireError
from ..lifecycle import BINDING, NOTICE, TASK, Event, Kind, Stage
from ..registry_rules import AgentRow
from . import records
from .db import Database, json_column, new_id, now
from .registry_rows import agent_row


class Bindings:
    """Bindings of tasks to provider turns, their outcomes, and the uncertain and failed ends."""

    def __init__(self, database: Database):
        self.database = database

    def bind(self, request_id: str, claim_id: str, agent: AgentRow, generation: int, thread_id: str,
             turn_id: str, *, via: str, detail: dict | None = None) -> str:
        """The provider admitted the task into an exact turn: persist that before anything else."""
        binding_id = new_id("bd")
        stamp = now()
        facts = {"binding_id": binding_id, "generation": generation, "thread_id": thread_id, "turn_id": turn_id,
                 "via": via, **(detail or {})}
        with self.database.write() as db:
            task = records.task(db, request_id)
            state = BINDING.initial
            if task["state"] in TASK.terminal:
                # The recipient's explicit reply landed before the provider's acknowledgement
                # did: the turn is still bound (evidence), but it owes no automatic result.
                state = BINDING.next(state, Event.SUPPRESS)
                records.evidence(db, task["interaction_id"], Stage.PROVIDER_ACCEPTED_AFTER_REPLY, facts)
            else:
                records.transition(db, task, Event.PROVIDER_ACCEPTED, facts)
            db.execute(
                """INSERT INTO bindings(binding_id, request_id, claim_id, agent_id, generation, thread_id,
                       turn_id, state, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (binding_id, request_id, claim_id, agent.agent_id, generation, thread_id, turn_id,
                 state, stamp, stamp),
            )
        return binding_id

    def fail_request(self, request_id: str, body: str, *, code: str) -> dict[str, Any]:
        """A definite failure before anything was submitted: the failed reply, from peerwire."""
        with self.database.write() as db:
            ix = records.close_request(db, records.request(db, request_id), None, "failed", body, source="peerwire",
                                       code=code)
        return records.receipt(ix)

    def make_uncertain(self, request_id: str, reason: str, *, binding_id: str | None = None) -> dict[str, Any]:
        """Delivery may or may not have happened: record it, never replay, tell the requester."""
        with self.database.write() as db:
            task = records.task(db, request_id)
            req = records.request(db, request_id)
            event = Event.OBSERVATION_LOST if task["state"] == "accepted" else Event.PROVIDER_UNCERTAIN
            records.transition(db, task, event, {"reason": reason})
            if binding_id:
                self._binding_transition(db, binding_id, Event.OBSERVATION_LOST, {"reason": reason})
            requester = agent_row(db, req["requester_id"])
            body = (f"Delivery of your task {request_id} to {task['recipient_name']} is uncertain ({reason}). "
                    "peerwire will not send it again; ask the recipient or assign it anew if needed.")
            ix = records.insert(db, Kind.NOTICE, NOTICE.initial, None, requester, body, request_id=request_id,
                                notice_code="delivery_uncertain", evidence_detail={"reason": reason})
        return records.receipt(ix)

    def capture_outcome(self, binding_id: str, outcome: dict[str, Any]) -> str:
        """Persist a bound turn's terminal evidence; returns the binding's new state.

        When the recipient already replied explicitly, the automatic result is
        suppressed instead (the explicit reply stands).
        """
        with self.database.write() as db:
            binding = self._binding(db, binding_id)
            req = records.request(db, binding["request_id"])
            if req["reply_interaction_id"] is not None:
                return self._binding_transition(db, binding_id, Event.SUPPRESS,
                                                {"reply_interaction_id": req["reply_interaction_id"]})
            db.execute("UPDATE bindings SET outcome = ? WHERE binding_id = ?",
                       (json.dumps(outcome, ensure_ascii=False), binding_id))
            summary = {k: v for k, v in outcome.items() if k != "text"}
            return self._binding_transition(db, binding_id, Event.CAPTURE, summary)

    def publish_outcome(self, binding_id: str, sender: AgentRow | None, status: str, body: str, *,
                        code: str | None = None) -> dict[str, Any] | None:
        """Publish a captured outcome as the request's reply (None if it was replied meanwhile)."""
        with self.database.write() as db:
            binding = self._binding(db, binding_id)
            req = records.request(db, binding["request_id"])
            if req["reply_interaction_id"] is not None:
                self._binding_transition(db, binding_id, Event.SUPPRESS,
                                         {"reply_interaction_id": req["reply_interaction_id"]})
                return None
            source = "turn_outcome" if sender is not None else "peerwire"
            ix = records.close_request(db, req, sender, status, body, source=source, code=code,
                                       detail={"binding_id": binding_id, "turn_id": binding["turn_id"]})
            self._binding_transition(db, binding_id, Event.PUBLISH, {"reply_interaction_id": ix["interaction_id"]})
        return records.receipt(ix)

    def find(self, *, state: str | None = None, turn_id: str | None = None) -> list[dict[str, Any]]:
        """Every binding, or those in ``state`` or of ``turn_id``, oldest first, with its captured outcome."""
        sql, params = "SELECT * FROM bindings WHERE 1 = 1", []
        if state is not None:
            sql += " AND state = ?"
            params.append(state)
        if turn_id is not None:
            sql += " AND turn_id = ?"
            params.append(turn_id)
        rows = [dict(r) for r in self.database.db.execute(sql + " ORDER BY created_at", params)]
        for row in rows:
            row["outcome"] = json_column(row["outcome"])
        return rows

    def _binding(self, db: sqlite3.Connection, binding_id: str) -> sqlite3.Row:
        row = db.execute("SELECT * FROM bindings WHERE binding_id = ?", (binding_id,)).fetchone()
        if row is None:
            raise PeerwireError(Code.UNKNOWN_REQUEST, f"no binding {binding_id!r}")
        return row

    def _binding_transition(self, db: sqlite3.Connection, binding_id: str, event: Event, detail: dict) -> str:
        binding = self._binding(db, binding_id)
        new_state = BINDING.next(binding["state"], event)
        db.execute("UPDATE bindings SET state = ?, updated_at = ? WHERE binding_id = ?",
                   (new_state, now(), binding_id))
        task = records.task(db, binding["request_id"])
        records.evidence(db, task["interaction_id"], BINDING.stage(event),
                         {"binding_id": binding_id, "from": binding["state"], "to": new_state, **detail})
        return new_state
