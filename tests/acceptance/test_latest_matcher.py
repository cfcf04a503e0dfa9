"""`latest = true`: what the agent did last, even when a peer message was injected after it."""

from __future__ import annotations

from harness.model.rules import script_from_document

RULES = {"rules": {"A": [
    {"id": "after-wait", "when": [{"tool_output": {"tool": "wait_agent", "latest": True}}],
     "emit": [{"message": {"text": "received"}}]},
]}}


def call(call_id: str, name: str) -> dict:
    return {"type": "function_call", "name": name, "namespace": "mcp__peerwire", "arguments": "{}", "call_id": call_id}


def output(call_id: str) -> dict:
    return {"type": "function_call_output", "call_id": call_id, "output": "Wall time: 0 seconds\nOutput:\n{}"}


def injected() -> dict:
    return {"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "Message Type: FINAL_ANSWER\nSender: B\nPayload:\nhi"}]}


def test_latest_ignores_a_message_injected_after_the_newest_tool_output() -> None:
    script = script_from_document(RULES)
    body = {"input": [call("c1", "wait_agent"), output("c1"), injected()]}
    assert script.decide("A", body).rule_id == "after-wait"


def test_latest_only_considers_the_newest_tool_output() -> None:
    script = script_from_document(RULES)
    body = {"input": [call("c1", "wait_agent"), output("c1"), call("c2", "receive_messages"), output("c2")]}
    assert script.decide("A", body) is None
