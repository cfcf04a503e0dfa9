"""An ACP transcript read as the agent's history: the recorded fixtures' turns, messages and tool calls.

OpenCode keeps no rollout the harness reads; its ACP transcript is its history
(harness/evidence/acp_history.py). These read the recorded exchanges
(fixtures/acp/) and hold every fact the checks take from a history: which turn
a line belongs to, which message is a turn's final answer, a tool call with
its arguments and its output, how each turn ended.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.evidence.acp_history import AcpHistory
from harness.evidence.transcript_lines import TranscriptLine

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "acp"


def history(name: str, *, file: str = "acp/B.g1.acp.jsonl") -> AcpHistory:
    lines = []
    for number, raw in enumerate((FIXTURES / f"{name}.jsonl").read_text("utf-8").splitlines(), start=1):
        entry = json.loads(raw)
        if "message" in entry:
            lines.append(TranscriptLine(f"{file}:{number}", 1, entry["dir"], entry["message"], wall=float(number)))
    return AcpHistory(lines)


def kinds(h: AcpHistory) -> list[tuple[str, str | None]]:
    return [(line.record_type, line.payload.get("type")) for line in h.lines]


def test_a_task_turn_reads_as_a_history():
    h = history("explicit_reply")
    (turn,) = h.turns
    assert (turn.turn_id, turn.session_id, turn.status, turn.stop_reason) == (
        "<uuid:2>", "<session:1>", "completed", "end_turn")
    assert kinds(h) == [("event_msg", "task_started"), ("response_item", "message"), ("response_item", "message"),
                        ("response_item", "function_call"), ("response_item", "function_call_output"),
                        ("response_item", "message"), ("event_msg", "task_complete")]
    prompt, commentary, final = [line for line in h.lines if line.payload.get("type") == "message"]
    # The prompt is the user's input, its blocks kept apart: the task's head, then the literal text.
    assert prompt.payload["role"] == "user" and prompt.payload["acp_prompt"]
    assert [part["text"] for part in prompt.payload["content"]][1] == (
        "Please give me an explicit reply: which codename follows Juniper?")
    # Only the last message with no tool call after it is the final answer; the one before the call is not.
    assert (commentary.payload["phase"], commentary.text()) == ("commentary", "Replying to <rq:1>.")
    assert (final.payload["phase"], final.text(), final.payload["id"]) == (
        "final_answer", "Replied to the request.", "<message:2>")
    ((call, output),) = h.tool_calls("reply")
    assert (call.payload["namespace"], call.payload["name"], call.payload["call_id"]) == (
        "mcp__peerwire", "reply", "<call:1>")
    assert json.loads(call.payload["arguments"]) == {"message": "Kestrel follows Juniper (explicit reply).",
                                                     "request_id": "<rq:1>", "status": "done"}
    assert json.loads(output.text())["kind"] == "reply"
    # Every line is of the turn, in the session, and cites the transcript line it was read from.
    assert {(line.thread_id, line.running_turn_id) for line in h.lines} == {("<session:1>", "<uuid:2>")}
    assert [str(line.at) for line in (call, output, final)] == [
        "acp/B.g1.acp.jsonl:9", "acp/B.g1.acp.jsonl:11", "acp/B.g1.acp.jsonl:12"]
    assert not h.stray and h.sessions == ["<session:1>"]


def test_a_cancelled_prompt_is_an_interrupted_turn_without_a_final_answer():
    h = history("cancel")
    first, later = h.turns
    assert (first.status, later.status) == ("interrupted", "completed")
    (cancel,) = h.cancels
    assert h.turn_at(cancel) is first and first.cancels == [cancel]
    aborted = [line for line in h.lines if line.payload.get("type") == "turn_aborted"]
    assert [line.payload["turn_id"] for line in aborted] == [first.turn_id]
    finals = [line for line in h.lines if line.payload.get("phase") == "final_answer"]
    assert [line.running_turn_id for line in finals] == [later.turn_id]


def test_a_failed_prompt_ends_failed_with_the_agents_message():
    h = history("failed_prompt")
    (turn,) = h.turns
    assert turn.status == "failed" and turn.stop_reason is None
    (end,) = [line for line in h.lines if line.payload.get("type") == "task_complete"]
    assert end.payload["error"] and end.payload["last_agent_message"] is None


def test_mail_in_a_next_prompt_is_the_prompts_first_blocks():
    (turn,) = history("next_turn").turns
    head, body, own = turn.blocks()
    assert head.startswith("Message Type: MESSAGE") and head.endswith("Payload:")
    assert (body, own) == ("The release is on Friday.", "Is there anything new? hello")


def test_tool_calls_of_two_turns_stay_in_their_turns():
    h = history("receive")
    first, second = h.turns
    calls = h.tool_calls()
    assert [call.payload["name"] for call, _ in calls] == ["wait_agent", "receive_messages"]
    assert {call.running_turn_id for call, _ in calls} == {first.turn_id}
    assert [line.running_turn_id for line in h.lines if line.payload.get("phase") == "final_answer"] == [
        first.turn_id, second.turn_id]


def test_work_outside_every_prompt_is_stray():
    """An agent message or tool call the agent sends while no prompt runs is kept apart: no turn opened it."""
    lines = [TranscriptLine(f"acp/B.g1.acp.jsonl:{n}", 1, "received", {
        "jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "ses_x", "update": update}})
        for n, update in enumerate([
            {"sessionUpdate": "available_commands_update", "availableCommands": []},
            {"sessionUpdate": "agent_message_chunk", "messageId": "msg_1", "content": {"type": "text", "text": "hi"}},
        ], start=1)]
    h = AcpHistory(lines)
    assert [line.ref for line in h.stray] == ["acp/B.g1.acp.jsonl:2"] and not h.turns and not h.lines


@pytest.mark.parametrize("name", sorted(p.stem for p in FIXTURES.glob("*.jsonl")))
def test_every_fixture_reads_as_turns_that_each_begin_and_end(name):
    h = history(name)
    assert h.turns, f"{name} has no prompt"
    for turn in h.turns:
        mine = [line for line in h.lines if line.running_turn_id == turn.turn_id]
        assert mine[0].payload["type"] == "task_started"
        assert mine[-1].payload["type"] in ("task_complete", "turn_aborted")
        assert [line.at.line for line in mine] == sorted(line.at.line for line in mine)
