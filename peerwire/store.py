"""The durable mailbox: one SQLite database per home.

Every write runs in a ``BEGIN IMMEDIATE`` transaction with ``synchronous=FULL`` in
WAL mode, so a receipt is returned only for what has reached the disk. State
changes go through the lifecycle tables (:mod:`peerwire.lifecycle`); an illegal
event raises inside the transaction and nothing is written.

The store does no waiting and no delivery: it only records facts. The app wakes
waiters and runs provider adapters after a transaction commits.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from . import cursor as cursors
from .errors import Code, PeerwireError
from .lifecycle import BINDING, CLAIM_EVENTS, INFORMATION, LIFECYCLES, NOTICE, REPLY, TASK, Claimant, Event, Kind, Stage
from .limits import TOKEN_BYTES
from .registry import SYSTEM_SENDER, AgentRow, resolve_target
from .schema import LATEST, MIGRATIONS


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


REPLY_STATUSES = ("done", "blocked", "failed")


class StoreDamaged(sqlite3.DatabaseError):
    """The store's integrity check failed: the file is not a whole SQLite database."""


@dataclass
class Page:
    """One receive batch. ``new_work`` names the tasks this call claimed."""

    records: list[dict[str, Any]]
    cursor: str
    has_more: bool
    new_work: list[str] = field(default_factory=list)


class Store:
    """The SQLite mailbox of one home. Not thread-safe: one owner at a time."""

    def __init__(self, path: Path | str, *, verify: bool = False):
        """Open (creating if missing) the store at ``path`` and bring its schema up to date.

        ``verify`` runs ``PRAGMA quick_check`` before anything is written and
        raises :class:`StoreDamaged` if the file is not whole.
        """
        self.path = Path(path)
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.db.row_factory = sqlite3.Row
        self.commits = 0
        """How many write transactions changed something since this store was opened."""
        self.on_commit: list[Callable[[], None]] = []
        """Called after each such commit (the app wakes change watchers with it)."""
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("PRAGMA foreign_keys=ON")
        self.db.execute("PRAGMA busy_timeout=10000")
        if verify:
            self._verify()
        self._migrate()
        self.node_id = self._meta("node_id", lambda: str(uuid.uuid4()))
        self._cursor_secret = bytes.fromhex(self._meta("cursor_secret", lambda: secrets.token_hex(32)))

    def close(self) -> None:
        self.db.close()

    def _verify(self) -> None:
        problems = [row[0] for row in self.db.execute("PRAGMA quick_check(3)")]
        if problems != ["ok"]:
            self.db.close()
            raise StoreDamaged("quick_check: " + "; ".join(" ".join(p.split()) for p in problems))

    # -- transactions -------------------------------------------------------

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction; commits on success, rolls back on any exception."""
        before = self.db.total_changes
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")
        if self.db.total_changes != before:
            self.commits += 1
            for notify in self.on_commit:
                notify()

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        self.db.execute("BEGIN")
        try:
            yield self.db
        finally:
            self.db.execute("COMMIT")

    def _migrate(self) -> None:
        with self.write() as db:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > LATEST:
                raise PeerwireError(
                    Code.INTERNAL,
                    f"store schema version {version} is newer than this peerwire ({LATEST}); upgrade peerwire",
                )
            for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
                for statement in _statements(script):
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {number}")

    def _meta(self, key: str, default: Any) -> str:
        with self.write() as db:
            row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            if row:
                return row["value"]
            value = default()
            db.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (key, value))
            return value

    @property
    def schema_version(self) -> int:
        return self.db.execute("PRAGMA user_version").fetchone()[0]

    # -- registry -----------------------------------------------------------

    def register_agent(
        self,
        name: str,
        provider: str,
        *,
        aliases: Sequence[str] = (),
        provider_session_id: str | None = None,
        source: str = "cli",
        status: str = "registered",
        path: str | None = None,
        parent_agent_id: str | None = None,
    ) -> tuple[AgentRow, str]:
        """Register an agent and issue its session credential (returned once).

        Registering again with the same provider and provider session id is a
        re-registration: a new row of the same identity, one generation later.
        """
        token = secrets.token_urlsafe(TOKEN_BYTES)
        agent_id = str(uuid.uuid4())
        stamp = now()
        with self.write() as db:
            identity_key = agent_id
            generation = 0
            if provider_session_id:
                identity_key = f"{provider}:{provider_session_id}"
                prior = db.execute(
                    "SELECT MAX(generation) FROM agents WHERE identity_key = ?", (identity_key,)
                ).fetchone()[0]
                if prior is not None:
                    generation = prior + 1
            if path is not None and db.execute("SELECT 1 FROM agents WHERE path = ?", (path,)).fetchone():
                raise PeerwireError(Code.INVALID_ARGUMENT, f"{path} already exists in this home",
                                    {"path": path})
            db.execute(
                """INSERT INTO agents(agent_id, identity_key, name, provider, provider_session_id,
                       node_id, generation, status, source, created_at, updated_at, path, parent_agent_id)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (agent_id, identity_key, name, provider, provider_session_id, self.node_id,
                 generation, status, source, stamp, stamp, path, parent_agent_id),
            )
            for alias in dict.fromkeys(aliases):
                db.execute("INSERT INTO agent_aliases(agent_id, alias) VALUES (?, ?)", (agent_id, alias))
            db.execute(
                "INSERT INTO sessions(token_hash, agent_id, issued_at) VALUES (?, ?, ?)",
                (hash_token(token), agent_id, stamp),
            )
            db.execute("INSERT INTO cursors(agent_id, acked_seq, updated_at) VALUES (?, 0, ?)", (agent_id, stamp))
        return self.agent(agent_id), token

    def agents(self, *, include_disabled: bool = True) -> list[AgentRow]:
        rows = self.db.execute("SELECT * FROM agents ORDER BY row_order").fetchall()
        aliases: dict[str, list[str]] = {}
        for a in self.db.execute("SELECT agent_id, alias FROM agent_aliases ORDER BY alias"):
            aliases.setdefault(a["agent_id"], []).append(a["alias"])
        out = [_agent_row(r, aliases.get(r["agent_id"], [])) for r in rows]
        return out if include_disabled else [a for a in out if a.enabled]

    def agent(self, agent_id: str) -> AgentRow:
        row = self.db.execute("SELECT * FROM agents WHERE agent_id = ?", (agent_id,)).fetchone()
        if row is None:
            raise PeerwireError(Code.UNKNOWN_TARGET, f"no agent has agent_id {agent_id!r}")
        aliases = [a[0] for a in self.db.execute(
            "SELECT alias FROM agent_aliases WHERE agent_id = ? ORDER BY alias", (agent_id,))]
        return _agent_row(row, aliases)

    def update_agent(self, agent_id: str, **fields: Any) -> AgentRow:
        allowed = {"enabled", "sendable", "status", "generation", "provider_session_id", "last_error"}
        unknown = set(fields) - allowed
        if unknown:
            raise ValueError(f"cannot update {sorted(unknown)}")
        with self.write() as db:
            sets = ", ".join(f"{k} = ?" for k in fields)
            db.execute(
                f"UPDATE agents SET {sets}, updated_at = ? WHERE agent_id = ?",
                (*fields.values(), now(), agent_id),
            )
        return self.agent(agent_id)

    def caller(self, token: str | None) -> AgentRow:
        """The agent a session credential belongs to, or ``unknown_caller``."""
        if not token:
            raise PeerwireError(
                Code.UNKNOWN_CALLER,
                "no session credential: set PEERWIRE_SESSION_ID to the token `peerwire agent register` printed",
            )
        row = self.db.execute(
            "SELECT agent_id, revoked_at FROM sessions WHERE token_hash = ?", (hash_token(token),)
        ).fetchone()
        if row is None or row["revoked_at"] is not None:
            raise PeerwireError(
                Code.UNKNOWN_CALLER,
                "this session credential is unknown or revoked in this home; register the agent again",
            )
        return self.agent(row["agent_id"])

    def agent_by_path(self, path: str) -> AgentRow:
        row = self.db.execute("SELECT agent_id FROM agents WHERE path = ?", (path,)).fetchone()
        if row is None:
            raise PeerwireError(Code.UNKNOWN_TARGET, f"no agent has the path {path!r}; list_agents shows the tree",
                                {"target": path})
        return self.agent(row[0])

    def agent_by_thread(self, thread_id: str) -> AgentRow | None:
        row = self.db.execute(
            "SELECT agent_id FROM agents WHERE provider_session_id = ? ORDER BY row_order DESC", (thread_id,)
        ).fetchone()
        return self.agent(row[0]) if row else None

    def descendants(self, path: str) -> list[AgentRow]:
        return [a for a in self.agents() if a.path and a.path.startswith(path + "/")]

    def revoke_sessions(self, agent_id: str) -> int:
        with self.write() as db:
            return db.execute(
                "UPDATE sessions SET revoked_at = ? WHERE agent_id = ? AND revoked_at IS NULL", (now(), agent_id)
            ).rowcount

    def resolve(self, target: Any, *, strict: bool = False) -> AgentRow:
        return resolve_target(self.agents(), target, strict=strict)

    # -- admission ----------------------------------------------------------

    def admit_information(
        self, sender: AgentRow, recipient: AgentRow, body: str, *, receipt: dict | None = None, run_id: str | None = None
    ) -> dict[str, Any]:
        with self.write() as db:
            ix = self._insert(db, Kind.INFORMATION, INFORMATION.initial, sender, recipient, body,
                              receipt=receipt, run_id=run_id)
        return self._receipt(ix)

    def admit_task(
        self, sender: AgentRow, recipient: AgentRow, body: str, *, receipt: dict | None = None, run_id: str | None = None
    ) -> dict[str, Any]:
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

    # -- lifecycle and evidence ----------------------------------------------

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

    # -- claims ---------------------------------------------------------------

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

    # -- receiving ------------------------------------------------------------

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

    # -- provider bindings -------------------------------------------------------

    def bind(self, request_id: str, claim_id: str, agent: AgentRow, generation: int, thread_id: str,
             turn_id: str, *, via: str, detail: dict | None = None) -> str:
        """The provider admitted the task into an exact turn: persist that before anything else."""
        binding_id = new_id("bd")
        stamp = now()
        facts = {"binding_id": binding_id, "generation": generation, "thread_id": thread_id, "turn_id": turn_id,
                 "via": via, **(detail or {})}
        with self.write() as db:
            task = self._task(db, request_id)
            state = BINDING.initial
            if task["state"] in TASK.terminal:
                # The recipient's explicit reply landed before the provider's acknowledgement
                # did: the turn is still bound (evidence), but it owes no automatic result.
                state = BINDING.next(state, Event.SUPPRESS)
                self._evidence(db, task["interaction_id"], Stage.PROVIDER_ACCEPTED_AFTER_REPLY, facts)
            else:
                self._transition(db, task, Event.PROVIDER_ACCEPTED, facts)
            db.execute(
                """INSERT INTO bindings(binding_id, request_id, claim_id, agent_id, generation, thread_id,
                       turn_id, state, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (binding_id, request_id, claim_id, agent.agent_id, generation, thread_id, turn_id,
                 state, stamp, stamp),
            )
        return binding_id

    def fail_request(self, request_id: str, body: str, *, code: str) -> dict[str, Any]:
        """A definite failure before anything was submitted: the failed reply, from peerwire."""
        with self.write() as db:
            ix = self._close_request(db, self._request(db, request_id), None, "failed", body, source="peerwire",
                                     code=code)
        return self._receipt(ix)

    def make_uncertain(self, request_id: str, reason: str, *, binding_id: str | None = None) -> dict[str, Any]:
        """Delivery may or may not have happened: record it, never replay, tell the requester."""
        with self.write() as db:
            task = self._task(db, request_id)
            req = self._request(db, request_id)
            event = Event.OBSERVATION_LOST if task["state"] == "accepted" else Event.PROVIDER_UNCERTAIN
            self._transition(db, task, event, {"reason": reason})
            if binding_id:
                self._binding_transition(db, binding_id, Event.OBSERVATION_LOST, {"reason": reason})
            requester = self.agent(req["requester_id"])
            body = (f"Delivery of your task {request_id} to {task['recipient_name']} is uncertain ({reason}). "
                    "peerwire will not send it again; ask the recipient or assign it anew if needed.")
            ix = self._insert(db, Kind.NOTICE, NOTICE.initial, None, requester, body, request_id=request_id,
                              notice_code="delivery_uncertain", evidence_detail={"reason": reason})
        return self._receipt(ix)

    def capture_outcome(self, binding_id: str, outcome: dict[str, Any]) -> str:
        """Persist a bound turn's terminal evidence; returns the binding's new state.

        When the recipient already replied explicitly, the automatic result is
        suppressed instead (the explicit reply stands).
        """
        with self.write() as db:
            binding = self._binding(db, binding_id)
            req = self._request(db, binding["request_id"])
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
        with self.write() as db:
            binding = self._binding(db, binding_id)
            req = self._request(db, binding["request_id"])
            if req["reply_interaction_id"] is not None:
                self._binding_transition(db, binding_id, Event.SUPPRESS,
                                         {"reply_interaction_id": req["reply_interaction_id"]})
                return None
            source = "turn_outcome" if sender is not None else "peerwire"
            ix = self._close_request(db, req, sender, status, body, source=source, code=code,
                                     detail={"binding_id": binding_id, "turn_id": binding["turn_id"]})
            self._binding_transition(db, binding_id, Event.PUBLISH, {"reply_interaction_id": ix["interaction_id"]})
        return self._receipt(ix)

    def bindings(self, *, state: str | None = None, turn_id: str | None = None) -> list[dict[str, Any]]:
        sql, params = "SELECT * FROM bindings WHERE 1 = 1", []
        if state is not None:
            sql += " AND state = ?"
            params.append(state)
        if turn_id is not None:
            sql += " AND turn_id = ?"
            params.append(turn_id)
        rows = [dict(r) for r in self.db.execute(sql + " ORDER BY created_at", params)]
        for row in rows:
            row["outcome"] = _json(row["outcome"])
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
        task = self._task(db, binding["request_id"])
        self._evidence(db, task["interaction_id"], BINDING.stage(event),
                       {"binding_id": binding_id, "from": binding["state"], "to": new_state, **detail})
        return new_state

    # -- lookups ----------------------------------------------------------------

    def _interaction(self, db: sqlite3.Connection, interaction_id: str) -> sqlite3.Row:
        row = db.execute("SELECT * FROM interactions WHERE interaction_id = ?", (interaction_id,)).fetchone()
        if row is None:
            raise PeerwireError(Code.UNKNOWN_INTERACTION, f"no interaction {interaction_id!r} in this home")
        return row

    def _request(self, db: sqlite3.Connection, request_id: str) -> sqlite3.Row:
        row = db.execute("SELECT * FROM requests WHERE request_id = ?", (request_id,)).fetchone()
        if row is None:
            raise PeerwireError(
                Code.UNKNOWN_REQUEST,
                f"no task has request_id {request_id!r}; reply takes the request_id of a task you received",
                {"request_id": request_id},
            )
        return row

    def _task(self, db: sqlite3.Connection, request_id: str) -> sqlite3.Row:
        req = self._request(db, request_id)
        return self._interaction(db, req["task_interaction_id"])

    def request(self, request_id: str) -> dict[str, Any]:
        req = self._request(self.db, request_id)
        task = self._interaction(self.db, req["task_interaction_id"])
        return {**dict(req), "state": task["state"]}

    def interaction(self, interaction_id: str) -> dict[str, Any]:
        row = self._interaction(self.db, interaction_id)
        return {**record_view(row), "state": row["state"], "tool_receipt": _json(row["tool_receipt"])}

    def trace(self, ident: str) -> dict[str, Any]:
        """Every recorded stage of one interaction (or of a request's task and reply)."""
        with self.read() as db:
            if ident.startswith("rq_"):
                req = self._request(db, ident)
                ids = [req["task_interaction_id"]] + ([req["reply_interaction_id"]] if req["reply_interaction_id"] else [])
                ids += [r[0] for r in db.execute(
                    "SELECT interaction_id FROM interactions WHERE request_id = ? AND kind = ? ORDER BY seq",
                    (ident, Kind.NOTICE))]
            else:
                ids = [self._interaction(db, ident)["interaction_id"]]
            out = []
            for interaction_id in ids:
                row = self._interaction(db, interaction_id)
                stages = [
                    {"stage": e["stage"], "at": e["at"], "detail": json.loads(e["detail"])}
                    for e in db.execute(
                        "SELECT * FROM evidence WHERE interaction_id = ? ORDER BY evidence_id", (interaction_id,))
                ]
                out.append({**record_view(row), "state": row["state"],
                            "tool_receipt": _json(row["tool_receipt"]), "stages": stages})
            bindings = []
            if ident.startswith("rq_"):
                bindings = [dict(b) for b in db.execute(
                    "SELECT * FROM bindings WHERE request_id = ? ORDER BY created_at", (ident,))]
        return {"id": ident, "interactions": out, "bindings": bindings}

    def dump(self) -> dict[str, list[dict[str, Any]]]:
        """Every row of every table, raw (the core's own tests read it; everyone else reads the export)."""
        tables = [r[0] for r in self.db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        out: dict[str, list[dict[str, Any]]] = {}
        for table in tables:
            rows = [dict(r) for r in self.db.execute(f"SELECT * FROM {table}")]
            if table == "sessions":
                rows = [{k: v for k, v in r.items() if k != "token_hash"} for r in rows]
            if table == "meta":
                rows = [r for r in rows if r["key"] != "cursor_secret"]
            out[table] = rows
        return out


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


def _agent_row(row: sqlite3.Row, aliases: Sequence[str]) -> AgentRow:
    return AgentRow(
        agent_id=row["agent_id"],
        identity_key=row["identity_key"],
        name=row["name"],
        aliases=tuple(aliases),
        provider=row["provider"],
        provider_session_id=row["provider_session_id"],
        node_id=row["node_id"],
        enabled=bool(row["enabled"]),
        sendable=bool(row["sendable"]),
        generation=row["generation"],
        status=row["status"],
        source=row["source"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        last_error=row["last_error"],
        row_order=row["row_order"],
        path=row["path"],
        parent_agent_id=row["parent_agent_id"],
    )


def _json(text: str | None) -> Any:
    return json.loads(text) if text else None


def _statements(script: str) -> list[str]:
    # sqlite3's executescript() would COMMIT our transaction; split instead.
    out, buf = [], []
    for line in script.splitlines():
        if line.strip().startswith("--"):
            continue
        buf.append(line)
        if line.rstrip().endswith(";"):
            stmt = "\n".join(buf).strip()
            if stmt:
                out.append(stmt)
            buf = []
    tail = "\n".join(buf).strip()
    if tail:
        out.append(tail)
    return out
