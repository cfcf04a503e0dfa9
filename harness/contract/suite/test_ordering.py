"""Admissions from several sessions at once, read by a reader that follows the cursor.

A mailbox is a sequence in admission order and a cursor a position in it. An
implementation that takes a record's sequence number outside the transaction
that writes the record lets a later number commit first: a reader that reads
then, and moves its cursor past it, never sees the earlier one, which commits
a moment later behind the cursor. One sender at a time never shows it. Here
several sessions send at once, each its own records in turn, round after
round, while a reader follows the returned cursor and nothing else; at the end
every receipt's record must have been read exactly once, in increasing seq,
each sender's records in the order its receipts came back. The work is bounded
by rounds, not by the clock.
"""

from __future__ import annotations

import secrets
import threading
from collections import Counter

from harness.contract.fixtures import call_s, succeed
from harness.contract.manifest import requirement

SENDERS = 4
ROUNDS = 5
PER_ROUND = 6
"""Each sender admits this many records per round, one after another (a task every third)."""
READS_PER_ROUND_MAX = 200
"""A bound on the reader's reads in one round (it reads until the round's senders are done)."""


@requirement("receive:order:concurrent-admissions")
def test_a_cursor_following_reader_sees_every_concurrent_admission_once_in_order(servers):
    recipient = servers.caller("ordered")
    reader = servers.start(recipient)
    senders = [(servers.caller(f"sender{n}"), None) for n in range(SENDERS)]
    senders = [(caller, servers.start(caller)) for caller, _ in senders]
    receipts: dict[int, list[str]] = {n: [] for n in range(SENDERS)}
    bodies: dict[str, str] = {}
    errors: list[str] = []
    cursor = succeed(reader, "receive_messages", {"limit": 1})["cursor"]  # a position before anything is sent
    read: list[dict] = []

    def send(n: int, round_: int) -> None:
        caller, endpoint = senders[n]
        for i in range(PER_ROUND):
            body = f"s{n}·r{round_}·{i} {secrets.token_hex(3)}\r\n⟨{n}⟩"
            tool = "followup_task" if i % 3 == 2 else "send_message"
            outcome = endpoint.call_tool(tool, {"target": recipient.name, "message": body},
                                         timeout=call_s()).outcome(call_s())
            if outcome.result is None or outcome.is_error:
                errors.append(f"sender {n} {tool}: {outcome.response or outcome.failure}")
                return
            receipts[n].append(outcome.structured["interaction_id"])
            bodies[outcome.structured["interaction_id"]] = body

    for round_ in range(ROUNDS):
        threads = [threading.Thread(target=send, args=(n, round_)) for n in range(SENDERS)]
        for thread in threads:
            thread.start()
        reads = 0
        while any(t.is_alive() for t in threads) and reads < READS_PER_ROUND_MAX:
            page = succeed(reader, "receive_messages", {"cursor": cursor, "limit": 100})
            read += page.get("records", [])
            cursor, reads = page["cursor"], reads + 1
        for thread in threads:
            thread.join(call_s() * PER_ROUND)
        assert not errors, errors[:3]
    while True:  # what was admitted after the last read of the last round
        page = succeed(reader, "receive_messages", {"cursor": cursor, "limit": 100})
        read += page.get("records", [])
        cursor = page["cursor"]
        if not page.get("has_more"):
            break

    ids = [r.get("record_id") for r in read]
    sent = [rid for n in range(SENDERS) for rid in receipts[n]]
    counts = Counter(ids)
    lost = [rid for rid in sent if rid not in counts]
    twice = sorted(rid for rid, c in counts.items() if c > 1)
    seqs = [r.get("seq") for r in read]
    backwards = [(a, b) for a, b in zip(seqs, seqs[1:]) if not (isinstance(a, int) and isinstance(b, int) and b > a)]
    problems = []
    if lost:
        problems.append(f"{len(lost)} of {len(sent)} admitted records were never read by the cursor-following "
                        f"reader (skipped: a later seq committed first?), first: {lost[:3]}")
    if twice:
        problems.append(f"{len(twice)} records were read twice: {twice[:3]}")
    if backwards:
        problems.append(f"seq does not increase along the cursor: {backwards[:3]}")
    for n in range(SENDERS):
        order = [rid for rid in ids if rid in set(receipts[n])]
        if order != [rid for rid in receipts[n] if rid in counts]:
            problems.append(f"sender {n}'s records were read out of the order of its receipts")
    wrong = [r.get("record_id") for r in read if r.get("record_id") in bodies and r.get("body") != bodies[r["record_id"]]]
    if wrong:
        problems.append(f"{len(wrong)} records came back with another body than was sent: {wrong[:3]}")
    assert not problems, (f"{SENDERS} sessions admitting at once over {ROUNDS} rounds of {PER_ROUND} each, one reader "
                          "following the cursor:\n  " + "\n  ".join(problems))
