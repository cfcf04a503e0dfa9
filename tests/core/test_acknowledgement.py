"""Acknowledgement as a range: one position update and one evidence row, whatever it covers.

An ``ack_cursor`` moves the recipient's acknowledged position; the evidence is one
``acknowledged`` row on the last record it covers, naming the range (first and
last seq and record id, and how many records). What a receive returns, what a
replay returns and which tasks are still offered follow the position alone.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from harness.evidence.core import CoreEvidence
from peerwire import cursor as cursors
from peerwire import export
from peerwire.errors import Code, PeerwireError
from peerwire.home import Home
from peerwire.lifecycle import Stage
from peerwire.schema import MIGRATIONS
from peerwire.store import Store
from .conftest import call
from .test_export import violations


@pytest.fixture
def store(tmp_path: Path):
    opened = Store(tmp_path / "db")
    yield opened
    opened.close()


def pair(store: Store):
    return store.registry.register_agent("ann", "manual")[0], store.registry.register_agent("bob", "manual")[0]


def acknowledged_rows(store: Store) -> list[dict]:
    return [{**dict(row), "detail": json.loads(row["detail"])} for row in store.database.db.execute(
        "SELECT * FROM evidence WHERE stage = ? ORDER BY evidence_id", (Stage.ACKNOWLEDGED,))]


def evidence_rows(store: Store) -> int:
    return store.database.db.execute("SELECT COUNT(*) FROM evidence").fetchone()[0]


@pytest.mark.parametrize("covered", [1, 7, 300])
def test_an_acknowledgement_writes_one_evidence_row_naming_its_range_whatever_it_covers(store, covered):
    ann, bob = pair(store)
    ids = [store.mailbox.admit_information(ann, bob, f"m{i}")["interaction_id"] for i in range(covered)]
    cursor = None
    while True:  # read everything first, so the acknowledgement's read returns (and records) nothing
        page = store.mailbox.receive(bob, cursor=cursor, limit=100)
        cursor = page.cursor
        if not page.has_more:
            break
    before = evidence_rows(store)
    assert store.mailbox.receive(bob, ack_cursor=cursor, limit=100).records == []
    assert evidence_rows(store) - before == 1, "an acknowledgement is one evidence row, not one per record"
    (row,) = acknowledged_rows(store)
    seqs = [r[0] for r in store.database.db.execute("SELECT seq FROM interactions ORDER BY seq")]
    assert row["interaction_id"] == ids[-1]
    assert {k: v for k, v in row["detail"].items() if k != "by"} == {
        "first_seq": seqs[0], "last_seq": seqs[-1], "first_record_id": ids[0], "last_record_id": ids[-1],
        "count": covered}
    assert row["detail"]["by"] == bob.ref
    assert store.mailbox.unacknowledged(bob.agent_id) == 0 and not store.mailbox.has_unacknowledged(bob.agent_id)


def test_acknowledging_part_of_a_page_leaves_the_rest_to_read_again(store):
    ann, bob = pair(store)
    ids = [store.mailbox.admit_information(ann, bob, f"m{i}")["interaction_id"] for i in range(5)]
    first_two = store.mailbox.receive(bob, limit=2)
    whole = store.mailbox.receive(bob, limit=5)
    assert [r["record_id"] for r in whole.records] == ids
    page = store.mailbox.receive(bob, ack_cursor=first_two.cursor, limit=5)
    assert [r["record_id"] for r in page.records] == ids[2:], "the read goes on after the acknowledged part"
    assert store.mailbox.unacknowledged(bob.agent_id) == 3
    (row,) = acknowledged_rows(store)
    assert (row["detail"]["first_record_id"], row["detail"]["last_record_id"], row["detail"]["count"]) == (
        ids[0], ids[1], 2)


def test_a_range_counts_only_the_recipients_own_records(store):
    ann, bob = pair(store)
    cy = store.registry.register_agent("cy", "manual")[0]
    for i in range(6):  # interleaved: bob's records are every other seq
        store.mailbox.admit_information(ann, bob, f"b{i}")
        store.mailbox.admit_information(ann, cy, f"c{i}")
    page = store.mailbox.receive(bob, limit=100)
    store.mailbox.receive(bob, ack_cursor=page.cursor, limit=1)
    (row,) = acknowledged_rows(store)
    assert row["detail"]["count"] == 6
    assert store.mailbox.unacknowledged(cy.agent_id) == 6 and store.mailbox.unacknowledged(bob.agent_id) == 0


def test_an_acknowledgement_past_the_mailbox_is_refused_and_acknowledges_nothing(store):
    ann, bob = pair(store)
    store.mailbox.admit_information(ann, bob, "one")
    newest = store.database.db.execute("SELECT MAX(seq) FROM interactions").fetchone()[0]
    past = cursors.encode(store.database.cursor_secret, bob.agent_id, newest + 1)
    before = evidence_rows(store)
    with pytest.raises(PeerwireError) as info:
        store.mailbox.receive(bob, ack_cursor=past, limit=1)
    assert info.value.code is Code.CURSOR_INVALID
    assert evidence_rows(store) == before and store.mailbox.unacknowledged(bob.agent_id) == 1


def test_an_acknowledgement_again_or_behind_changes_nothing(store):
    ann, bob = pair(store)
    for i in range(4):
        store.mailbox.admit_information(ann, bob, f"m{i}")
    early, late = store.mailbox.receive(bob, limit=1).cursor, store.mailbox.receive(bob, limit=3).cursor
    store.mailbox.receive(bob, ack_cursor=late, limit=1)
    rows, position = acknowledged_rows(store), store.mailbox._acked(store.database.db, bob.agent_id)
    for again in (late, early):
        store.mailbox.receive(bob, ack_cursor=again, limit=1)
        assert acknowledged_rows(store) == rows, "a repeated or older acknowledgement writes nothing"
        assert store.mailbox._acked(store.database.db, bob.agent_id) == position, "and never moves the position back"
    assert store.mailbox.unacknowledged(bob.agent_id) == 1


def test_a_replayed_cursor_returns_the_same_records_after_an_acknowledgement(store):
    ann, bob = pair(store)
    replay_from = store.mailbox.receive(bob, limit=1).cursor  # an empty mailbox: the position before every record
    for i in range(4):
        store.mailbox.admit_information(ann, bob, f"m{i}")
    start = store.mailbox.receive(bob, limit=2)
    before = store.mailbox.receive(bob, cursor=replay_from, limit=4).records
    assert len(before) == 4
    store.mailbox.receive(bob, ack_cursor=start.cursor, limit=1)
    assert store.mailbox.receive(bob, cursor=replay_from, limit=4).records == before


def test_a_claimed_task_not_acknowledged_past_is_offered_again_under_its_claim(store):
    ann, bob = pair(store)
    store.mailbox.admit_information(ann, bob, "before")
    task = store.mailbox.admit_task(ann, bob, "do it")
    info_only = store.mailbox.receive(bob, limit=1)
    first = store.mailbox.receive(bob, limit=2)
    assert first.new_work == [task["request_id"]]
    again = store.mailbox.receive(bob, ack_cursor=info_only.cursor, limit=2)  # acknowledges the information only
    assert again.claims == first.claims, "still the caller's work, under the same claim"
    done = store.mailbox.receive(bob, ack_cursor=first.cursor, limit=2)
    assert done.records == [] and done.claims == []


def test_trace_shows_a_record_the_acknowledgement_that_covers_it(store):
    ann, bob = pair(store)
    ids = [store.mailbox.admit_information(ann, bob, f"m{i}")["interaction_id"] for i in range(3)]
    unread = store.mailbox.admit_information(ann, bob, "later")["interaction_id"]
    page = store.mailbox.receive(bob, limit=3)
    store.mailbox.receive(bob, ack_cursor=page.cursor, limit=1)
    for record_id in ids:
        stages = store.trace(record_id)["interactions"][0]["stages"]
        (ack,) = [s for s in stages if s["stage"] == Stage.ACKNOWLEDGED]
        assert (ack["detail"]["first_record_id"], ack["detail"]["last_record_id"]) == (ids[0], ids[-1])
    assert not [s for s in store.trace(unread)["interactions"][0]["stages"] if s["stage"] == Stage.ACKNOWLEDGED]


def test_the_export_names_each_acknowledgement_as_a_range_and_stays_valid(store):
    ann, bob = pair(store)
    for i in range(5):
        store.mailbox.admit_information(ann, bob, f"m{i}")
    page = store.mailbox.receive(bob, limit=5)
    store.mailbox.receive(bob, ack_cursor=page.cursor, limit=1)
    document = export.of_store(store)
    assert violations(document) == []
    (row,) = [e for e in document["evidence"] if e["stage"] == Stage.ACKNOWLEDGED]
    assert row["detail"]["count"] == 5 and row["record_id"] == row["detail"]["last_record_id"]


def test_the_harness_finds_the_range_that_covers_each_record_in_an_export(store):
    ann, bob = pair(store)
    cy = store.registry.register_agent("cy", "manual")[0]
    first = [store.mailbox.admit_information(ann, bob, f"m{i}")["interaction_id"] for i in range(3)]
    for_cy = store.mailbox.admit_information(ann, cy, "not bob's")["interaction_id"]
    second = [store.mailbox.admit_information(ann, bob, f"n{i}")["interaction_id"] for i in range(2)]
    unread = store.mailbox.admit_information(ann, bob, "later")["interaction_id"]
    page = store.mailbox.receive(bob, limit=3)
    store.mailbox.receive(bob, ack_cursor=page.cursor, limit=1)
    page = store.mailbox.receive(bob, limit=2)
    store.mailbox.receive(bob, ack_cursor=page.cursor, limit=1)
    core = CoreEvidence.of(export.of_store(store))
    assert [core.acknowledgement(i)["record_id"] for i in first] == [first[-1]] * 3
    assert [core.acknowledgement(i)["record_id"] for i in second] == [second[-1]] * 2
    assert core.acknowledgement(unread) is None and core.acknowledgement(for_cy) is None


def ix(number: int) -> str:
    return f"ix_{number:032x}"


def test_a_store_from_before_ranges_is_numbered_and_its_per_record_rows_export_as_ranges(tmp_path):
    """A version-4 store: records without mailbox numbers, one acknowledged row per record."""
    home = Home(tmp_path / "home")
    home.create()
    db = sqlite3.connect(home.db, isolation_level=None)
    for script in MIGRATIONS[:4]:
        db.executescript(script)
    db.execute("PRAGMA user_version = 4")
    stamp = "2026-01-01T00:00:00.000000Z"
    for agent in ("ann", "bob", "cy"):
        db.execute("INSERT INTO agents(agent_id, identity_key, name, provider, node_id, status, source, created_at,"
                   " updated_at) VALUES (?, ?, ?, 'manual', 'n', 'registered', 'cli', ?, ?)",
                   (agent, agent, agent, stamp, stamp))
        db.execute("INSERT INTO cursors(agent_id, acked_seq, updated_at) VALUES (?, 0, ?)", (agent, stamp))
    for i, recipient in enumerate(["bob", "cy", "bob", "bob", "cy"], start=1):
        db.execute("INSERT INTO interactions(interaction_id, kind, state, sender_id, sender_name, recipient_id,"
                   " recipient_name, body, created_at, updated_at) VALUES (?, 'information', 'admitted', 'ann',"
                   " 'ann', ?, ?, 'old', ?, ?)", (ix(i), recipient, recipient, stamp, stamp))
    for i in (1, 3):  # bob acknowledged his first two, the old way
        db.execute("INSERT INTO evidence(interaction_id, stage, at, detail) VALUES (?, 'acknowledged', ?, ?)",
                   (ix(i), stamp, json.dumps({"by": {"agent_id": "bob", "name": "bob"}})))
    db.execute("UPDATE cursors SET acked_seq = 3 WHERE agent_id = 'bob'")
    db.close()

    unmigrated = export.of_home(home)
    assert violations(unmigrated) == []
    assert [(e["record_id"], e["detail"]["count"]) for e in unmigrated["evidence"]] == [(ix(1), 1), (ix(3), 1)]

    store = home.open_store()
    try:
        numbers = dict(store.database.db.execute("SELECT interaction_id, mailbox_index FROM interactions").fetchall())
        assert numbers == {ix(1): 1, ix(2): 1, ix(3): 2, ix(4): 3, ix(5): 2}
        assert store.mailbox.unacknowledged("bob") == 1 and store.mailbox.unacknowledged("cy") == 2
        bob = store.registry.agent("bob")
        new = store.mailbox.admit_information(store.registry.agent("ann"), bob, "new")["interaction_id"]
        assert store.database.db.execute("SELECT mailbox_index FROM interactions WHERE interaction_id = ?",
                                         (new,)).fetchone()[0] == 4
        page = store.mailbox.receive(bob, limit=10)
        store.mailbox.receive(bob, ack_cursor=page.cursor, limit=1)
        assert acknowledged_rows(store)[-1]["detail"]["count"] == 2
        assert violations(export.of_store(store)) == []
    finally:
        store.close()


def test_wait_agent_wakes_on_what_is_unacknowledged_and_counts_it_exactly(core):
    a, b = core.register("a"), core.register("b")
    for i in range(3):
        call(core, a, "send_message", {"target": "b", "message": f"m{i}"})
    woke = {"woke": True, "timed_out": False, "wake_reason": "unacknowledged_activity"}
    assert call(core, b, "wait_agent", {"timeout_ms": 0}) == {**woke, "pending": 3}
    two = call(core, b, "receive_messages", {"limit": 2})
    assert call(core, b, "wait_agent", {"timeout_ms": 0}) == {**woke, "pending": 3}, "read is not acknowledged"
    rest = call(core, b, "receive_messages", {"ack_cursor": two["cursor"]})
    assert call(core, b, "wait_agent", {"timeout_ms": 0}) == {**woke, "pending": 1}
    call(core, b, "receive_messages", {"ack_cursor": rest["cursor"]})
    assert call(core, b, "wait_agent", {"timeout_ms": 0}) == {
        "woke": False, "timed_out": True, "wake_reason": "timeout", "pending": 0}

