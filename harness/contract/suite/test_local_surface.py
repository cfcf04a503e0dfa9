"""The local surface: every call bounded, one call's size its own, a flood held back, targets explicit.

* A hung app (alive, silent) fails each call within Codex's tool timeout with
  a retriable code of its own, told apart from a stopped app; a call given up
  while it hung is admitted at most once, and its retry returns its receipt.
* A request too large for the server fails that call alone.
* A client that pipelines without reading stops the server from reading:
  its memory stays bounded.
* Disabled and not-sendable targets behave as the contract says.

The hung app needs the provisioner's optional ``freeze``/``thaw`` (capability
``hang``), the targets its optional ``set_agent`` (``agent-states``:
:mod:`harness.contract.interface`); without them those requirements are not
selected, naming the capability, never passed.
"""

from __future__ import annotations

import json
import secrets
import time

import pytest

from harness.contract.fixtures import succeed, tool_call
from harness.contract.interface import Provisioner
from harness.contract.manifest import requirement
from harness.contract.unread_flood import flood, tools_list

CODEX_TOOL_TIMEOUT_S = 70.0
"""What Codex gives a tool call: every answer, a hung app's included, comes within it."""
ANSWER_S = 30.0
FLOOD = 20_000
FLOOD_GROWTH_MB = 64
"""How much a server may grow under FLOOD unread tools/list requests (unbounded, the reference grew by 400 MB)."""


def _hook(provisioner: Provisioner, name: str):
    hook = getattr(provisioner, name, None)
    if hook is None:
        pytest.skip(f"not tested: the provisioner has no {name}() (the capability it offers is not offered: see "
                    "harness.contract.interface.HOOKED)")
    return hook


def _error_code(outcome) -> str | None:
    structured = outcome.structured if outcome.is_error else None
    return structured.get("error", {}).get("code") if isinstance(structured, dict) else None


# -- a hung app -----------------------------------------------------------------------------------


@pytest.mark.long_running(20)  # the reference gives a hung app 20 s
@requirement("call:app-hung:bounded")
def test_a_hung_app_is_answered_within_the_tool_timeout_and_told_from_a_stopped_one(own_servers):
    freeze, thaw = _hook(own_servers.provisioner, "freeze"), _hook(own_servers.provisioner, "thaw")
    caller, peer = own_servers.caller("hung"), own_servers.caller("peer")
    endpoint = own_servers.start(caller)
    succeed(endpoint, "list_agents", {})
    freeze()
    try:
        began = time.monotonic()
        calls = {"send_message": endpoint.call_tool("send_message", {"target": peer.name, "message": "hello"},
                                                    timeout=CODEX_TOOL_TIMEOUT_S),
                 "wait_agent": endpoint.call_tool("wait_agent", {"timeout_ms": 1000}, timeout=CODEX_TOOL_TIMEOUT_S),
                 "list_agents": endpoint.call_tool("list_agents", {}, timeout=CODEX_TOOL_TIMEOUT_S)}
        outcomes = {name: call.outcome(max(1.0, CODEX_TOOL_TIMEOUT_S - (time.monotonic() - began)))
                    for name, call in calls.items()}
    finally:
        thaw()
    for name, outcome in outcomes.items():
        assert outcome.response is not None, f"{name}: no answer within {CODEX_TOOL_TIMEOUT_S:.0f}s from a hung app"
        assert _error_code(outcome) == "app_not_responding", f"{name}: {outcome.response}"
        assert outcome.structured["error"].get("details", {}).get("retriable") is True, outcome.response
    succeed(endpoint, "list_agents", {}, timeout=ANSWER_S)  # the same session works once the app answers
    own_servers.provisioner.make_unavailable()
    stopped = tool_call(endpoint, "list_agents", {}, timeout=ANSWER_S)
    assert _error_code(stopped) == "app_unavailable", f"a stopped app is not a hung one: {stopped.response}"
    own_servers.provisioner.make_available()


@pytest.mark.long_running(20)  # the same
@requirement("call:app-hung:retry-receipt")
def test_a_call_given_up_while_the_app_hung_is_admitted_once_and_its_retry_returns_the_receipt(own_servers):
    freeze, thaw = _hook(own_servers.provisioner, "freeze"), _hook(own_servers.provisioner, "thaw")
    caller, worker = own_servers.caller("quitter"), own_servers.caller("worker")
    endpoint = own_servers.start(caller)
    succeed(endpoint, "list_agents", {})
    params = {"name": "followup_task", "arguments": {"target": worker.name, "message": f"task {secrets.token_hex(4)}"},
              "_meta": {"callId": f"call-{secrets.token_hex(6)}"}}
    freeze()
    try:
        request, answered = endpoint.server.request("tools/call", params)
        time.sleep(0.5)  # the point of the case: the client gives up while the app hangs
        endpoint.server.notify("notifications/cancelled", {"requestId": request["id"], "reason": "timeout"})
        early = endpoint.server.call("tools/call", params, timeout=CODEX_TOOL_TIMEOUT_S)
    finally:
        thaw()
    assert early.get("result", {}).get("isError") is True, f"a retry while the app hangs must fail: {early}"
    retry = endpoint.server.call("tools/call", params, timeout=ANSWER_S)
    receipt = retry.get("result", {}).get("structuredContent") or {}
    assert not retry["result"].get("isError") and receipt.get("request_id"), retry
    page = succeed(own_servers.start(worker), "receive_messages", {"timeout_ms": 3000})
    tasks = [r for r in page["records"] if r.get("kind") == "task" and r.get("body") == params["arguments"]["message"]]
    assert [t.get("request_id") for t in tasks] == [receipt["request_id"]], f"admitted once, its receipt: {page}"


# -- sizes and floods -------------------------------------------------------------------------------


@requirement("bounds:line:oversize")
def test_a_request_too_large_fails_that_call_alone(servers):
    caller, peer = servers.caller("big"), servers.caller("peer")
    endpoint = servers.start(caller)
    waiting = endpoint.call_tool("wait_agent", {"timeout_ms": 20_000}, timeout=ANSWER_S)
    for body_bytes, order in ((1_100_000, "id first"), (4_000_000, "id last")):
        msg_id = f"big-{body_bytes}"
        call = {"name": "followup_task", "arguments": {"target": peer.name, "message": "m" * body_bytes}}
        message = ({"jsonrpc": "2.0", "id": msg_id, "method": "tools/call", "params": call} if order == "id first"
                   else {"method": "tools/call", "params": call, "jsonrpc": "2.0", "id": msg_id})
        answered = endpoint.server.expect_response(msg_id)
        endpoint.server.send(message)
        response = answered.result(ANSWER_S)
        structured = (response.get("result") or {}).get("structuredContent") or {}
        assert structured.get("error", {}).get("code") == "message_too_large", \
            f"{body_bytes} bytes, {order}: {json.dumps(response)[:300]}"
    assert not waiting.future.done(), "the session's pending wait is untouched by another call's size"
    succeed(servers.start(peer), "send_message", {"target": caller.name, "message": "wake up"})
    woke = waiting.outcome(ANSWER_S)
    assert woke.response is not None and not woke.is_error and woke.structured.get("woke") is True, woke.response


@pytest.mark.long_running(12)  # a flood
@requirement("wire:backpressure:bounded")
def test_unread_answers_hold_the_server_back_and_its_memory_bounded(servers, contract_target):
    figures = flood(contract_target.server_cmd_for("messaging"), servers.bare_env(), tools_list(FLOOD),
                    give_up_mb=FLOOD_GROWTH_MB)
    assert figures.growth_mb < FLOOD_GROWTH_MB, f"grew {figures.growth_mb:.0f} MB under {FLOOD} unread requests"
    assert figures.answered >= FLOOD, f"{figures.answered} answers to {FLOOD} requests once the client read"


# -- targets that are not plainly sendable -------------------------------------------------------------


@requirement("target:disabled:refused")
def test_a_disabled_agent_is_never_a_target(own_servers):
    set_agent = _hook(own_servers.provisioner, "set_agent")
    caller = own_servers.caller("sender")
    off = own_servers.provisioner.register(f"off-{secrets.token_hex(3)}", aliases=(f"off-alias-{secrets.token_hex(3)}",))
    set_agent(off, enabled=False)
    endpoint = own_servers.start(caller)
    for tool in ("send_message", "followup_task"):
        for target in (off.name, off.aliases[0], off.agent_id):
            for strict in (False, True):
                outcome = tool_call(endpoint, tool, {"target": target, "message": "for nobody", "strict": strict})
                assert _error_code(outcome) == "target_not_sendable", (tool, target, strict, outcome.response)
    set_agent(off, enabled=True)
    page = succeed(own_servers.start(off), "receive_messages", {"timeout_ms": 0})
    assert page["records"] == [], f"nothing was admitted for the disabled agent: {page}"


@requirement("target:not-sendable:fallback")
def test_an_enabled_agent_that_is_not_sendable_is_a_target_unless_the_call_is_strict(own_servers):
    set_agent = _hook(own_servers.provisioner, "set_agent")
    caller = own_servers.caller("sender")
    quiet = own_servers.provisioner.register(f"quiet-{secrets.token_hex(3)}")
    set_agent(quiet, sendable=False)
    endpoint = own_servers.start(caller)
    admitted = []
    for tool in ("send_message", "followup_task"):
        for strict in (None, False):
            arguments = {"target": quiet.name, "message": f"{tool} {strict}"}
            if strict is not None:
                arguments["strict"] = strict
            receipt = succeed(endpoint, tool, arguments)
            assert receipt["recipient"]["agent_id"] == quiet.agent_id, receipt
            admitted.append(arguments["message"])
        refused = tool_call(endpoint, tool, {"target": quiet.name, "message": "strict", "strict": True})
        assert _error_code(refused) == "target_not_sendable", refused.response
    page = succeed(own_servers.start(quiet), "receive_messages", {"timeout_ms": 0, "limit": 100})
    assert sorted(r["body"] for r in page["records"]) == sorted(admitted), page
