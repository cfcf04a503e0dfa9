"""What a prompt's answer means for the tasks it carried: the rule table, case by case (no I/O)."""

from __future__ import annotations

import pytest

from peerwire.acp.turns import STOP_REASONS, PromptTurn, final_message, outcome_of
from peerwire.limits import MAX_BODY_BYTES


def turn() -> PromptTurn:
    return PromptTurn("t-1", "ses_1", "task", request_ids=("rq_1",))


def chunk(message_id: str, text: str) -> dict:
    return {"sessionUpdate": "agent_message_chunk", "messageId": message_id, "content": {"type": "text", "text": text}}


def tool(call_id: str, kind: str = "tool_call") -> dict:
    return {"sessionUpdate": kind, "toolCallId": call_id, "status": "completed"}


def test_end_turn_publishes_the_last_message_from_the_recipient():
    updates = [chunk("msg_1", "Looking "), chunk("msg_1", "it up."), tool("c1"), tool("c1", "tool_call_update"),
               chunk("msg_2", "Kestrel "), chunk("msg_2", "follows.")]
    out = outcome_of(turn(), {"stopReason": "end_turn", "userMessageId": "t-1"}, None, updates, "B")
    assert (out["reply_status"], out["text"], out["attributed_to_recipient"]) == ("done", "Kestrel follows.", True)
    assert (out["final_item_id"], out["message_ids"], out["user_message_id"]) == ("msg_2", ["msg_1", "msg_2"], "t-1")


def test_a_turn_that_ended_on_a_tool_call_has_no_final_text():
    updates = [chunk("msg_1", "Replying."), tool("c1"), tool("c1", "tool_call_update")]
    assert final_message(updates) is None
    out = outcome_of(turn(), {"stopReason": "end_turn"}, None, updates, "B")
    assert (out["reply_status"], out["code"], out["attributed_to_recipient"]) == ("blocked", "no_final_text", False)


def test_thoughts_and_other_content_are_not_the_final_message():
    updates = [chunk("msg_1", "Answer."), {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text",
                                                                                              "text": "hm"}},
               {"sessionUpdate": "agent_message_chunk", "messageId": "msg_2", "content": {"type": "image"}}]
    assert final_message(updates).text == "Answer."


@pytest.mark.parametrize("stop, status, code", [("cancelled", "blocked", "turn_interrupted"),
                                                ("max_tokens", "failed", "turn_max_tokens"),
                                                ("max_turn_requests", "failed", "turn_max_turn_requests"),
                                                ("refusal", "failed", "turn_refused")])
def test_every_other_known_stop_reason_is_peerwires_notice(stop, status, code):
    out = outcome_of(turn(), {"stopReason": stop}, None, [chunk("msg_1", "partial")], "B")
    assert (out["reply_status"], out["code"], out["attributed_to_recipient"]) == (status, code, False)
    assert "partial" not in out["text"]


@pytest.mark.parametrize("answer", [{"stopReason": "paused"}, {"stopReason": None}, {}, {"stopReason": 3}])
def test_an_unknown_stop_reason_is_no_outcome(answer):
    assert outcome_of(turn(), answer, None, [chunk("msg_1", "Done.")], "B") is None


def test_an_error_answer_fails_with_the_agents_message():
    out = outcome_of(turn(), None, {"code": -32603, "message": "Internal error: model said no"}, [], "B")
    assert (out["reply_status"], out["code"]) == ("failed", "prompt_error")
    assert "model said no" in out["text"] and "-32603" in out["text"]


@pytest.mark.parametrize("size, status", [(MAX_BODY_BYTES, "done"), (MAX_BODY_BYTES + 1, "blocked")])
def test_the_reply_limit_holds_at_its_bound(size, status):
    out = outcome_of(turn(), {"stopReason": "end_turn"}, None, [chunk("msg_1", "é" * (size // 2) + "x" * (size % 2))],
                     "B")
    assert out["reply_status"] == status and out["text_chars"] == size // 2 + size % 2


def test_the_table_names_what_acp_defines():
    assert set(STOP_REASONS) == {"end_turn", "cancelled", "max_tokens", "max_turn_requests", "refusal"}


def test_only_turn_updates_admit_a_prompt():
    t = turn()
    assert not t.observe({"sessionUpdate": "available_commands_update"})
    assert not t.observe({"sessionUpdate": "usage_update"})
    assert t.observe(chunk("msg_9", "hi")) and t.acknowledged_by == "session/update agent_message_chunk"
    assert not t.observe(tool("c1")) and t.first_message_id == "msg_9"
