"""Group commit: write jobs that arrive together share one ``synchronous=FULL`` commit.

The app answers calls on one asyncio loop. A commit is an fsync; if the loop
made it, no other call could even be read meanwhile, and every receipt would
cost a disk flush of its own. Instead, write jobs (a function of a connection,
e.g. "admit this task") are queued to one writer thread with a connection of
its own. The thread takes every job queued so far, runs them in one
transaction, each inside a savepoint of its own, commits once, and only then
resolves each job's future: no caller gets a receipt before the commit that
holds its record is on disk, and the jobs that arrived during that commit form
the next group.

A job that raises is rolled back to its savepoint and gets its own error; the
others commit. A failure of the transaction itself (a full disk at commit)
fails every job of the group: none of them was admitted.

A job whose caller went away (its call was cancelled: the connection closed,
the MCP request was cancelled) before the writer took it is never run, so a
caller that is gone claims nothing and admits nothing. Once taken, a job
commits with its group whatever becomes of its caller.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")
Job = Callable[[sqlite3.Connection], Any]

MAX_GROUP = 256
"""Jobs in one transaction at most; more wait for the next (bounds one commit's latency)."""


@dataclass(eq=False)
class _Queued:
    job: Job
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop
    abandoned: bool = False
    """Set (under the queue's lock) when the caller stopped waiting before the writer took the job."""


@dataclass
class GroupStats:
    commits: int = 0
    jobs: int = 0
    largest: int = 0
    abandoned: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"commits": self.commits, "jobs": self.jobs, "largest": self.largest, "abandoned": self.abandoned}


class GroupCommit:
    """The writer thread of one store.

    ``connect`` opens the thread's connection (the store's pragmas);
    ``write_lock`` is held around each group, so the store's synchronous
    writes on the loop's connection never contend with a group inside SQLite;
    ``failure`` turns a ``sqlite3.Error`` into what callers see;
    ``committed`` runs on the caller's loop after each commit that changed
    something; ``durable(connection)`` runs in the writer thread right after
    such a commit, before any of its jobs' results are handed over (the store
    advances its high-water mark there); ``check()`` runs just before and just
    after each ``COMMIT`` and raises to fail the whole group (the store refuses
    there when its file is no longer the one it opened).
    """

    def __init__(self, connect: Callable[[], sqlite3.Connection], write_lock: threading.Lock,
                 failure: Callable[[sqlite3.Error], BaseException], committed: Callable[[], None],
                 durable: Callable[[sqlite3.Connection], None] = lambda db: None,
                 check: Callable[[], None] = lambda: None):
        self._db = connect()
        self._durable = durable
        self._check = check
        self._lock = write_lock
        self._failure = failure
        self._committed = committed
        self._queue: deque[_Queued] = deque()
        self._wake = threading.Condition()
        self._closed = False
        self.stats = GroupStats()
        self._thread = threading.Thread(target=self._run, name="group-commit", daemon=True)
        self._thread.start()

    @property
    def pending(self) -> int:
        """Jobs queued and not yet taken into a group."""
        return len(self._queue)

    async def run(self, job: Callable[[sqlite3.Connection], T]) -> T:
        """``job(connection)`` inside the next group; its result once that group is committed."""
        loop = asyncio.get_running_loop()
        queued = _Queued(job, loop.create_future(), loop)
        with self._wake:
            if self._closed:
                raise RuntimeError("the store is closed")
            self._queue.append(queued)
            self._wake.notify()
        try:
            return await queued.future
        except asyncio.CancelledError:
            with self._wake:
                if queued in self._queue:  # not taken yet: it never runs
                    queued.abandoned = True
            raise

    def close(self) -> None:
        """Commit what is queued, then stop the thread and close its connection."""
        with self._wake:
            self._closed = True
            self._wake.notify()
        self._thread.join()
        self._db.close()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._queue and not self._closed:
                    self._wake.wait()
                if not self._queue:
                    return
                taken = [self._queue.popleft() for _ in range(min(len(self._queue), MAX_GROUP))]
                group = [queued for queued in taken if not queued.abandoned]
                self.stats.abandoned += len(taken) - len(group)
            if not group:
                continue
            outcomes, changed = self._commit([queued.job for queued in group])
            # One hand-over per loop: the commit is announced before any caller resumes with its receipt.
            by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future, tuple[bool, Any]]]] = {}
            for queued, outcome in zip(group, outcomes):
                by_loop.setdefault(queued.loop, []).append((queued.future, outcome))
            for loop, settled in by_loop.items():
                try:
                    loop.call_soon_threadsafe(self._hand_over, changed, settled)
                except RuntimeError:
                    pass  # that loop has closed: nobody waits for these answers any more

    def _commit(self, jobs: list[Job]) -> tuple[list[tuple[bool, Any]], bool]:
        db = self._db
        outcomes: list[tuple[bool, Any]] = []
        with self._lock:
            before = db.total_changes
            try:
                db.execute("BEGIN IMMEDIATE")
                for job in jobs:
                    db.execute("SAVEPOINT job")
                    try:
                        outcomes.append((True, job(db)))
                    except Exception as exc:  # the job's own failure: undo it alone
                        if not db.in_transaction:
                            raise  # SQLite ended the whole transaction (a full disk mid-job)
                        db.execute("ROLLBACK TO job")
                        outcomes.append((False, self._failure(exc) if isinstance(exc, sqlite3.Error) else exc))
                    finally:
                        if db.in_transaction:
                            db.execute("RELEASE job")
                self._check()
                db.execute("COMMIT")
                self._check()  # committed into a file that is no longer the store: no receipt for it
                changed = db.total_changes != before
                if changed:
                    self._durable(db)  # before any receipt of the group is handed over
            except Exception as exc:
                if db.in_transaction:
                    try:
                        db.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass
                error = self._failure(exc) if isinstance(exc, sqlite3.Error) else exc
                return [(False, _own_copy(error)) for _ in jobs], False
        self.stats.commits += 1
        self.stats.jobs += len(jobs)
        self.stats.largest = max(self.stats.largest, len(jobs))
        return outcomes, changed

    def _hand_over(self, changed: bool, settled: list[tuple[asyncio.Future, tuple[bool, Any]]]) -> None:
        if changed:
            self._committed()
        for future, outcome in settled:
            _settle(future, outcome)


def _own_copy(error: BaseException) -> BaseException:
    """One exception object per caller: each awaiting caller raises (and annotates) its own."""
    from .errors import PeerwireError

    if isinstance(error, PeerwireError):
        copy = PeerwireError(error.code, error.message, dict(error.details))
        copy.__cause__ = error.__cause__
        return copy
    return error


def _settle(future: asyncio.Future, outcome: tuple[bool, Any]) -> None:
    if future.cancelled():
        return  # the caller went away; what was committed stays committed
    ok, value = outcome
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)
