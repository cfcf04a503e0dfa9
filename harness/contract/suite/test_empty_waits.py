"""What an empty wait leaves untouched: every task, claim, acknowledgement and request state.

A wait that times out with nothing to report is a read. A core that tidies up
on the way out (closing the caller's claimed tasks, acknowledging, releasing
claims) changes state nobody asked it to. Here a worker holds a claimed,
acknowledged, unanswered task and a requester holds the request; both see the
same state before and after timed-out ``wait_agent`` and ``receive_messages``
calls of each, and the claimed task can still be replied to, the reply
reaching the requester.
"""

from __future__ import annotations

from harness.contract.fixtures import succeed
from harness.contract.manifest import requirement

EMPTY_WAIT_MS = 300
VIEW = ("records", "cursor", "has_more", "new_work", "claims")


def _view(page: dict) -> dict:
    return {key: ([r.get("record_id") for r in page[key]] if key == "records" else page.get(key)) for key in VIEW}


@requirement("wait:empty:untouched")
def test_timed_out_waits_leave_every_state_as_it_was(servers):
    worker, requester = servers.caller("worker"), servers.caller("requester")
    working, asking = servers.start(worker), servers.start(requester)
    start = succeed(working, "receive_messages", {"timeout_ms": 0})["cursor"]
    request_id = succeed(asking, "followup_task", {"target": worker.name, "message": "hold this"})["request_id"]
    succeed(asking, "send_message", {"target": worker.name, "message": "and know this"})
    claimed = succeed(working, "receive_messages", {"timeout_ms": 0})
    assert request_id in claimed.get("new_work", []), f"the task was not offered as new work: {claimed}"
    succeed(working, "receive_messages", {"ack_cursor": claimed["cursor"], "timeout_ms": 0})

    def state() -> dict:
        return {"worker replay": _view(succeed(working, "receive_messages", {"cursor": start, "timeout_ms": 0})),
                "worker next": _view(succeed(working, "receive_messages", {"timeout_ms": 0})),
                "requester next": _view(succeed(asking, "receive_messages", {"timeout_ms": 0}))}

    before = state()
    for endpoint, who in ((working, "worker"), (asking, "requester")):
        for tool in ("wait_agent", "receive_messages"):
            ended = succeed(endpoint, tool, {"timeout_ms": EMPTY_WAIT_MS})
            assert ended.get("timed_out") is True, f"the {who}'s {tool} should time out empty: {ended}"
    after = state()
    assert after == before, "timed-out waits changed state:\n  " + "\n  ".join(
        f"{view}: before {before[view]}, after {after[view]}" for view in before if before[view] != after[view])
    succeed(working, "reply", {"request_id": request_id, "status": "done", "message": "still mine to answer"})
    replies = [r for r in succeed(asking, "receive_messages", {"timeout_ms": 0})["records"]
               if r.get("kind") == "reply" and r.get("request_id") == request_id]
    assert len(replies) == 1, f"the reply to the claimed task did not reach the requester once: {replies}"
