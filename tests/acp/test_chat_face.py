"""The scripted model's Chat Completions face: OpenCode's requests, decided by the same rules."""

from __future__ import annotations

import json
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from harness.evidence import chat_requests as chat
from harness.evidence.model_log import ModelRequestLog
from harness.model.rules import script_from_document
from harness.model.server import ScriptedModel
from tests.patience import WAIT_S

RULES = tomllib.loads(r'''
[[rules.B]]
id = "report"
when = [{ tool_output = { tool = "followup_task", namespace = "mcp__peerwire", json = { rid = "request_id" } } }]
emit = [{ message = { phase = "final_answer", text = "Asked ${rid}." } }]

[[rules.B]]
id = "assign"
when = [{ user_text = { last = true, matches = 'ask (?P<who>\w+) to (?P<job>.+)' } }]
emit = [
  { message = { phase = "commentary", text = "Asking ${who}." } },
  { function_call = { namespace = "mcp__peerwire", name = "followup_task", arguments = { target = "${who}", message = "Please ${job}" } } },
]
''')


@pytest.mark.parametrize("namespace, name, chat_name", [("mcp__peerwire", "followup_task", "peerwire_followup_task"),
                                                        ("mcp__my.server", "get-it", "my_server_get-it"),
                                                        (None, "bash", "bash")])
def test_tool_names_go_both_ways(namespace, name, chat_name):
    assert chat.tool_name(namespace, name) == chat_name
    servers = [namespace.removeprefix("mcp__")] if namespace else ["peerwire"]
    assert chat.split_tool(chat_name, servers) == (namespace, name)


def test_the_longest_server_prefix_wins():
    assert chat.split_tool("peerwire_collab_send", ["peerwire", "peerwire_collab"]) == ("mcp__peerwire_collab", "send")


def test_a_chat_history_reads_as_responses_items():
    body = {"model": "m", "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "peerwire_list_agents", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"agents\": []}"}]}
    view = chat.responses_view(body, ["peerwire"], session="ses_1")
    assert view["prompt_cache_key"] == "ses_1"
    assert [i["type"] for i in view["input"]] == ["message", "message", "function_call", "function_call_output"]
    assert view["input"][1]["content"] == [{"type": "input_text", "text": "one"}, {"type": "input_text", "text": "two"}]
    assert (view["input"][2]["namespace"], view["input"][2]["name"]) == ("mcp__peerwire", "list_agents")
    assert view["input"][3]["call_id"] == "call_1"


def post(url: str, body: dict, headers: dict | None = None) -> tuple[int, list[dict]]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json",
                                                                      **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=WAIT_S) as answer:
            events = [json.loads(line[6:]) for line in answer.read().decode().splitlines()
                      if line.startswith("data: ") and line != "data: [DONE]"]
            return answer.status, events
    except urllib.error.HTTPError as error:
        return error.code, [json.loads(error.read())]


def test_the_rules_decide_a_chat_request_and_it_streams_as_chunks(tmp_path: Path):
    with ScriptedModel(script_from_document(RULES), log_path=tmp_path / "log.jsonl") as model:
        url = model.base_url("B") + "/chat/completions"
        first = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "ask A to count to ten"}],
                 "tools": [{"type": "function", "function": {"name": "peerwire_followup_task"}}]}
        status, events = post(url, first, {"x-session-id": "ses_9", "Authorization": "Bearer k"})
        assert status == 200
        assert events[0]["choices"][0]["delta"]["content"] == "Asking A."
        (call,) = events[1]["choices"][0]["delta"]["tool_calls"]
        assert call["function"]["name"] == "peerwire_followup_task"
        assert json.loads(call["function"]["arguments"]) == {"target": "A", "message": "Please count to ten"}
        assert events[-1]["choices"][0]["finish_reason"] == "tool_calls" and events[-1]["usage"]["prompt_tokens"] > 0
        second = {**first, "messages": [*first["messages"],
                                        {"role": "assistant", "content": "Asking A.", "tool_calls": [
                                            {"id": call["id"], "type": "function", "function": call["function"]}]},
                                        {"role": "tool", "tool_call_id": call["id"],
                                         "content": "{\"request_id\": \"rq_5\"}"}]}
        status, events = post(url, second, {"x-session-id": "ses_9"})
        assert events[0]["choices"][0]["delta"]["content"] == "Asked rq_5."
        assert events[-1]["choices"][0]["finish_reason"] == "stop"
        status, (error,) = post(url, {**first, "messages": [{"role": "user", "content": "nothing"}]})
        assert status == 400 and "no rule" in error["error"]["message"]
    log = ModelRequestLog.load(tmp_path / "log.jsonl")
    assert [(r.rule, r.outcome, r.wire) for r in log.requests] == [("assign", "answered", "chat"),
                                                                    ("report", "answered", "chat"),
                                                                    (None, "unexpected", "chat")]
    assert log.requests[0].session_id == log.requests[0].thread_id == "ses_9"
    assert "authorization" not in log.requests[0].headers
    assert log.requests[1].input_items()[-1] == {"type": "function_call_output", "call_id": call["id"],
                                                 "output": "{\"request_id\": \"rq_5\"}"}
    assert not log.problems  # each chat body expands whole from the bodies file and matches its digest
