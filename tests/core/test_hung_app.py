"""A hung app (stopped with SIGSTOP: alive, silent) bounds every call and says so.

A stopped app (no process) is ``app_unavailable``; a hung one is
``app_not_responding``, retriable. Each exchange with the app gives up after
its own wait plus :data:`~peerwire.limits.ANSWER_GRACE_S` (never sooner than
:data:`~peerwire.limits.MIN_ANSWER_BOUND_S`), which keeps the longest
messaging call under Codex's tool timeout. A call whose caller gave
up while the app was hung is not lost or doubled: once the app answers, a
retry with the same ``_meta.callId`` returns the first receipt.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from harness.contract.endpoints import RawEndpoint
from peerwire import collab, contract, control
from peerwire.errors import Code
from peerwire.home import HOME_ENV, SESSION_ENV
from peerwire.limits import ANSWER_GRACE_S, CODEX_TOOL_TIMEOUT_S, DEFAULT_WAIT_TIMEOUT_MS, MIN_ANSWER_BOUND_S
from tests.patience import WAIT_S

SLACK_S = CODEX_TOOL_TIMEOUT_S - MIN_ANSWER_BOUND_S
"""What a loaded machine may add to the app's answer bound: the requirement is an answer within Codex's tool
timeout, so a hung app's answer may take until then."""


@contextlib.contextmanager
def hung(app_pid: int):
    """The app stopped (SIGSTOP) for the block; continued afterwards, and seen running again (bounded)."""
    os.kill(app_pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(app_pid, signal.SIGCONT)
        deadline = time.monotonic() + 10
        while psutil.Process(app_pid).status() == psutil.STATUS_STOPPED and time.monotonic() < deadline:
            time.sleep(0.01)


def _server(core, caller, tmp_path, name="mcp") -> RawEndpoint:
    env = {**os.environ, HOME_ENV: str(core.home.path), SESSION_ENV: caller.token}
    endpoint = RawEndpoint.open([sys.executable, "-m", "peerwire", "mcp", "serve"], env,
                                stderr=tmp_path / f"{name}.stderr.log")
    endpoint.handshake()
    return endpoint


def _error(outcome) -> dict:
    assert outcome.response is not None, outcome.failure
    assert outcome.is_error, outcome.response
    return outcome.structured["error"]


def test_every_messaging_call_is_bounded_under_the_codex_tool_timeout():
    for tool in contract.PROFILES["messaging"][1]:
        longest = {"timeout_ms": contract.definitions()["timeout_ms"]["maximum"]}
        assert control.answer_bound_s(tool, longest) < CODEX_TOOL_TIMEOUT_S, tool
        assert control.answer_bound_s(tool, {}) < CODEX_TOOL_TIMEOUT_S, tool
    assert control.answer_bound_s("wait_agent", {}) == DEFAULT_WAIT_TIMEOUT_MS / 1000 + ANSWER_GRACE_S
    assert control.answer_bound_s("wait_agent", {"timeout_ms": 30_000}) == 30 + ANSWER_GRACE_S
    # A short wait, or none, still gives a busy app its least time to answer.
    assert control.answer_bound_s("receive_messages", {"timeout_ms": 1500}) == MIN_ANSWER_BOUND_S
    assert control.answer_bound_s("send_message", {"target": "x", "message": "y"}) == MIN_ANSWER_BOUND_S
    # what the app refuses at once (a wrong type, out of range) waits no longer than the longest valid wait
    assert control.answer_bound_s("wait_agent", {"timeout_ms": "soon"}) == MIN_ANSWER_BOUND_S
    assert control.answer_bound_s("wait_agent", {"timeout_ms": 10**12}) < CODEX_TOOL_TIMEOUT_S
    # The collaboration profile's wait has its own floor and default: the bound follows them.
    assert control.answer_bound_s("wait_agent", {}, "collab") == collab.WAIT_DEFAULT_MS / 1000 + ANSWER_GRACE_S
    assert control.answer_bound_s("wait_agent", {"timeout_ms": 3_600_000}, "collab") == 3600 + ANSWER_GRACE_S


def test_a_hung_app_fails_each_mcp_call_within_its_bound_and_says_it_hangs(core, tmp_path):
    alice = core.register("alice")
    core.register("bob")
    endpoint = _server(core, alice, tmp_path)
    try:
        assert not endpoint.call_tool("list_agents", {}, timeout=WAIT_S).outcome(WAIT_S).is_error  # connected
        with hung(core.app.process.pid):
            began = time.monotonic()
            calls = {
                "send_message": endpoint.call_tool("send_message", {"target": "bob", "message": "hi"}, timeout=WAIT_S),
                "wait_agent": endpoint.call_tool("wait_agent", {"timeout_ms": 1000}, timeout=WAIT_S),
                "list_agents": endpoint.call_tool("list_agents", {}, timeout=WAIT_S),
            }
            outcomes = {name: call.outcome(MIN_ANSWER_BOUND_S + SLACK_S) for name, call in calls.items()}
            elapsed = time.monotonic() - began
        for name, outcome in outcomes.items():
            error = _error(outcome)
            assert error["code"] == Code.APP_NOT_RESPONDING, (name, error)
            assert error["details"]["retriable"] is True, error
            assert "not answer" in error["message"], error
        assert elapsed >= MIN_ANSWER_BOUND_S - 0.5, "a hung app is given its time before it is declared hung"
        # Continued, the app answers the same session again.
        done = endpoint.call_tool("list_agents", {}, timeout=WAIT_S).outcome(WAIT_S)
        assert not done.is_error, done.response
        assert {"alice", "bob"} <= {a["name"] for a in done.structured["agents"]}
    finally:
        endpoint.close()


def test_a_stopped_app_is_unavailable_not_hung(core, tmp_path):
    alice = core.register("alice")
    endpoint = _server(core, alice, tmp_path)
    try:
        core.stop_app()
        error = _error(endpoint.call_tool("list_agents", {}, timeout=WAIT_S).outcome(WAIT_S))
        assert error["code"] == Code.APP_UNAVAILABLE, error
    finally:
        endpoint.close()


@pytest.mark.slow
def test_the_cli_says_a_hung_app_hangs(core):
    alice = core.register("alice")
    env = {**os.environ, HOME_ENV: str(core.home.path), SESSION_ENV: alice.token}
    with hung(core.app.process.pid):
        began = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "peerwire", "peers", "--json"], env=env, capture_output=True,
                              text=True, timeout=MIN_ANSWER_BOUND_S + SLACK_S)
        elapsed = time.monotonic() - began
    assert done.returncode == 1, done
    assert json.loads(done.stdout)["error"]["code"] == Code.APP_NOT_RESPONDING, done.stdout
    assert elapsed < MIN_ANSWER_BOUND_S + SLACK_S


@pytest.mark.slow
def test_a_call_given_up_while_the_app_hung_is_admitted_once_and_its_retry_returns_its_receipt(core, tmp_path):
    alice, bob = core.register("alice"), core.register("bob")
    endpoint = _server(core, alice, tmp_path)
    meta = {"callId": "call-while-hung"}
    arguments = {"target": "bob", "message": "count the apples"}
    try:
        assert not endpoint.call_tool("list_agents", {}, timeout=WAIT_S).outcome(WAIT_S).is_error
        with hung(core.app.process.pid):
            request, answered = endpoint.server.request(
                "tools/call", {"name": "followup_task", "arguments": arguments, "_meta": meta})
            time.sleep(0.5)  # the point of the case: the client gives up while the app is hung
            endpoint.server.notify("notifications/cancelled", {"requestId": request["id"], "reason": "timeout"})
            # Retried while the app still hangs: a retriable refusal, not silence.
            early = endpoint.server.call("tools/call", {"name": "followup_task", "arguments": arguments,
                                                        "_meta": meta}, timeout=MIN_ANSWER_BOUND_S + SLACK_S)
            assert early["result"]["structuredContent"]["error"]["code"] == Code.APP_NOT_RESPONDING, early
        retry = endpoint.server.call("tools/call", {"name": "followup_task", "arguments": arguments,
                                                    "_meta": meta}, timeout=MIN_ANSWER_BOUND_S + SLACK_S)
        receipt = retry["result"]["structuredContent"]
        assert not retry["result"]["isError"], retry
        assert not answered.done(), "a cancelled request gets no answer"
    finally:
        endpoint.close()
    page = control.ControlClient(core.home, bob.token).call("receive_messages", {"limit": 100})
    tasks = [r for r in page["records"] if r["kind"] == "task"]
    assert [t["request_id"] for t in tasks] == [receipt["request_id"]], page
