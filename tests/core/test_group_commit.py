"""Group commit: writes that arrive during a commit share the next one, and no receipt comes early.

In-process tests hold the store's write lock (a commit in flight, as far as the
writer thread can tell) to make a group form deterministically; the crash test
runs a real app under concurrent senders and kills it with SIGKILL.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import threading
from contextlib import closing
from pathlib import Path

import anyio
import pytest

from peerwire.control import ControlClient
from peerwire.errors import Code, PeerwireError
from peerwire.store import Store
from tests.patience import WAIT_S

BOUND_S = WAIT_S


async def until(predicate) -> None:
    """Re-check an observable condition of the writer thread (it has no event to wait on)."""
    while not predicate():
        await asyncio.sleep(0.001)


def durable(path: Path, interaction_id: str) -> bool:
    with closing(sqlite3.connect(path)) as db:
        return db.execute("SELECT 1 FROM interactions WHERE interaction_id = ?", (interaction_id,)).fetchone() is not None


async def _grouped(store: Store, first, rest: list):
    """Run ``first`` while the write lock is held, so ``rest`` queues behind it; then release."""
    store.database._write_lock.acquire()
    try:
        head = asyncio.ensure_future(store.database.commit(first))
        # the writer took it
        await until(lambda: store.database._group is not None and store.database._group.pending == 0)
        tail = [asyncio.ensure_future(store.database.commit(job)) for job in rest]
        await until(lambda: store.database._group.pending == len(rest))  # the rest queued behind it
        await asyncio.sleep(0)
        assert not head.done() and not any(t.done() for t in tail), "no receipt before its commit"
    finally:
        store.database._write_lock.release()
    done = await asyncio.gather(head, *tail, return_exceptions=True)
    return done[0], done[1:]


@pytest.fixture
def pair(tmp_path: Path):
    """A store with two agents, a and b."""
    store = Store(tmp_path / "peerwire.db")
    a, _ = store.registry.register_agent("a", "manual")
    b, _ = store.registry.register_agent("b", "manual")
    yield store, a, b
    store.close()


def test_jobs_that_arrive_during_a_commit_share_the_next_one(pair):
    store, a, b = pair

    async def main():
        with anyio.fail_after(BOUND_S):
            first, rest = await _grouped(store, store.mailbox.information_job(a, b, "first"),
                                         [store.mailbox.task_job(a, b, f"task {i}") for i in range(5)])
        assert all(durable(store.database.path, r["interaction_id"]) for r in [first, *rest])
        assert store.database.group_stats == {"commits": 2, "jobs": 6, "largest": 5, "abandoned": 0}

    asyncio.run(main())
    bodies = [r["body"] for r in store.mailbox.receive(b, limit=10).records]
    assert bodies == ["first"] + [f"task {i}" for i in range(5)]


def test_a_failing_job_fails_alone(pair):
    store, a, b = pair

    async def main():
        with anyio.fail_after(BOUND_S):
            return await _grouped(store, store.mailbox.information_job(a, b, "before"), [
                store.mailbox.information_job(a, b, "kept 1"),
                store.mailbox.reply_job(b, "rq_" + "0" * 32, "done", "to nothing"),
                store.mailbox.information_job(a, b, "kept 2"),
            ])

    _, (one, failed, two) = asyncio.run(main())
    assert isinstance(failed, PeerwireError) and failed.code is Code.UNKNOWN_REQUEST
    assert durable(store.database.path, one["interaction_id"]) and durable(store.database.path, two["interaction_id"])
    assert [r["body"] for r in store.mailbox.receive(b, limit=10).records] == ["before", "kept 1", "kept 2"]
    assert store.database.group_stats["largest"] == 3


def test_a_receive_whose_caller_left_before_its_commit_claims_nothing(pair):
    """A cancelled call (its connection closed, its MCP request cancelled) that the writer has not
    taken yet never runs: the task stays pending, for dispatch or the recipient's next read."""
    store, a, b = pair
    request_id = store.mailbox.admit_task(a, b, "work")["request_id"]

    async def main():
        with anyio.fail_after(BOUND_S):
            store.database._write_lock.acquire()
            try:
                head = asyncio.ensure_future(store.database.commit(store.mailbox.information_job(a, b, "in flight")))
                await until(lambda: store.database._group is not None and store.database._group.pending == 0)
                gone = asyncio.ensure_future(store.database.commit(store.mailbox.receive_job(b, limit=10)))
                await until(lambda: store.database._group.pending == 1)
                gone.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await gone
            finally:
                store.database._write_lock.release()
            await head
            # The writer is idle again once the next job is answered: the abandoned one was dropped by then.
            return await store.database.commit(store.mailbox.receive_job(b, limit=10))

    page = asyncio.run(main())
    assert store.database.group_stats["abandoned"] == 1
    claims = store.dump()["claims"]
    assert [c["request_id"] for c in claims] == [request_id], "claimed once, by the read that was answered"
    assert page.claims == [{"request_id": request_id, "claim_id": claims[0]["claim_id"]}]


@pytest.mark.slow
def test_kill_9_during_concurrent_sends_loses_no_receipted_record(core):
    """Eight concurrent senders, their sends grouped into shared commits; SIGKILL; every receipt survives."""
    a, b = core.register("a"), core.register("b")
    receipts: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()
    enough = threading.Event()

    def sender(index: int) -> None:
        client = ControlClient(core.home, a.token)
        n = 0
        while not stop.is_set():
            n += 1
            try:
                receipt = client.call("followup_task", {"target": "b", "message": f"sender {index} task {n}"})
            except PeerwireError:
                return  # the app is gone: this send has no receipt, so it promises nothing
            with lock:
                receipts.append(receipt["interaction_id"])
                if len(receipts) >= 400:
                    enough.set()

    threads = [threading.Thread(target=sender, args=(i,), daemon=True) for i in range(8)]
    for thread in threads:
        thread.start()
    try:
        assert enough.wait(BOUND_S), f"only {len(receipts)} receipts"
        grouped = ControlClient(core.home).call("status")["group_commit"]
        core.app.process.send_signal(signal.SIGKILL)
        core.app.process.wait()
    finally:
        stop.set()
        for thread in threads:
            thread.join(BOUND_S)
    assert grouped["jobs"] > grouped["commits"], f"the sends never shared a commit: {grouped}"
    with lock:
        promised = list(receipts)
    core.restart()
    stored = set()
    client, cursor = ControlClient(core.home, b.token), None
    while True:
        page = client.call("receive_messages", {"limit": 100, **({"ack_cursor": cursor} if cursor else {})})
        if not page["records"]:
            break
        stored.update(r["record_id"] for r in page["records"])
        cursor = page["cursor"]
    lost = [ix for ix in promised if ix not in stored]
    assert not lost, f"{len(lost)} of {len(promised)} receipted records lost"
