"""A client that gives up on a call cancels nothing the call admitted.

The client does what a timed-out MCP client does: it cancels its request
(``notifications/cancelled``) and goes away without waiting for the answer.
Whatever the server admitted must then live on: the task reaches its
recipient as new work and its reply reaches the requester. A server may also
drop the cancelled call before admitting anything; then there was nothing to
keep, and the check is not tested rather than passed.
"""

from __future__ import annotations

import secrets
import time

import pytest

from harness.contract.fixtures import tool_call
from harness.contract.manifest import requirement
from harness.contract.stdio import ServerExited

ARRIVAL_MS = 3000


def _receipt(answered) -> dict | None:
    """The task receipt, if the server answered the abandoned call with one."""
    if not answered.done() or isinstance(answered.exception(), ServerExited):
        return None
    result = answered.result().get("result")
    if not isinstance(result, dict) or result.get("isError"):
        return None
    structured = result.get("structuredContent")
    return structured if isinstance(structured, dict) and structured.get("request_id") else None


CANCEL_AFTER_MS = (0, 5, 20, 60, 150)
"""Delays before the cancel, one attempt each: a server that drops a call cancelled at once may have
admitted one cancelled a little later, and only an admitted call tests the requirement."""


def _give_up(servers, requester, worker, delay_ms: int) -> tuple[str, dict | None, dict]:
    """One abandoned followup_task, cancelled ``delay_ms`` after it was sent: its body, the receipt if one
    was answered, and the worker's mailbox page afterwards."""
    body = f"finish this although I left ({secrets.token_hex(4)})"
    server = servers.start(requester).server
    request, answered = server.request("tools/call", {"name": "followup_task",
                                                      "arguments": {"target": worker.name, "message": body}})
    if delay_ms:
        time.sleep(delay_ms / 1000)  # the point of the attempt: a cancel that arrives this much later
    server.notify("notifications/cancelled", {"requestId": request["id"], "reason": "client timeout"})
    server.close()  # the client is gone: stdin closed, the process stopped after a grace period
    receipt = _receipt(answered)
    page = tool_call(servers.start(worker), "receive_messages", {"timeout_ms": ARRIVAL_MS}).structured
    return body, receipt, page


@requirement("call:client-timeout:cancels-nothing")
def test_a_client_that_gives_up_cancels_nothing(servers):
    requester, worker = servers.caller("quitter"), servers.caller("worker")
    for delay_ms in CANCEL_AFTER_MS:
        body, receipt, page = _give_up(servers, requester, worker, delay_ms)
        tasks = [r for r in page.get("records", []) if r.get("kind") == "task" and r.get("body") == body]
        if receipt is not None or tasks:
            break
    else:
        pytest.skip("not tested: the server dropped every cancelled call before admitting anything "
                    f"(cancelled after {', '.join(map(str, CANCEL_AFTER_MS))} ms)")
    assert tasks, f"the receipt {receipt} was returned, but the task is not in the recipient's mailbox: {page}"
    request_id = tasks[0]["request_id"]
    assert receipt is None or receipt["request_id"] == request_id, f"receipt {receipt} vs record {tasks[0]}"
    assert request_id in page.get("new_work", []), f"the admitted task is no longer new work: {page}"

    worker_end = servers.start(worker)
    done = tool_call(worker_end, "reply", {"request_id": request_id, "status": "done", "message": "done anyway"})
    assert done.result is not None and not done.is_error, f"the task cannot be replied to: {done.response}"
    answer = tool_call(servers.start(requester), "receive_messages", {"timeout_ms": ARRIVAL_MS}).structured
    replies = [r for r in answer.get("records", []) if r.get("kind") == "reply" and r.get("request_id") == request_id]
    assert [r.get("body") for r in replies] == ["done anyway"], f"the requester did not get the reply: {answer}"
