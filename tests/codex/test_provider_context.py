"""A waiting Codex agent whose mail arrives through the provider path: ``provider_context_available``.

B is in a turn, blocked in ``receive_messages`` (or ``wait_agent``) with a long
timeout, when A sends it information. The adapter injects the envelope into B's
running turn; the waiting tool then returns at once with wake reason
``provider_context_available``: no body (the model has the envelope already),
nothing acknowledged, ``timed_out`` false. What B's model received next is read
from the scripted model's request log.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from harness.lab.reference import ReferenceLab
from harness.lab.live import TURN_TIMEOUT_S
from harness.lab.recorded.routes import await_reply
from harness.contract.manifest import requirement
from harness.model.rules import script_from_document
from peerwire import envelope

pytestmark = pytest.mark.codex

NS = "mcp__peerwire"
WAIT_MS = 55_000  # far longer than the test may take: returning at once is the behaviour under test


def script():
    """B first takes its mailbox's records (the task itself is one) and acknowledges them, so that nothing
    unacknowledged is left, then waits with the tool the task names."""
    final = lambda text: {"message": {"phase": "final_answer", "text": text}}  # noqa: E731
    task = lambda marker, **more: {"envelope": {"type": "NEW_TASK", "contains": marker, **more}}  # noqa: E731
    output = lambda tool, **more: {"tool_output": {"tool": tool, "namespace": NS, "latest": True, **more}}  # noqa: E731
    call = lambda tool, **arguments: {"function_call": {"namespace": NS, "name": tool, "arguments": arguments}}  # noqa: E731
    taken = {"contains": '"kind":"task"', "json": {"cursor": "cursor"}}
    return script_from_document({
        "scenario": {"name": "provider-context", "description": "B waits while mail reaches its turn."},
        "rules": {"B": [
            {"id": "ready", "when": [{"user_text": {"last": True, "contains": "Are your tools ready?"}}],
             "emit": [final("ready")]},
            {"id": "after-receive", "when": [output("receive_messages", contains="wake_reason",
                                                    json={"reason": "wake_reason"})],
             "emit": [final("receive woke: ${reason}")]},
            {"id": "after-wait", "when": [output("wait_agent", json={"reason": "wake_reason"})],
             "emit": [final("wait woke: ${reason}")]},
            {"id": "ack-and-receive", "when": [output("receive_messages", **taken), task("[receive_messages]")],
             "emit": [call("receive_messages", ack_cursor="${cursor}", timeout_ms=WAIT_MS)]},
            {"id": "ack", "when": [output("receive_messages", **taken), task("[wait_agent]")],
             "emit": [call("receive_messages", ack_cursor="${cursor}")]},
            {"id": "wait", "when": [output("receive_messages"), task("[wait_agent]")],
             "emit": [call("wait_agent", timeout_ms=WAIT_MS)]},
            {"id": "take", "when": [task("wait for news", last=True)], "emit": [call("receive_messages")]},
        ]},
    }, source="provider-context")


@pytest.fixture
def lab(tmp_path: Path):
    with ReferenceLab(tmp_path, script(), agents=("A", "B"), attach=False) as lab:
        lab.attach("B")
        # Codex starts the MCP servers beside the thread's first turn: a warm-up turn lets the task's turn
        # see the peerwire tools.
        lab.await_turn("B", lab.prompt("B", "Are your tools ready?"))
        yield lab


def wait_while_mail_arrives(lab: ReferenceLab, tool: str) -> dict:
    """B calls ``tool`` in a turn; once it waits, A sends information. Returns what B's tool answered, as B's
    model read it, the information's receipt and the model request that followed."""
    task = lab.as_agent("A").call("followup_task", {"target": "B", "message": f"[{tool}] wait for news"})
    b_id = lab.agents["B"].agent_id
    # Blocking is no commit, so there is no event to block on: poll the app's count of blocked waits, bounded.
    # (A subscription alone is not enough: every receive subscribes before its first read, and a message sent
    # then would be read, not woken on.)
    deadline = time.monotonic() + TURN_TIMEOUT_S
    while not lab.control().call("status")["waiting"].get(b_id):
        assert time.monotonic() < deadline, f"B's {tool} did not wait within {TURN_TIMEOUT_S}s"
        time.sleep(0.02)
    info = lab.as_agent("A").call("send_message", {"target": "B", "message": "News: the build is green ✓\nno action"})
    reply = await_reply(lab, task["request_id"])
    # The tool's last call (the one that waited), and the first model request that holds its output.
    found: dict[str, tuple] = {}
    for exchange in lab.model.exchanges:
        if exchange.agent != "B":
            continue
        items = exchange.input_items()
        calls = {i["call_id"]: i["name"] for i in items if i.get("type") == "function_call"}
        for item in items:
            if item.get("type") == "function_call_output" and calls.get(item["call_id"]) == tool:
                found.setdefault(item["call_id"], (exchange, item))
    assert found, f"no model request of B holds the {tool} output"
    exchange, output = list(found.values())[-1]
    text = output["output"] if isinstance(output["output"], str) else json.dumps(output["output"])
    result = json.loads(text[text.index("{"):])
    return {"result": result, "reply": reply, "info": info, "exchange": exchange, "task": task}


def injected_envelopes(exchange, record_id_body: str) -> list[str]:
    texts = ["\n".join(p.get("text", "") for p in item.get("content") or [])
             for item in exchange.input_items() if item.get("type") == "message" and item.get("role") == "user"]
    return [t for t in texts if t.startswith("Message Type: MESSAGE") and envelope.parse(t)["payload"] == record_id_body]


@requirement("receive:wake:provider-context")
def test_a_waiting_receive_returns_at_once_when_mail_reaches_the_conversation(lab):
    out = wait_while_mail_arrives(lab, "receive_messages")
    result = out["result"]
    assert result["wake_reason"] == "provider_context_available"
    assert result["timed_out"] is False and result["records"] == [] and result["new_work"] == []
    assert out["reply"]["body"] == "receive woke: provider_context_available"
    # the body reached B's model once, as the injected envelope in the same turn, not in a tool output
    body = "News: the build is green ✓\nno action"
    assert len(injected_envelopes(out["exchange"], body)) == 1
    assert body not in json.dumps(result, ensure_ascii=False)
    # nothing was acknowledged: the information is still there to receive, from the returned cursor too
    for args in ({}, {"cursor": result["cursor"]}):
        page = lab.as_agent("B").call("receive_messages", args)
        assert out["info"]["interaction_id"] in [r["record_id"] for r in page["records"]]


@requirement("wait:wake:provider-context")
def test_a_waiting_wait_agent_returns_at_once_when_mail_reaches_the_conversation(lab):
    out = wait_while_mail_arrives(lab, "wait_agent")
    result = out["result"]
    assert result == {"woke": True, "timed_out": False, "wake_reason": "provider_context_available",
                      "pending": result["pending"]} and result["pending"] >= 1
    assert out["reply"]["body"] == "wait woke: provider_context_available"
    assert len(injected_envelopes(out["exchange"], "News: the build is green ✓\nno action")) == 1
    assert lab.as_agent("B").call("wait_agent", {"timeout_ms": 0})["wake_reason"] == "unacknowledged_activity"
