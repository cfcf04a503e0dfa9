"""A crash in the middle of writes, for any design: receipts and records compared afterwards.

The provisioner says how the implementation crashes (``crash(server_pids)``:
SIGKILL to whatever writes its state, its app or the server processes). The
suite crashes it while three sessions have sends and tasks in flight, once
some receipts have come back and others have not, then reads the recipient's
mailbox from the start. Every record a receipt was returned for must be there,
whole and byte-exact under its identity; a call that got no receipt may or may
not have been admitted, but never twice and never garbled; and the
implementation admits again. An implementation that answers before its write
is durable (a queue flushed later, a commit after the reply) loses receipted
records here, whatever process holds them.
"""

from __future__ import annotations

import secrets
import time
from collections import Counter

from harness.contract.fixtures import call_s, succeed
from harness.contract.manifest import requirement

SESSIONS = 3
IN_FLIGHT = 14
"""Calls each session has sent when the crash may come."""
RECEIPTS_BEFORE_CRASH = 6
"""The crash comes once this many receipts (of all sessions) have come back."""


def _body(session: int, n: int) -> str:
    return f"crash-{session}-{n} {secrets.token_hex(3)}\r\n\t«{'x' * (n * 37 % 500)}»\u200d🧯"


@requirement("receipt:durable:crash-mid-write")
def test_receipted_records_survive_a_crash_in_the_middle_of_writes(servers):
    recipient = servers.caller("survivor")
    sessions = [servers.start(servers.caller(f"writer{n}")) for n in range(SESSIONS)]
    sent: dict[str, str] = {}  # body -> kind
    pending = []
    for n in range(IN_FLIGHT):
        for s, endpoint in enumerate(sessions):
            body = _body(s, n)
            tool = "followup_task" if n % 2 else "send_message"
            sent[body] = tool
            pending.append((body, endpoint.call_tool(tool, {"target": recipient.name, "message": body},
                                                     timeout=call_s())))
    deadline = time.monotonic() + call_s()
    while sum(p.future.done() for _, p in pending) < RECEIPTS_BEFORE_CRASH and time.monotonic() < deadline:
        time.sleep(0.002)  # polls the calls' futures; the crash must come while the rest are in flight
    in_flight = sum(not p.future.done() for _, p in pending)
    servers.provisioner.crash([e.server.process.pid for e in servers.endpoints if e.server.alive()])

    receipts: dict[str, str] = {}  # interaction_id -> body
    for body, call in pending:
        outcome = call.outcome(call_s())
        if outcome.result is not None and not outcome.is_error and isinstance(outcome.structured, dict):
            receipts[outcome.structured["interaction_id"]] = body
    reader = servers.start(recipient)
    after = succeed(servers.start(servers.caller("after")), "send_message",
                    {"target": recipient.name, "message": "after the crash"})
    records, cursor = [], None
    for _ in range(20):
        page = succeed(reader, "receive_messages", {"limit": 100, **({"cursor": cursor} if cursor else {})})
        records += page.get("records", [])
        cursor = page["cursor"]
        if not page.get("has_more"):
            break
    by_id = {r.get("record_id"): r for r in records}
    problems = []
    lost = {rid: body for rid, body in receipts.items() if rid not in by_id}
    if lost:
        problems.append(f"{len(lost)} of {len(receipts)} receipted records are gone after the crash, first: "
                        f"{next(iter(lost.items()))}")
    garbled = [rid for rid, body in receipts.items() if rid in by_id and by_id[rid].get("body") != body]
    if garbled:
        problems.append(f"{len(garbled)} receipted records came back with another body: {garbled[:3]}")
    foreign = [r.get("body") for r in records if r.get("body") not in sent and r.get("body") != "after the crash"]
    if foreign:
        problems.append(f"{len(foreign)} records hold a body nobody sent: {foreign[:2]}")
    twice = [b for b, c in Counter(r.get("body") for r in records).items() if c > 1]
    if twice:
        problems.append(f"{len(twice)} bodies were admitted twice: {twice[:2]}")
    seqs = [r.get("seq") for r in records]
    if any(not (isinstance(a, int) and isinstance(b, int) and b > a) for a, b in zip(seqs, seqs[1:])):
        problems.append(f"seq does not increase: {seqs[:20]}")
    if after.get("interaction_id") not in by_id:
        problems.append("the send after the crash was receipted but is not in the mailbox")
    assert not problems, (f"crashed with {in_flight} of {len(pending)} calls in flight and {len(receipts)} receipts "
                          "returned:\n  " + "\n  ".join(problems))
