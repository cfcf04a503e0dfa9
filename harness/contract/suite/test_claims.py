"""Claims under concurrency: two sessions of one recipient racing for its tasks.

An agent may run more than one session (two server processes with the same
credential): a restarted client beside a stale one, two tools of one user.
Their reads race. A task is the recipient's under one claim, whichever
session reads it: both sessions may list it until the recipient acknowledges
past it, but always under the same claim_id. A claim that is checked and then
taken in two steps gives the task two claims, so it is done twice; one that is
taken but dropped from the answer loses it. Neither shows with one reader, so
the check races two, round after round, with tasks arriving while they read,
and accounts for every task at the end.
"""

from __future__ import annotations

import json
import secrets
from collections import defaultdict

from harness.contract.fixtures import call_s, succeed
from harness.contract.manifest import requirement

ROUNDS = 12
TASKS_BEFORE = 2
"""Tasks admitted before each round's reads; one more is admitted while they run."""


def _task_ids(page: dict) -> set[str]:
    return {r["request_id"] for r in page.get("records", []) if r.get("kind") == "task" and "request_id" in r}


@requirement("task:claim:race")
def test_two_sessions_racing_expose_each_task_once(servers):
    recipient = servers.caller("racer")
    first, second, feeder = servers.start(recipient), servers.start(recipient), servers.start()
    sent: list[str] = []
    claims_of: dict[str, set[str]] = defaultdict(set)
    acknowledged: set[str] = set()
    problems: list[str] = []

    def admit(label: str) -> None:
        receipt = succeed(feeder, "followup_task", {"target": recipient.name, "message": f"{label} {secrets.token_hex(2)}"})
        sent.append(receipt["request_id"])

    def account(page: dict, where: str) -> None:
        new_work, claims = page.get("new_work", []), page.get("claims", [])
        if [c.get("request_id") for c in claims] != new_work:
            problems.append(f"{where}: claims {claims} do not name new_work {new_work}, in order")
        for claim in claims:
            claims_of[claim.get("request_id")].add(claim.get("claim_id"))
        stray = set(new_work) - _task_ids(page)
        if stray:
            problems.append(f"{where}: new_work {sorted(stray)} names tasks whose records this page does not hold")
        again = set(new_work) & acknowledged
        if again:
            problems.append(f"{where}: new_work {sorted(again)} lists tasks acknowledged past")

    for round_number in range(1, ROUNDS + 1):
        for n in range(TASKS_BEFORE):
            admit(f"round {round_number} task {n}")
        # Both reads in flight at once, and a task admitted while they run.
        reads = [session.call_tool("receive_messages", {"limit": 100}, timeout=call_s())
                 for session in (first, second)]
        late = feeder.call_tool("followup_task", {"target": recipient.name, "message": f"round {round_number} late"},
                                timeout=call_s())
        pages = []
        for name, pending in zip(("first", "second"), reads):
            outcome = pending.outcome(call_s())
            assert outcome.result is not None and not outcome.is_error, \
                f"round {round_number}, {name} session's read: {outcome.response or outcome.failure}"
            pages.append(outcome.structured)
            account(outcome.structured, f"round {round_number}, {name} session")
        landed = late.outcome(call_s())
        assert landed.result is not None and not landed.is_error, f"the late task: {landed.response}"
        sent.append(landed.structured["request_id"])
        # Acknowledge what both reads saw (the fuller page), so each round races for new tasks.
        fuller = max(pages, key=lambda p: len(p.get("records", [])))
        if fuller.get("records"):
            acknowledged.update(_task_ids(fuller))
            account(succeed(first, "receive_messages", {"ack_cursor": fuller["cursor"]}),
                    f"round {round_number}, acknowledging")

    drained = succeed(second, "receive_messages", {"limit": 100})
    account(drained, "the final read")
    twice = {rid: sorted(ids) for rid, ids in claims_of.items() if len(ids) > 1}
    if twice:
        problems.append(f"{len(twice)} tasks were handed out under more than one claim: "
                        f"{json.dumps(dict(list(twice.items())[:5]))}")
    lost = [rid for rid in sent if rid not in claims_of]
    if lost:
        problems.append(f"{len(lost)} of {len(sent)} tasks were never exposed as new work: {lost[:5]}")
    assert not problems, f"two racing sessions over {ROUNDS} rounds:\n  " + "\n  ".join(problems)
