"""No wait sleeps past an admission, wherever the admission lands around the wait's start.

A wait that checks the mailbox and then subscribes, with anything in between,
loses every record admitted in that window: it sleeps to its timeout. Tests
that admit a record well after a wait began never land there. Here many rounds
admit a record at offsets from just before the wait is sent to tens of
milliseconds after, alternating ``wait_agent`` and ``receive_messages``; each
wait must answer promptly (a bound far below its timeout), woken or with the
record. Each round acknowledges what it read, so the next starts quiet.
"""

from __future__ import annotations

import time

from harness.contract.fixtures import succeed
from harness.contract.manifest import requirement
from harness.contract.stdio import wait_response

WAIT_MS = 10_000
PROMPT_S = 5.0
OFFSETS_MS = (-1, 0, 1, 2, 3, 5, 8, 12, 16, 20, 30, 45)
"""When each round admits its record, from the wait's request being sent; negative: just before it."""
TOOLS = ("wait_agent", "receive_messages")


def _woken(tool: str, structured: dict) -> bool:
    return structured.get("woke") is True if tool == "wait_agent" else bool(structured.get("records"))


@requirement("wait:wake:admission-window")
def test_no_wait_sleeps_past_an_admission_timed_around_its_start(servers):
    waiter = servers.caller("waiter")
    endpoint, sender = servers.start(waiter), servers.start()
    for round_, offset_ms in enumerate(offset for offset in OFFSETS_MS for _ in TOOLS):
        tool = TOOLS[round_ % len(TOOLS)]
        send = {"name": "send_message", "arguments": {"target": waiter.name, "message": f"round {round_}"}}
        admitted = sender.server.request("tools/call", send)[1] if offset_ms < 0 else None
        started = time.monotonic()
        _, waiting = endpoint.server.request("tools/call", {"name": tool, "arguments": {"timeout_ms": WAIT_MS}})
        if admitted is None:
            time.sleep(offset_ms / 1000)  # placing the admission in the wait's first milliseconds is the round
            admitted = sender.server.request("tools/call", send)[1]
        receipt = wait_response(admitted, PROMPT_S, what=f"the admission of round {round_}")
        assert not receipt.get("result", {}).get("isError"), f"round {round_}: could not admit: {receipt}"
        response = wait_response(waiting, WAIT_MS / 1000 + PROMPT_S, what=f"{tool} in round {round_}")
        took = time.monotonic() - started
        structured = response.get("result", {}).get("structuredContent") or {}
        assert _woken(tool, structured) and took < PROMPT_S, (
            f"round {round_}: {tool} (timeout_ms {WAIT_MS}) with a record admitted {offset_ms:+d} ms from its "
            f"start returned after {took:.1f}s: {structured}; a wait must subscribe before it checks the mailbox")
        page = succeed(endpoint, "receive_messages", {"timeout_ms": 0})
        succeed(endpoint, "receive_messages", {"ack_cursor": page["cursor"], "timeout_ms": 0})
