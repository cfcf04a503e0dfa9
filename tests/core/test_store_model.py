"""Random operation sequences against the real store and a plain in-memory model.

The model is deliberately naive (lists and dicts); the store must agree with it
on every read: nothing lost; a task listed as new work, under its one claim,
by exactly the reads that return it before its recipient acknowledges past it
or answers it; a replayed cursor returning the same records and claiming
nothing new.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, invariant, rule

from peerwire.errors import Code, PeerwireError
from peerwire.store import Store

AGENTS = ("ann", "bob", "cy")
bodies = st.text(min_size=1, max_size=40)


class MailboxMachine(RuleBasedStateMachine):
    cursors = Bundle("cursors")

    def __init__(self) -> None:
        super().__init__()
        # tmpfs where there is one: this test is about the rules, not fsync latency.
        shm = Path("/dev/shm")
        self.dir = tempfile.TemporaryDirectory(dir=shm if shm.is_dir() else None)
        self.store = Store(Path(self.dir.name) / "db")
        self.rows = {name: self.store.registry.register_agent(name, "manual")[0] for name in AGENTS}
        # The model: every mailbox as a list of record ids, acknowledged prefix length, tasks.
        self.mailbox: dict[str, list[str]] = {n: [] for n in AGENTS}
        self.bodies: dict[str, str] = {}
        self.acked: dict[str, int] = {n: 0 for n in AGENTS}
        self.tasks: dict[str, dict] = {}
        self.claim_of: dict[str, str] = {}  # request id -> the one claim id it is ever listed under

    def teardown(self) -> None:
        self.store.close()
        self.dir.cleanup()

    def _admitted(self, recipient: str, receipt: dict, body: str) -> None:
        self.mailbox[recipient].append(receipt["interaction_id"])
        self.bodies[receipt["interaction_id"]] = body

    @rule(sender=st.sampled_from(AGENTS), recipient=st.sampled_from(AGENTS), body=bodies)
    def send(self, sender, recipient, body):
        receipt = self.store.mailbox.admit_information(self.rows[sender], self.rows[recipient], body)
        assert receipt["kind"] == "information" and "request_id" not in receipt
        self._admitted(recipient, receipt, body)

    @rule(sender=st.sampled_from(AGENTS), recipient=st.sampled_from(AGENTS), body=bodies)
    def followup(self, sender, recipient, body):
        receipt = self.store.mailbox.admit_task(self.rows[sender], self.rows[recipient], body)
        self._admitted(recipient, receipt, body)
        self.tasks[receipt["request_id"]] = {"requester": sender, "recipient": recipient, "replied": False}

    def _check_page(self, agent: str, start: int, limit: int, page) -> None:
        """The page a read from ``start`` must return, and exactly the work it must list."""
        expected = self.mailbox[agent][start:start + limit]
        assert [r["record_id"] for r in page.records] == expected
        assert [r["body"] for r in page.records] == [self.bodies[i] for i in expected]
        assert page.has_more == (len(self.mailbox[agent]) > start + limit)
        work = [r["request_id"] for index, r in enumerate(page.records, start)
                if r["kind"] == "task" and not self.tasks[r["request_id"]]["replied"] and index >= self.acked[agent]]
        assert page.new_work == work, "new work is every unanswered task not acknowledged past"
        assert [c["request_id"] for c in page.claims] == work
        for claim in page.claims:
            assert self.tasks[claim["request_id"]]["recipient"] == agent
            known = self.claim_of.setdefault(claim["request_id"], claim["claim_id"])
            assert claim["claim_id"] == known, "a task was listed under a second claim"
        for record in page.records:
            if record["kind"] == "information":
                assert "request_id" not in record

    @rule(target=cursors, agent=st.sampled_from(AGENTS), limit=st.integers(1, 5))
    def receive(self, agent, limit):
        page = self.store.mailbox.receive(self.rows[agent], limit=limit)
        start = self.acked[agent]
        self._check_page(agent, start, limit, page)
        return (agent, page.cursor, start + len(page.records))

    @rule(entry=cursors, limit=st.integers(1, 5))
    def replay(self, entry, limit):
        agent, cursor, position = entry
        first = self.store.mailbox.receive(self.rows[agent], cursor=cursor, limit=limit)
        again = self.store.mailbox.receive(self.rows[agent], cursor=cursor, limit=limit)
        assert again.records == first.records, "replaying a cursor changed the records"
        assert again.claims == first.claims, "replaying a cursor changed the work or its claims"
        self._check_page(agent, position, limit, first)

    def _acknowledgements(self) -> list[dict]:
        return [json.loads(row[0]) for row in self.store.database.db.execute(
            "SELECT detail FROM evidence WHERE stage = 'acknowledged' ORDER BY evidence_id")]

    @rule(entry=consumes(cursors))
    def ack(self, entry):
        agent, cursor, position = entry
        before = self._acknowledgements()
        page = self.store.mailbox.receive(self.rows[agent], ack_cursor=cursor, limit=1)
        written = self._acknowledgements()[len(before):]
        covered = self.mailbox[agent][self.acked[agent]:position]
        if covered:
            # One row for the whole range, whatever its length: its first and last record and how many.
            assert [(w["first_record_id"], w["last_record_id"], w["count"], w["by"]["agent_id"]) for w in written] \
                == [(covered[0], covered[-1], len(covered), self.rows[agent].agent_id)]
        else:
            assert written == [], "an acknowledgement that moves nothing writes nothing"
        self.acked[agent] = max(self.acked[agent], position)
        # Acknowledging is a receive too: it reads on from the acknowledged position.
        self._check_page(agent, self.acked[agent], 1, page)

    @rule(entry=cursors, other=st.sampled_from(AGENTS))
    def foreign_cursor(self, entry, other):
        agent, cursor, _ = entry
        if other == agent:
            return
        try:
            self.store.mailbox.receive(self.rows[other], cursor=cursor, limit=1)
        except PeerwireError as exc:
            assert exc.code is Code.CURSOR_INVALID
        else:
            raise AssertionError("a foreign cursor was accepted")

    @rule(data=st.data(), agent=st.sampled_from(AGENTS), status=st.sampled_from(["done", "blocked", "failed"]),
          body=bodies)
    def reply(self, data, agent, status, body):
        if not self.tasks:
            return
        # Insertion order, not the (random) ids, so hypothesis can replay the draw.
        request_id = list(self.tasks)[data.draw(st.integers(0, len(self.tasks) - 1))]
        task = self.tasks[request_id]
        try:
            receipt = self.store.mailbox.admit_reply(self.rows[agent], request_id, status, body)
        except PeerwireError as exc:
            if task["recipient"] != agent:
                assert exc.code is Code.NOT_AUTHORIZED
            else:
                assert task["replied"] and exc.code is Code.ALREADY_REPLIED
            return
        assert task["recipient"] == agent and not task["replied"]
        assert receipt["recipient"]["name"] == task["requester"]
        task["replied"] = True
        self._admitted(task["requester"], receipt, body)

    @invariant()
    def nothing_lost(self):
        for name in AGENTS:
            count = self.store.database.db.execute(
                "SELECT COUNT(*) FROM interactions WHERE recipient_id = ?", (self.rows[name].agent_id,)
            ).fetchone()[0]
            assert count == len(self.mailbox[name])
            waiting = len(self.mailbox[name]) - self.acked[name]
            assert self.store.mailbox.unacknowledged(self.rows[name].agent_id) == waiting
            assert self.store.mailbox.has_unacknowledged(self.rows[name].agent_id) == (waiting > 0)

    @invariant()
    def acknowledged_ranges_cover_exactly_the_acknowledged_prefix(self):
        for name in AGENTS:
            ranges = [a for a in self._acknowledgements() if a["by"]["agent_id"] == self.rows[name].agent_id]
            assert sum(a["count"] for a in ranges) == self.acked[name]
            assert [a["first_record_id"] for a in ranges] == [
                self.mailbox[name][sum(r["count"] for r in ranges[:i])] for i in range(len(ranges))]

    @invariant()
    def pending_tasks_are_the_unclaimed_ones(self):
        for name in AGENTS:
            agent_id = self.rows[name].agent_id
            unclaimed = [r[0] for r in self.store.database.db.execute(
                "SELECT request_id FROM interactions WHERE recipient_id = ? AND kind = 'task' AND request_id NOT IN "
                "(SELECT request_id FROM claims) AND request_id NOT IN (SELECT request_id FROM requests WHERE "
                "reply_interaction_id IS NOT NULL) ORDER BY seq", (agent_id,))]
            assert self.store.mailbox.pending_tasks(agent_id) == unclaimed
            assert self.store.mailbox.has_pending_tasks(agent_id) == bool(unclaimed)

    @invariant()
    def one_claim_per_task_ever(self):
        worst = self.store.database.db.execute(
            "SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM claims GROUP BY request_id)"
        ).fetchone()[0]
        assert worst in (None, 1), "a receive claim is never released nor replaced"

    @invariant()
    def one_live_claim_per_task(self):
        worst = self.store.database.db.execute(
            "SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM claims WHERE released_at IS NULL GROUP BY request_id)"
        ).fetchone()[0]
        assert worst in (None, 1)


MailboxMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestMailbox = MailboxMachine.TestCase
