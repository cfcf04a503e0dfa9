"""A retried tool call is one call: the same caller and ``_meta.callId`` get the first receipt.

A client whose answer was lost (a timeout, a dropped connection, a restarted
server) sends the same call again with the same ``params._meta.callId``; the
server answers with the receipt of the first and admits nothing new. The
recipient's mailbox is the judge: one record per call id.
"""

from __future__ import annotations

import secrets

from harness.contract.fixtures import call_s
from harness.contract.manifest import requirement



def _tool(server, name: str, arguments: dict, call_id: str) -> dict:
    _, answered = server.request("tools/call", {"name": name, "arguments": arguments, "_meta": {"callId": call_id}})
    response = answered.result(timeout=call_s())
    result = response.get("result")
    assert isinstance(result, dict) and not result.get("isError"), f"{name}: {response}"
    return result["structuredContent"]


@requirement("call:retry:idempotent")
def test_a_retried_call_gets_its_first_receipt_and_admits_nothing(servers):
    requester, worker = servers.caller("retrier"), servers.caller("worker")
    body = f"do this once ({secrets.token_hex(4)})"
    call_id = f"call_{secrets.token_hex(8)}"
    first = _tool(servers.start(requester).server, "followup_task", {"target": worker.name, "message": body}, call_id)
    # The same call from a new server process, as after a client restart.
    again = _tool(servers.start(requester).server, "followup_task", {"target": worker.name, "message": body}, call_id)
    assert again == first, f"a retry got another receipt: {first} then {again}"
    fresh = _tool(servers.start(requester).server, "followup_task", {"target": worker.name, "message": body},
                  f"{call_id}-2")
    assert fresh["request_id"] != first["request_id"], "another call id is another call"

    page = _tool(servers.start(worker).server, "receive_messages", {"limit": 100}, f"call_{secrets.token_hex(8)}")
    tasks = [r for r in page.get("records", []) if r.get("kind") == "task" and r.get("body") == body]
    assert [t.get("request_id") for t in tasks] == [first["request_id"], fresh["request_id"]], (
        f"one record per call id expected: {tasks}")
