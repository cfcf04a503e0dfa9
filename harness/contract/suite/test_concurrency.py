"""Calls in flight: overlapping waits, cancelled requests, a client that closes stdin.

"Promptly" is a bound far below the waits involved (seconds against a minute),
so these hold on a loaded machine; nothing here sleeps: each check waits on a
response or on the process, with a bound.
"""

from __future__ import annotations

import secrets
import subprocess
import time

from harness.contract.fixtures import tool_call
from harness.contract.manifest import requirement
from harness.contract.stdio import wait_response

PENDING_WAITS = 32
LONG_WAIT_MS = 60_000
PROMPT_S = 5.0
SHORT_WAIT_MS = 1_500
ARRIVAL_MS = 3_000


def _quiet_caller(servers):
    """A fresh caller whose mailbox is empty, so its waits block; and its server."""
    caller = servers.caller("waiter")
    return caller, servers.start(caller)


@requirement("concurrency:waits:cheap-call-prompt")
def test_a_cheap_call_is_prompt_while_many_waits_pend(servers):
    _, endpoint = _quiet_caller(servers)
    server = endpoint.server
    waits = [server.request("tools/call", {"name": "wait_agent", "arguments": {"timeout_ms": LONG_WAIT_MS}})[1]
             for _ in range(PENDING_WAITS)]
    short = server.request("tools/call", {"name": "wait_agent", "arguments": {"timeout_ms": SHORT_WAIT_MS}})[1]
    for round_ in range(3):
        started = time.monotonic()
        outcome = tool_call(endpoint, "list_agents", {}, timeout=PROMPT_S)
        assert outcome.response is not None, (
            f"list_agents got no answer within {PROMPT_S}s while {PENDING_WAITS} waits were pending "
            f"(round {round_}); {server.stderr_tail()}")
        assert not outcome.is_error and outcome.protocol_error is None, outcome.response
        assert time.monotonic() - started < PROMPT_S
    assert not any(w.done() for w in waits), "a long wait returned early although nothing arrived"
    ended = wait_response(short, SHORT_WAIT_MS / 1000 + PROMPT_S, what="a short wait among long ones")
    structured = ended.get("result", {}).get("structuredContent", {})
    assert structured.get("timed_out") is True, f"the short wait should time out on its own: {ended}"


def _cancelled_receive(servers):
    """A recipient whose receive_messages was waiting and has been cancelled; returns (recipient, its server, id)."""
    recipient, endpoint = _quiet_caller(servers)
    server = endpoint.server
    request, answered = server.request("tools/call", {"name": "receive_messages",
                                                      "arguments": {"timeout_ms": LONG_WAIT_MS}})
    # A ping answered after the receive was read: the receive is in flight now.
    assert server.call("ping", timeout=PROMPT_S).get("result") == {}
    server.notify("notifications/cancelled", {"requestId": request["id"], "reason": "the user gave up"})
    assert server.call("ping", timeout=PROMPT_S).get("result") == {}
    return recipient, endpoint, request["id"], answered


def _assign(servers, recipient) -> str:
    sender = servers.start()  # any caller: nothing here depends on who assigns
    body = f"work for whoever is still listening ({secrets.token_hex(4)})"
    receipt = tool_call(sender, "followup_task", {"target": recipient.name, "message": body})
    assert receipt.result is not None and not receipt.is_error, f"could not assign: {receipt.response}"
    return receipt.structured["request_id"]


@requirement("call:cancelled:claims-nothing")
def test_a_cancelled_receive_claims_nothing(servers):
    recipient, endpoint, _, answered = _cancelled_receive(servers)
    request_id = _assign(servers, recipient)
    try:
        first = answered.result(ARRIVAL_MS / 1000)
    except TimeoutError:
        first = None  # no answer: it claimed nothing it could have told anyone about
    page = tool_call(endpoint, "receive_messages", {"timeout_ms": ARRIVAL_MS}).structured or {}
    assert request_id in page.get("new_work", []), (
        f"the task arrived after the receive was cancelled, so the next receive must hand it over as new "
        f"work; got {page}, and the cancelled call was answered {first}")


@requirement("wire:cancel:no-answer")
def test_a_cancelled_request_gets_no_answer(servers):
    recipient, endpoint, msg_id, answered = _cancelled_receive(servers)
    _assign(servers, recipient)  # give the cancelled receive something it could have answered with
    tool_call(endpoint, "receive_messages", {"timeout_ms": ARRIVAL_MS})
    assert endpoint.server.call("ping", timeout=PROMPT_S).get("result") == {}
    answers = endpoint.server.responses_to(msg_id)
    assert not answers, f"the cancelled request {msg_id} was answered: {answers}"


@requirement("wire:id:in-flight")
def test_an_id_in_flight_is_refused_and_its_call_keeps_its_cancel(servers):
    _, endpoint = _quiet_caller(servers)
    server = endpoint.server
    live = 10**9 + secrets.randbelow(10**9)  # far from the ids the client counts up from itself
    for first, twin in ((live, str(live)), (f"{live}-s", None)):
        waiting = {"jsonrpc": "2.0", "id": first, "method": "tools/call",
                   "params": {"name": "wait_agent", "arguments": {"timeout_ms": LONG_WAIT_MS}}}
        server.send(waiting)
        assert server.call("ping", timeout=PROMPT_S).get("result") == {}  # the wait is in flight now
        again = server.expect_response(first)
        server.send({**waiting, "params": {"name": "list_agents", "arguments": {}}})
        refused = wait_response(again, PROMPT_S, what=f"a second request under the live id {first!r}")
        error = refused.get("error")
        assert isinstance(error, dict) and error.get("code") == -32600 and str(first) in str(error.get("message")), (
            f"a second request under the id {first!r} of a pending wait_agent must be refused with -32600 naming "
            f"the id, and run nothing; got {refused}")
        if twin is not None:
            _, other = server.request("ping", msg_id=twin)
            assert wait_response(other, PROMPT_S, what=f"ping with id {twin!r}").get("result") == {}, (
                f"{twin!r} is not the id {first!r}: it must be served")
        server.notify("notifications/cancelled", {"requestId": first, "reason": "the user gave up"})
        reused = server.expect_response(first)
        server.send({"jsonrpc": "2.0", "id": first, "method": "ping"})
        answer = wait_response(reused, PROMPT_S, what=f"a ping reusing the cancelled call's id {first!r}")
        assert answer.get("result") == {}, (
            f"once its call is cancelled the id {first!r} is free again; the next request under it got {answer}")
        assert server.call("ping", timeout=PROMPT_S).get("result") == {}
        ran = [r for r in server.responses_to(first) if "agents" in str(r.get("result", ""))]
        assert not ran, f"the refused list_agents under the live id {first!r} ran: {ran}"


@requirement("wire:stdin-close:cancels")
def test_closing_stdin_cancels_calls_in_flight(servers):
    recipient, endpoint = _quiet_caller(servers)
    server = endpoint.server
    server.request("tools/call", {"name": "receive_messages", "arguments": {"timeout_ms": LONG_WAIT_MS}})
    assert server.call("ping", timeout=PROMPT_S).get("result") == {}
    started = time.monotonic()
    assert server.process.stdin is not None
    server.process.stdin.close()
    try:
        server.process.wait(PROMPT_S * 2)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the server still ran {PROMPT_S * 2:g}s after stdin closed, with a "
                             f"{LONG_WAIT_MS} ms receive pending; {server.stderr_tail()}") from None
    assert time.monotonic() - started < PROMPT_S * 2
    request_id = _assign(servers, recipient)
    page = tool_call(servers.start(recipient), "receive_messages", {"timeout_ms": ARRIVAL_MS}).structured or {}
    assert request_id in page.get("new_work", []), f"the receive of a closed session claimed the task: {page}"

