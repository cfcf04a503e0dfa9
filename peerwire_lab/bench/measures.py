"""One round of measurements: every figure of the report and its baseline, in one directory."""

from __future__ import annotations

import sqlite3
import statistics
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from peerwire.control import ControlClient

from .baselines import peer_queue_puts, raw_commits
from .subjects import BenchApp, StdioMcp, fastmcp_argv

SESSIONS = 8


@dataclass(frozen=True)
class Sizes:
    sends: int
    wakes: int
    round_trips: int
    cold_starts: int
    mailbox: tuple[int, ...]
    page_reads: int

    @classmethod
    def quick(cls) -> "Sizes":
        return cls(sends=8, wakes=5, round_trips=10, cold_starts=1, mailbox=(500, 2_000), page_reads=3)

    @classmethod
    def full(cls) -> "Sizes":
        return cls(sends=400, wakes=300, round_trips=500, cold_starts=7, mailbox=(10_000, 100_000, 1_000_000),
                   page_reads=30)


def percentile(values: list[float], p: float) -> float:
    """The ``p`` quantile of ``values`` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


def measure_round(directory: Path, sizes: Sizes, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    say = progress or (lambda _: None)
    directory.mkdir(parents=True)
    out: dict[str, Any] = {}
    say("raw SQLite commits")
    out["raw_commits"], raw_commit_s = raw_commits(directory, max(sizes.sends, 200))
    out["raw_commit_ms"] = raw_commit_s * 1000
    say("peer queue")
    out["peer_puts"] = peer_queue_puts(directory, max(sizes.sends, 200))
    app = BenchApp(directory / "home").start()
    try:
        tokens = {name: app.register(name) for name in ("reader", *(f"sender-{i}" for i in range(SESSIONS)))}
        say("durable sends, one session")
        out["sends_1"] = _sends(app, [tokens["sender-0"]], sizes.sends)
        say(f"durable sends, {SESSIONS} sessions")
        out["sends_8"] = _sends(app, [tokens[f"sender-{i}"] for i in range(SESSIONS)], sizes.sends)
        say("wake latency")
        wakes = _wakes(app, tokens["sender-0"], tokens["reader"], sizes.wakes)
        out.update(wake_p50=percentile(wakes, 0.5), wake_p95=percentile(wakes, 0.95), wake_p99=percentile(wakes, 0.99))
        say("round trips and cold starts")
        out["list_agents_ms"], out["cold_ms"] = _served(lambda: StdioMcp.peerwire(app.home, tokens["reader"]),
                                                        "list_agents", {}, sizes)
        fastmcp = fastmcp_argv(directory)
        if fastmcp is None:
            out["fastmcp_echo_ms"] = out["fastmcp_cold_ms"] = "not measured: mcp not installed"
        else:
            out["fastmcp_echo_ms"], out["fastmcp_cold_ms"] = _served(lambda: StdioMcp(fastmcp), "echo",
                                                                     {"text": "hello"}, sizes)
        say("mailbox growth")
        out["mailbox"] = _mailbox_growth(app, tokens, sizes)
    finally:
        app.stop()
    return out


def _sends(app: BenchApp, tokens: list[str], per_session: int) -> float:
    """Durable sends per second over ``len(tokens)`` concurrent sessions (each waits for its receipts)."""
    sessions = [StdioMcp.peerwire(app.home, token) for token in tokens]
    for session in sessions:
        session.tool("send_message", {"target": "reader", "message": "warm-up"})
    barrier = threading.Barrier(len(sessions) + 1)

    def drive(session: StdioMcp) -> None:
        barrier.wait()
        for i in range(per_session):
            session.tool("send_message", {"target": "reader", "message": f"durable send {i}"})

    threads = [threading.Thread(target=drive, args=(s,)) for s in sessions]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    for session in sessions:
        session.close()
    return per_session * len(sessions) / elapsed


def _wakes(app: BenchApp, sender_token: str, reader_token: str, count: int) -> list[float]:
    """Milliseconds from writing a send in one process to reading the woken wait_agent in another."""
    sender, waiter = StdioMcp.peerwire(app.home, sender_token), StdioMcp.peerwire(app.home, reader_token)
    status = ControlClient(app.home)
    latencies = []
    try:
        for i in range(count):
            _acknowledge_all(waiter)
            waiter.write("tools/call", {"name": "wait_agent", "arguments": {"timeout_ms": 60_000}})
            deadline = time.monotonic() + 30
            while not status.call("status")["waiting"]:  # the wait is subscribed: now time the wake
                if time.monotonic() > deadline:
                    raise RuntimeError("the wait never subscribed")
            t0 = time.perf_counter()
            sender.write("tools/call", {"name": "send_message", "arguments": {"target": "reader", "message": f"w{i}"}})
            woke = waiter.read()
            latencies.append((time.perf_counter() - t0) * 1000)
            sender.read()
            if woke["result"]["structuredContent"].get("wake_reason") != "mailbox_activity":
                raise RuntimeError(f"unexpected wake: {woke}")
    finally:
        sender.close()
        waiter.close()
    return latencies


def _acknowledge_all(session: StdioMcp) -> None:
    page = session.tool("receive_messages", {"limit": 100})
    while page["records"]:
        page = session.tool("receive_messages", {"limit": 100, "ack_cursor": page["cursor"]})


def _served(start: Callable[[], StdioMcp], tool: str, arguments: dict, sizes: Sizes) -> tuple[float, float]:
    """(median warm round trip of ``tool``, median cold start to the initialize answer), in ms.

    The round-trip session's own start is the first cold-start sample.
    """
    session = start()
    cold = [session.ready_s * 1000]
    try:
        for _ in range(min(20, sizes.round_trips)):
            session.tool(tool, arguments)
        times = []
        for _ in range(sizes.round_trips):
            t0 = time.perf_counter()
            session.tool(tool, arguments)
            times.append((time.perf_counter() - t0) * 1000)
    finally:
        session.close()
    for _ in range(sizes.cold_starts - 1):
        again = start()
        again.close()
        cold.append(again.ready_s * 1000)
    return statistics.median(times), statistics.median(cold)


def _mailbox_growth(app: BenchApp, tokens: dict[str, str], sizes: Sizes) -> dict[int, dict[str, float]]:
    """Median ``receive_messages`` page latency (limit 50, the newest 50 unacknowledged) at each mailbox size.

    Each size is measured against a second app whose mailbox stays at the
    smallest size, one read of each in turn, so that a machine that gets busier
    between sizes slows both sides alike: the ratio is of reads taken together.
    """
    reader = StdioMcp.peerwire(app.home, tokens["reader"])
    try:
        records = reader.tool("receive_messages", {"limit": 1})["records"]
    finally:
        reader.close()
    if not records:
        raise RuntimeError("the reader's mailbox is empty; the send rows should have filled it")
    base_app = BenchApp(app.home.path.parent / "home-at-smallest").start()
    try:
        base_reader = base_app.register("reader")
        first = ControlClient(base_app.home, base_app.register("sender")).call(
            "send_message", {"target": "reader", "message": "template"})
        base_app.stop()
        _bulk_fill(base_app.home.db, first["interaction_id"], min(sizes.mailbox))
        base_app.start()
        out: dict[int, dict[str, float]] = {}
        for size in sizes.mailbox:
            app.stop()
            _bulk_fill(app.home.db, records[0]["record_id"], size)
            app.start()
            out[size] = _page_reads(StdioMcp.peerwire(app.home, tokens["reader"]),
                                    StdioMcp.peerwire(base_app.home, base_reader), size, sizes.page_reads)
    finally:
        base_app.stop()
    return out


def _page_reads(sized: StdioMcp, smallest: StdioMcp, size: int, reads: int) -> dict[str, float]:
    """Median page read (ms) of each session, the two read in turn."""
    times: dict[str, list[float]] = {"ms": [], "smallest_ms": []}
    try:
        for session in (sized, smallest):
            session.tool("receive_messages", {"limit": 50})  # warm: the first read marks the page received
        for _ in range(reads):
            for key, session in (("ms", sized), ("smallest_ms", smallest)):
                t0 = time.perf_counter()
                page = session.tool("receive_messages", {"limit": 50})
                times[key].append((time.perf_counter() - t0) * 1000)
                if len(page["records"]) != 50:
                    raise RuntimeError(f"expected a full page at {size} records, got {len(page['records'])}")
    finally:
        sized.close()
        smallest.close()
    return {key: statistics.median(values) for key, values in times.items()}


def _bulk_fill(db_path: Path, template: str, size: int) -> None:
    """Copy one stored record until its recipient's mailbox holds ``size`` records; leave the newest 50 unread.

    Written with the app stopped, in one transaction, straight into the store (a
    bench convenience: a million receipted sends would take hours at disk speed).
    """
    db = sqlite3.connect(db_path, isolation_level=None)
    try:
        db.execute("PRAGMA synchronous=OFF")
        recipient, = db.execute("SELECT recipient_id FROM interactions WHERE interaction_id = ?",
                                (template,)).fetchone()
        have, = db.execute("SELECT COUNT(*) FROM interactions WHERE recipient_id = ?", (recipient,)).fetchone()
        db.execute("BEGIN IMMEDIATE")
        db.execute(
            """WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :more)
               INSERT INTO interactions(interaction_id, kind, state, sender_id, sender_name, recipient_id,
                                        recipient_name, body, created_at, updated_at, mailbox_index)
               SELECT printf('ix_bench%024d', :have + i), kind, state, sender_id, sender_name, recipient_id,
                      recipient_name, 'bulk ' || i, created_at, updated_at, :have + i
               FROM interactions, n WHERE interaction_id = :template""",
            {"more": max(0, size - have), "have": have, "template": template})
        newest, = db.execute("SELECT MAX(seq) FROM interactions WHERE recipient_id = ?", (recipient,)).fetchone()
        db.execute("INSERT INTO cursors(agent_id, acked_seq, updated_at) VALUES (?, ?, datetime('now')) "
                   "ON CONFLICT(agent_id) DO UPDATE SET acked_seq = excluded.acked_seq", (recipient, newest - 50))
        db.execute("COMMIT")
    finally:
        db.close()
