"""Baselines measured in the same run: the disk, a library a user might pick instead.

Every durable figure stands on ``synchronous=FULL`` in WAL mode: a raw SQLite
loop with one row per ``BEGIN IMMEDIATE`` ... ``COMMIT`` is the floor; the peer
is a durable SQLite queue from PyPI (persist-queue), each ``put`` its own
commit at the same ``synchronous`` setting.
"""

from __future__ import annotations

import sqlite3
import statistics
import time
from pathlib import Path


def _raw_db(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
    return db


def raw_commits(directory: Path, count: int) -> tuple[float, float]:
    """(commits per second, median seconds of one commit) of the raw single-commit loop."""
    db = _raw_db(directory / "raw.db")
    durations = []
    start = time.perf_counter()
    for i in range(count):
        t0 = time.perf_counter()
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO t(body) VALUES (?)", (f"message {i}",))
        db.execute("COMMIT")
        durations.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - start
    db.close()
    return count / elapsed, statistics.median(durations)


def peer_queue_puts(directory: Path, count: int) -> float | str:
    """persist-queue's SQLiteQueue puts per second (auto-commit: one commit each), or why not measured."""
    try:
        from persistqueue import SQLiteQueue
    except ImportError:
        return "not measured: persist-queue not installed (pip install 'peerwire[bench]')"
    queue = SQLiteQueue(str(directory / "peer-queue"), auto_commit=True, multithreading=False)
    try:
        queue._putter.execute("PRAGMA synchronous=FULL")  # the same durability as the raw loop and peerwire
        start = time.perf_counter()
        for i in range(count):
            queue.put({"body": f"message {i}"})
        return count / (time.perf_counter() - start)
    finally:
        queue.close()
