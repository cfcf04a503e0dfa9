"""The growth section: what an operation costs in a large mailbox or roster, as a ratio to a small one.

Each figure is measured on a home whose mailbox holds N records, all
unacknowledged, and whose roster holds N agents, at a small N and a large one
(1e3 and 1e5; 1e2 and 1e3 in quick mode); each is reported as the ratio of the
large to the small. The target is a ratio of at most 2 for every one:

* acknowledging the whole mailbox (``receive_messages`` with an ``ack_cursor`` at its end);
* ``wait_agent`` (``timeout_ms`` 0) with N records unacknowledged;
* ``list_agents`` with a ``name_prefix`` that ten agents of the N match;
* the p99 of another agent's sends while the mailbox's owner acknowledges all N, again and again;
  this one also against its absolute bound, 50 ms, and against the same sends with no acknowledgement
  running (what the machine gives a send at that moment).

The mailbox and the roster are filled straight into the store with the app
stopped (a bench convenience, as for the page-latency rows), and between two
acknowledgements the acknowledged position is set back to the start through a
second connection, so every acknowledgement covers the whole mailbox.
"""

from __future__ import annotations

import sqlite3
import statistics
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from peerwire import cursor as cursors
from peerwire.control import ControlClient
from .measures import percentile
from .subjects import BenchApp, StdioMcp

SEND_P99_BOUND_MS = 50.0
"""Another agent's send, while an acknowledgement of the whole mailbox runs, stays under this (p99)."""
LISTED = 10
"""How many agents of the roster the ``list_agents`` prefix matches, at every size."""
MEASURES = ("ack_all_ms", "wait_ms", "list_agents_ms", "send_p99_ms", "send_p99_quiet_ms")


@dataclass(frozen=True)
class GrowthSizes:
    small: int
    large: int
    samples: int
    acks: int
    sends: int

    @classmethod
    def quick(cls) -> "GrowthSizes":
        return cls(small=100, large=1_000, samples=10, acks=3, sends=30)

    @classmethod
    def full(cls) -> "GrowthSizes":
        return cls(small=1_000, large=100_000, samples=200, acks=30, sends=300)


BLOCKS = 10
"""The sends are timed in this many blocks per size, the two sizes in turn."""


def measure_growth(directory: Path, sizes: GrowthSizes,
                   progress: Callable[[str], None] | None = None) -> dict[str, dict[int, float]]:
    """``{measure: {size: figure}}`` for each of :data:`MEASURES` at both sizes (milliseconds).

    Both homes run at once and every figure is taken from the two in turn, one
    sample (or one block of sends) of each, so that a machine that gets busier
    during the run slows both sizes alike: the ratio is of figures taken together.
    """
    say = progress or (lambda _: None)
    subjects: dict[int, _Subject] = {}
    try:
        for size in (sizes.small, sizes.large):
            say(f"growth: a mailbox and a roster of {size:,}")
            subjects[size] = _Subject.filled(directory / f"growth-{size}", size)
        times: dict[str, dict[int, list[float]]] = {measure: {size: [] for size in subjects} for measure in MEASURES}
        say("growth: wait_agent with the mailbox unacknowledged")
        for _ in range(sizes.samples):
            for size, subject in subjects.items():
                times["wait_ms"][size].append(_timed(lambda: _expect(
                    subject.owner.tool("wait_agent", {"timeout_ms": 0})["pending"], size, "records pending")))
        say("growth: list_agents by roster size")
        for _ in range(sizes.samples):
            for size, subject in subjects.items():
                times["list_agents_ms"][size].append(_timed(lambda: _expect(len(subject.sender.tool(
                    "list_agents", {"name_prefix": "probe-"})["agents"]), LISTED, "agents listed")))
        say("growth: acknowledging the whole mailbox")
        for _ in range(sizes.acks):
            for size, subject in subjects.items():
                subject.rewind()
                times["ack_all_ms"][size].append(_timed(subject.acknowledge_all))
        say("growth: sends with no acknowledgement running, and while the mailbox is acknowledged over and over")
        for _block in range(BLOCKS):
            for size, subject in subjects.items():
                times["send_p99_quiet_ms"][size] += _sends(subject.sender, sizes.sends // BLOCKS)
                times["send_p99_ms"][size] += subject.sends_during_acks(sizes.sends // BLOCKS)
    finally:
        for subject in subjects.values():
            subject.close()
    return {measure: {size: (percentile(values, 0.99) if measure.startswith("send_p99") else statistics.median(values))
                      for size, values in by_size.items()} for measure, by_size in times.items()}


class _Subject:
    """One running app whose owner's mailbox holds N unacknowledged records, in a roster of N agents."""

    def __init__(self, app: BenchApp, tokens: dict[str, str], end: "_End"):
        self.app = app
        self.owner = StdioMcp.peerwire(app.home, tokens["owner"])
        self.sender = StdioMcp.peerwire(app.home, tokens["sender"])
        self.end = end
        self.rewind = _Rewind(app.home.db, end.agent_id)

    @classmethod
    def filled(cls, home: Path, size: int) -> "_Subject":
        app = BenchApp(home).start()
        try:
            tokens = {name: app.register(name) for name in ("owner", "sender", "sink",
                                                            *(f"probe-{i}" for i in range(LISTED)))}
            template = ControlClient(app.home, tokens["sender"]).call(
                "send_message", {"target": "owner", "message": "template"})["interaction_id"]
            app.stop()
            end = _fill(app.home.db, template, size)
            app.start()
            return cls(app, tokens, end)
        except BaseException:
            app.stop()
            raise

    def acknowledge_all(self) -> None:
        self.owner.tool("receive_messages", {"ack_cursor": self.end.cursor, "limit": 1})

    def sends_during_acks(self, count: int) -> list[float]:
        """Milliseconds of each of ``count`` sends, made while the owner acknowledges its whole mailbox in a loop."""
        stop = threading.Event()
        acked = [0]

        def acknowledge() -> None:
            while not stop.is_set():
                self.rewind()
                self.acknowledge_all()
                acked[0] += 1

        acker = threading.Thread(target=acknowledge)
        acker.start()
        try:
            times = _sends(self.sender, count)
        finally:
            stop.set()
            acker.join()
        if not acked[0]:
            raise RuntimeError("no acknowledgement ran while the sends were timed")
        return times

    def close(self) -> None:
        try:
            self.owner.close()
            self.sender.close()
            self.rewind.close()
        finally:
            self.app.stop()


def _sends(sender: StdioMcp, count: int) -> list[float]:
    """Milliseconds of each of ``count`` sends, one after another, each waiting for its receipt."""
    times = []
    for i in range(count):
        t0 = time.perf_counter()
        sender.tool("send_message", {"target": "sink", "message": f"send {i}"})
        times.append((time.perf_counter() - t0) * 1000)
    return times


@dataclass(frozen=True)
class _End:
    agent_id: str
    cursor: str


def _fill(db_path: Path, template: str, size: int) -> _End:
    """Copy the template record until its recipient's mailbox holds ``size`` unacknowledged records, and add
    agents until the roster holds ``size``; returns a cursor at the mailbox's end (signed as the app signs)."""
    db = sqlite3.connect(db_path, isolation_level=None)
    try:
        # Durable, as the app would have written it: a fill left in the page cache unflushed would be
        # written out by the first commits measured, and slow the large home's figures for a reason of
        # the bench's own.
        db.execute("PRAGMA synchronous=FULL")
        db.execute("BEGIN IMMEDIATE")
        recipient, index = db.execute("SELECT recipient_id, mailbox_index FROM interactions WHERE interaction_id = ?",
                                      (template,)).fetchone()
        more = size - index
        if more > 0:
            db.execute(
                """WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :more)
                   INSERT INTO interactions(interaction_id, kind, state, sender_id, sender_name, recipient_id,
                                            recipient_name, body, created_at, updated_at, mailbox_index)
                   SELECT printf('ix_growth%023d', i), kind, state, sender_id, sender_name, recipient_id,
                          recipient_name, 'bulk ' || i, created_at, updated_at, :index + i
                   FROM interactions, n WHERE interaction_id = :template""",
                {"more": more, "index": index, "template": template})
        agents, = db.execute("SELECT COUNT(*) FROM agents").fetchone()
        if size > agents:
            db.execute(
                """WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :more)
                   INSERT INTO agents(agent_id, identity_key, name, provider, node_id, status, source, created_at,
                                      updated_at)
                   SELECT printf('00000000-0000-4000-8000-%012d', i), printf('00000000-0000-4000-8000-%012d', i),
                          printf('agent-%06d', i), provider, node_id, status, 'bench', created_at, updated_at
                   FROM agents, n WHERE agent_id = :recipient""",
                {"more": size - agents, "recipient": recipient})
        newest, = db.execute("SELECT MAX(seq) FROM interactions WHERE recipient_id = ?", (recipient,)).fetchone()
        secret, = db.execute("SELECT value FROM meta WHERE key = 'cursor_secret'").fetchone()
        db.execute("COMMIT")
    finally:
        db.close()
    return _End(recipient, cursors.encode(bytes.fromhex(secret), recipient, newest))


class _Rewind:
    """Sets the owner's acknowledged position back to the start (a second connection, as another process)."""

    def __init__(self, db_path: Path, agent_id: str):
        self.db = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA busy_timeout=10000")
        # Not durable, so it holds the store's write lock for microseconds, not an fsync: a send that met it
        # would wait in SQLite's busy handler, and that wait would be the bench's, not the acknowledgement's.
        self.db.execute("PRAGMA synchronous=OFF")
        self.agent_id = agent_id

    def __call__(self) -> None:
        self.db.execute("UPDATE cursors SET acked_seq = 0 WHERE agent_id = ?", (self.agent_id,))

    def close(self) -> None:
        self.db.close()


def _expect(found: Any, expected: Any, what: str) -> None:
    if found != expected:
        raise RuntimeError(f"expected {expected} {what}, found {found}")


def _timed(operation: Callable[[], Any]) -> float:
    """Milliseconds one run of ``operation`` took."""
    t0 = time.perf_counter()
    operation()
    return (time.perf_counter() - t0) * 1000
