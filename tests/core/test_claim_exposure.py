"""A claimed task is never lost to an answer its recipient did not see.

A receive commits its claims before it answers; whatever happens to the answer
(the client hangs up, abandons a long poll, the app dies in between), the
recipient's next read lists the task again under the same claim, until the
recipient acknowledges past it. Real app, real sockets, real SIGKILL.
"""

from __future__ import annotations

import signal
import socket
from contextlib import closing
from pathlib import Path

from harness.contract.manifest import requirement
from peerwire.control import ControlClient, encode
from peerwire.store import Store

from .conftest import call, cli_json, wait_until
from tests.patience import WAIT_S



def claims_of(core, request_id: str) -> list[str]:
    """The claim ids the core recorded for a request (from its trace)."""
    trace = ControlClient(core.home).call("trace", {"id": request_id})
    return [stage["detail"]["claim_id"] for stage in trace["interactions"][0]["stages"]
            if stage["stage"] == "claim_by_receive"]


def unanswered_receive(core, caller, args: dict) -> socket.socket:
    """Send receive_messages on a raw connection and never read the answer (the caller closes it)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with core.home.socket_address() as address:
        sock.connect(address)
    sock.sendall(encode({"id": 1, "op": "receive_messages", "token": caller.token, "args": args, "meta": {}}))
    return sock


def abandon_a_long_poll(core, caller) -> ControlClient:
    """Start a minute-long receive for ``caller``, see the app wait on it, hang up; the app's status client."""
    status = ControlClient(core.home)
    with closing(unanswered_receive(core, caller, {"timeout_ms": 60_000})):
        wait_until(lambda: status.call("status")["waiting"].get(caller.agent_id), WAIT_S, "the long poll to wait")
    return status


@requirement("task:new-work:until-acknowledged")
def test_a_dropped_answer_loses_no_work(core):
    a, b = core.register("a"), core.register("b")
    task = call(core, a, "followup_task", {"target": "b", "message": "do it"})
    with closing(unanswered_receive(core, b, {})):
        # The claim is committed while the caller still holds the connection, then it hangs up unread.
        (claim_id,) = wait_until(lambda: claims_of(core, task["request_id"]), WAIT_S, "the dropped read's claim")

    page = call(core, b, "receive_messages")
    assert page["new_work"] == [task["request_id"]]
    assert page["claims"] == [{"request_id": task["request_id"], "claim_id": claim_id}]
    again = call(core, b, "receive_messages")
    assert again["claims"] == page["claims"], "offered again, under the same claim"
    acked = call(core, b, "receive_messages", {"ack_cursor": page["cursor"]})
    assert acked["records"] == [] and acked["claims"] == []
    assert claims_of(core, task["request_id"]) == [claim_id], "never a second claim"


@requirement("task:new-work:until-acknowledged")
def test_an_abandoned_long_poll_loses_no_work(core):
    a, b = core.register("a"), core.register("b")
    abandon_a_long_poll(core, b)
    # The poller is gone. Whether or not the app noticed yet, the task must reach b's next read.
    task = call(core, a, "followup_task", {"target": "b", "message": "arrives after the poller left"})
    page = call(core, b, "receive_messages")
    assert page["new_work"] == [task["request_id"]]
    assert [c["claim_id"] for c in page["claims"]] == claims_of(core, task["request_id"])


@requirement("task:claim:caller-gone")
def test_a_long_poll_whose_caller_hung_up_claims_nothing(core):
    a, b = core.register("a"), core.register("b")
    status = abandon_a_long_poll(core, b)
    # Well before the poll's own minute is up, the app lets the gone poller go.
    wait_until(lambda: not status.call("status")["waiting"].get(b.agent_id), WAIT_S, "the gone poller to be let go")
    task = call(core, a, "followup_task", {"target": "b", "message": "nobody is polling"})
    assert claims_of(core, task["request_id"]) == [], "no claim for a caller that is gone"
    page = call(core, b, "receive_messages")
    assert page["new_work"] == [task["request_id"]]
    assert [c["claim_id"] for c in page["claims"]] == claims_of(core, task["request_id"])


@requirement("task:claim:durable")
def test_a_crash_between_commit_and_answer_loses_no_work(core):
    a, b = core.register("a"), core.register("b")
    task = call(core, a, "followup_task", {"target": "b", "message": "survive the crash"})
    sock = unanswered_receive(core, b, {})
    try:
        (claim_id,) = wait_until(lambda: claims_of(core, task["request_id"]), WAIT_S, "the claim")
        core.app.process.send_signal(signal.SIGKILL)
        core.app.process.wait()
    finally:
        sock.close()
    core.restart()
    page = call(core, b, "receive_messages")
    assert page["claims"] == [{"request_id": task["request_id"], "claim_id": claim_id}]


def test_every_session_of_the_recipient_sees_the_one_claim(core):
    a, b = core.register("a"), core.register("b")
    second_token = ControlClient(core.home).call("register_agent", {"name": "b-again"})  # a different agent
    task = call(core, a, "followup_task", {"target": "b", "message": "one claim"})
    first = ControlClient(core.home, b.token).call("receive_messages", {})
    second = ControlClient(core.home, b.token).call("receive_messages", {})
    assert first["claims"] == second["claims"] and len(first["claims"]) == 1
    other = ControlClient(core.home, second_token["session_token"]).call("receive_messages", {})
    assert other["records"] == [] and other["claims"] == [], "never offered to another agent"
    assert claims_of(core, task["request_id"]) == [first["claims"][0]["claim_id"]]


@requirement("task:claim:dispatch-or-receive")
def test_a_receive_claim_is_never_dispatched_acknowledged_or_not(tmp_path: Path):
    store = Store(tmp_path / "peerwire.db")
    try:
        a, _ = store.registry.register_agent("a", "manual")
        b, _ = store.registry.register_agent("b", "codex")
        task = store.mailbox.admit_task(a, b, "mine by receive")
        page = store.mailbox.receive(b, limit=10)
        assert page.new_work == [task["request_id"]]
        assert store.mailbox.claim_for_dispatch(task["request_id"]) is None, "unacknowledged: still the receive's"
        store.mailbox.receive(b, ack_cursor=page.cursor, limit=10)
        assert store.mailbox.claim_for_dispatch(task["request_id"]) is None, "acknowledged: still the receive's"
        claims = store.database.db.execute("SELECT claimant FROM claims WHERE request_id = ?",
                                           (task["request_id"],)).fetchall()
        assert [row[0] for row in claims] == ["receive"]
    finally:
        store.close()


def test_the_claims_field_is_in_the_cli_output(core):
    a, b = core.register("a"), core.register("b")
    task = call(core, a, "followup_task", {"target": "b", "message": "seen by the CLI"})
    out = cli_json(core, "message", "receive", caller=b)
    assert out["new_work"] == [task["request_id"]] and out["claims"][0]["request_id"] == task["request_id"]
