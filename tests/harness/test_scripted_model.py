"""The scripted model over plain HTTP: rules, templating, holds, unexpected requests, the log."""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import signal
import socket
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.evidence.model_bodies import BodyError, bodies_path, digest, read_log
from harness.model.rules import ScenarioError, load_script, read_input, script_from_document
from harness.model.server import UNEXPECTED_ERROR_CODE, ScriptedModel
from tests.patience import WAIT_S

ROOT = Path(__file__).resolve().parents[2]
WAIT = WAIT_S

RULES = """
[scenario]
name = "unit"

[[rules.A]]
id = "quote-request"
when = [
  { tool_output = { tool = "followup_task", namespace = "mcp__peerwire", last = true, json = { request_id = "request_id" } } },
]
emit = [
  { message = { phase = "commentary", text = "Waiting on ${request_id}." } },
  { function_call = { namespace = "mcp__peerwire", name = "wait_agent", arguments = { timeout_ms = 0, note = "for ${request_id} — ✓" } } },
]

[[rules.A]]
id = "answer-task"
when = [
  { envelope = { type = "NEW_TASK", last = true, matches = 'Request: (?P<request_id>rq_\\w+)' } },
]
unless = [
  { tool_call = { tool = "reply" } },
]
emit = [
  { function_call = { namespace = "mcp__peerwire", name = "reply", arguments = { request_id = "${request_id}", status = "done", message = "ok" } } },
]

[[rules.A]]
id = "greet"
when = [{ user_text = { contains = "hello", last = true } }]
emit = [{ message = { phase = "final_answer", text = "hi from ${agent}" } }]

[[rules.A]]
id = "slow"
when = [{ user_text = { contains = "take your time", last = true } }]
hold = "slow"
emit = [{ message = { phase = "final_answer", text = "released" } }]
"""


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def call(
    name: str, call_id: str, arguments: dict[str, Any], namespace: str = "mcp__peerwire"
) -> dict[str, Any]:
    return {
        "type": "function_call",
        "namespace": namespace,
        "name": name,
        "arguments": json.dumps(arguments),
        "call_id": call_id,
    }


def output(call_id: str, output: Any) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def request_body(*items: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": "peerwire-scripted",
        "stream": True,
        "prompt_cache_key": "thread-1",
        "input": list(items),
    }


@pytest.fixture
def model(tmp_path: Path) -> Iterator[ScriptedModel]:
    script = script_from_document(tomllib.loads(RULES))
    with ScriptedModel(script, log_path=tmp_path / "model.jsonl") as running:
        yield running


def post(
    model: ScriptedModel, path: str, body: Any, headers: dict[str, str] | None = None
) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", model.port, timeout=WAIT)
    try:
        connection.request(
            "POST", path, json.dumps(body), {"Content-Type": "application/json", **(headers or {})}
        )
        response = connection.getresponse()
        return response.status, response.read().decode("utf-8")
    finally:
        connection.close()


def sse(text: str) -> list[dict[str, Any]]:
    """SSE blocks as decoded `data`, checking each `event:` names its data's type."""
    events = []
    for block in filter(None, text.strip().split("\n\n")):
        fields = dict(line.split(": ", 1) for line in block.split("\n"))
        data = json.loads(fields["data"])
        assert fields["event"] == data["type"]
        events.append(data)
    return events


def respond(model: ScriptedModel, body: dict[str, Any], agent: str = "A") -> list[dict[str, Any]]:
    status, text = post(model, f"/agents/{agent}/v1/responses", body)
    assert status == 200, text
    return sse(text)


def log_records(model: ScriptedModel, tmp_path: Path) -> list[dict[str, Any]]:
    """The log's records, request bodies expanded whole (and checked against their digests)."""
    model.stop()
    return [record for _, record in read_log(tmp_path / "model.jsonl")]


# -- answers -------------------------------------------------------------------


def test_a_matched_request_streams_created_items_completed(model: ScriptedModel) -> None:
    events = respond(model, request_body(user("hello there")))

    assert [event["type"] for event in events] == [
        "response.created",
        "response.output_item.done",
        "response.completed",
    ]
    assert events[1]["item"] == {
        "type": "message",
        "role": "assistant",
        "id": events[1]["item"]["id"],
        "content": [{"type": "output_text", "text": "hi from A"}],
        "phase": "final_answer",
    }
    completed = events[2]["response"]
    assert completed["id"] == events[0]["response"]["id"]
    assert set(completed["usage"]) >= {"input_tokens", "output_tokens", "total_tokens"}
    assert model.exchanges[0].rule_id == "greet"
    assert model.exchanges[0].outcome == "answered"


def test_tool_output_is_tied_to_its_tool_by_call_id_and_json_is_captured(model: ScriptedModel) -> None:
    # Codex renders an MCP result without structuredContent as a list of parts
    # led by a "Wall time" line.
    body = request_body(
        user("assign the work"),
        call("followup_task", "call_1", {"target": "B", "message": "x"}),
        output(
            "call_1",
            [
                {"type": "input_text", "text": "Wall time: 0.0031 seconds\nOutput:"},
                {"type": "input_text", "text": json.dumps({"request_id": "rq_42", "state": "admitted"})},
            ],
        ),
    )

    events = respond(model, body)

    items = [event["item"] for event in events if event["type"] == "response.output_item.done"]
    assert items[0]["content"][0]["text"] == "Waiting on rq_42."
    assert items[0]["phase"] == "commentary"
    function_call = items[1]
    assert (function_call["type"], function_call["namespace"], function_call["name"]) == (
        "function_call",
        "mcp__peerwire",
        "wait_agent",
    )
    assert json.loads(function_call["arguments"]) == {"timeout_ms": 0, "note": "for rq_42 — ✓"}
    assert function_call["call_id"].startswith("call_")


def test_structured_tool_output_string_form_is_read_too(model: ScriptedModel) -> None:
    # With structuredContent Codex sends one string: prefix lines, then compact JSON.
    body = request_body(
        call("followup_task", "call_9", {}),
        output("call_9", 'Wall time: 0.0039 seconds\nOutput:\n{"request_id":"rq_7","note":"{not json"}'),
    )

    items = [event["item"] for event in respond(model, body) if event["type"] == "response.output_item.done"]

    assert items[0]["content"][0]["text"] == "Waiting on rq_7."


def test_output_of_another_tool_with_the_same_json_does_not_match(model: ScriptedModel) -> None:
    body = request_body(
        call("send_message", "call_1", {}),
        output("call_1", json.dumps({"request_id": "rq_1"})),
    )

    status, text = post(model, "/agents/A/v1/responses", body)

    assert status == 400
    assert model.exchanges[0].outcome == "unexpected"


def test_envelope_capture_and_unless(model: ScriptedModel) -> None:
    envelope = "Message Type: NEW_TASK\nRequest: rq_abc\nSender: B (0000)\nPayload:\nplease do it"
    first = request_body(user("start"), user(envelope))

    items = [event["item"] for event in respond(model, first) if event["type"] == "response.output_item.done"]

    assert json.loads(items[0]["arguments"])["request_id"] == "rq_abc"
    # Once the history holds a reply call, `unless` keeps the rule from firing again.
    again = request_body(user("start"), items[0], user(envelope))
    status, _ = post(model, "/agents/A/v1/responses", again)
    assert status == 400


def test_last_requires_the_newest_input_item(model: ScriptedModel) -> None:
    status, _ = post(model, "/agents/A/v1/responses", request_body(user("hello"), user("something else")))

    assert status == 400


def test_first_matching_rule_wins() -> None:
    script = script_from_document(
        {
            "rules": {
                "A": [
                    {
                        "id": "first",
                        "when": [{"user_text": {"contains": "x"}}],
                        "emit": [{"message": {"text": "1"}}],
                    },
                    {"id": "second", "emit": [{"message": {"text": "2"}}]},
                ]
            }
        }
    )

    assert script.decide("A", request_body(user("x"))).rule_id == "first"  # type: ignore[union-attr]
    assert script.decide("A", request_body(user("y"))).rule_id == "second"  # type: ignore[union-attr]
    assert script.decide("B", request_body(user("x"))) is None


def _report_by_request() -> Any:
    return script_from_document({"rules": {"A": [{
        "id": "report",
        "when": [
            {"tool_output": {"tool": "followup_task", "json": {"asked": "request_id"}}},
            {"tool_output": {"tool": "receive_messages", "latest": True,
                             "json": {"body": "records[request_id=${asked}].body"}}},
        ],
        "emit": [{"message": {"text": "B said: ${body}"}}],
    }]}})


def test_a_json_path_selects_the_record_for_the_request_an_earlier_matcher_captured() -> None:
    script = _report_by_request()
    page = {"records": [{"kind": "reply", "request_id": "rq_1", "body": "old answer"},
                        {"kind": "reply", "request_id": "rq_2", "body": "new answer"}]}
    body = request_body(
        call("followup_task", "call_1", {}), output("call_1", json.dumps({"request_id": "rq_2"})),
        call("receive_messages", "call_2", {}), output("call_2", json.dumps(page)),
    )
    decision = script.decide("A", body)
    assert decision is not None and decision.items[0]["content"][0]["text"] == "B said: new answer"
    # only the earlier request's reply: the rule does not apply (records.0 would have reported it)
    stale = request_body(
        call("followup_task", "call_1", {}), output("call_1", json.dumps({"request_id": "rq_2"})),
        call("receive_messages", "call_2", {}), output("call_2", json.dumps({"records": page["records"][:1]})),
    )
    assert script.decide("A", stale) is None


def test_a_selector_on_a_variable_no_earlier_matcher_captures_is_refused() -> None:
    with pytest.raises(ScenarioError, match="selects by variables no earlier `when` matcher captures: asked"):
        script_from_document({"rules": {"A": [{
            "id": "r",
            "when": [{"tool_output": {"tool": "receive_messages", "json": {"body": "records[request_id=${asked}].body"}}}],
            "emit": [{"message": {"text": "${body}"}}],
        }]}})


def test_call_ids_are_stable_and_differ_between_threads_and_steps() -> None:
    script = script_from_document(
        {"rules": {"A": [{"id": "r", "emit": [{"function_call": {"name": "f", "arguments": {}}}]}]}}
    )
    body = request_body(user("go"))

    first = script.decide("A", body).items[0]["call_id"]  # type: ignore[union-attr]
    assert script.decide("A", body).items[0]["call_id"] == first  # type: ignore[union-attr]
    assert script.decide("A", {**body, "prompt_cache_key": "thread-2"}).items[0]["call_id"] != first  # type: ignore[union-attr]
    longer = request_body(user("go"), user("again"))
    assert script.decide("A", longer).items[0]["call_id"] != first  # type: ignore[union-attr]


def test_read_input_resolves_tool_names_and_texts() -> None:
    items = read_input(
        request_body(
            {
                "type": "message",
                "role": "assistant",
                "phase": "commentary",
                "content": [{"type": "output_text", "text": "a"}],
            },
            call("reply", "c1", {"message": "héllo"}),
            output("c1", "done"),
            {"type": "reasoning", "summary": []},
        )
    )

    assert [(item.kind, item.text) for item in items] == [
        ("assistant_text", "a"),
        ("tool_call", '{"message": "héllo"}'),
        ("tool_output", "done"),
        ("other", ""),
    ]
    assert (items[2].tool, items[2].namespace) == ("reply", "mcp__peerwire")


# -- unexpected requests ------------------------------------------------------------


def test_unmatched_request_is_a_400_codex_will_not_retry_and_is_recorded(
    model: ScriptedModel, tmp_path: Path
) -> None:
    status, text = post(model, "/agents/A/v1/responses", request_body(user("nothing matches")))

    assert status == 400
    error = json.loads(text)["error"]
    assert error["code"] == UNEXPECTED_ERROR_CODE
    assert "no rule of agent 'A'" in error["message"]
    assert [exchange.outcome for exchange in model.unexpected()] == ["unexpected"]
    response = [record for record in log_records(model, tmp_path) if record["event"] == "response"]
    assert response[0]["outcome"] == "unexpected" and response[0]["rule"] is None


def test_unknown_agent_and_unknown_routes_are_unexpected(model: ScriptedModel) -> None:
    assert post(model, "/agents/Z/v1/responses", request_body(user("hello")))[0] == 400
    assert post(model, "/v1/responses", request_body(user("hello")))[0] == 404
    connection = http.client.HTTPConnection("127.0.0.1", model.port, timeout=WAIT)
    connection.request("GET", "/agents/A/v1/models")
    assert connection.getresponse().status == 404
    connection.close()

    assert [(e.method, e.path, e.outcome) for e in model.unexpected()] == [
        ("POST", "/agents/Z/v1/responses", "unexpected"),
        ("POST", "/v1/responses", "unexpected"),
        ("GET", "/agents/A/v1/models", "unexpected"),
    ]


# -- holds -------------------------------------------------------------------------


class StreamReader:
    """A raw HTTP request whose SSE answer is read event by event."""

    def __init__(self, model: ScriptedModel, body: dict[str, Any]):
        self.socket = socket.create_connection(("127.0.0.1", model.port), timeout=WAIT)
        payload = json.dumps(body).encode()
        self.socket.sendall(
            b"POST /agents/A/v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(payload)}\r\n\r\n".encode()
            + payload
        )
        self.file = self.socket.makefile("rb")
        while self.file.readline() not in (b"\r\n", b""):
            pass  # status line and headers

    def next_event(self) -> dict[str, Any]:
        lines = []
        while (line := self.file.readline()) not in (b"\n", b""):
            lines.append(line.decode().rstrip("\n"))
        return sse("\n".join(lines))[0]

    def rest(self) -> list[dict[str, Any]]:
        return sse(self.file.read().decode())

    def close(self) -> None:
        self.file.close()
        self.socket.close()


def test_hold_keeps_the_response_open_until_released(model: ScriptedModel) -> None:
    stream = StreamReader(model, request_body(user("take your time")))
    try:
        assert stream.next_event()["type"] == "response.created"
        held = model.wait_for_hold("slow", timeout=WAIT)
        assert held.outcome == "pending" and held.rule_id == "slow"
        assert model.holds()["slow"] == {"released": False, "waiting": 1, "arrivals": 1}

        assert model.release("slow") == 1

        rest = stream.rest()
    finally:
        stream.close()
    assert [event["type"] for event in rest] == ["response.output_item.done", "response.completed"]
    assert model.wait_for_exchange(lambda e: e.seq == held.seq, timeout=WAIT).outcome == "answered"
    # A released hold stays open: the next matching request is answered at once.
    assert [e["type"] for e in respond(model, request_body(user("take your time")))][
        -1
    ] == "response.completed"


def test_hold_is_released_over_http(model: ScriptedModel, tmp_path: Path) -> None:
    stream = StreamReader(model, request_body(user("take your time")))
    try:
        stream.next_event()
        model.wait_for_hold("slow", timeout=WAIT)

        status, text = post(model, "/control/release/slow", {})
        assert (status, json.loads(text)) == (200, {"hold": "slow", "released": True, "waiting": 1})
        assert stream.rest()[-1]["type"] == "response.completed"
    finally:
        stream.close()
    assert post(model, "/control/release/nope", {})[0] == 404
    assert "release" in [record["event"] for record in log_records(model, tmp_path)]


def test_client_hanging_up_on_a_held_response_does_not_hurt_the_server(model: ScriptedModel) -> None:
    stream = StreamReader(model, request_body(user("take your time")))
    stream.next_event()
    held = model.wait_for_hold("slow", timeout=WAIT)

    stream.close()

    assert model.wait_for_exchange(lambda e: e.seq == held.seq, timeout=WAIT).outcome == "disconnected"
    assert respond(model, request_body(user("hello")))[-1]["type"] == "response.completed"


def test_stop_aborts_a_held_response(tmp_path: Path) -> None:
    model = ScriptedModel(script_from_document(tomllib.loads(RULES))).start()
    stream = StreamReader(model, request_body(user("take your time")))
    try:
        stream.next_event()
        model.wait_for_hold("slow", timeout=WAIT)

        model.stop()

        assert stream.rest() == []  # closed without response.completed
    finally:
        stream.close()
    assert model.exchanges[0].outcome == "aborted"


# -- the log -------------------------------------------------------------------------


def test_log_records_request_and_response_without_credentials(model: ScriptedModel, tmp_path: Path) -> None:
    body = request_body(user("hello"))
    respond_headers = {
        "Authorization": "Bearer sk-secret-value",
        "api-key": "another-secret",
        "x-codex-turn-metadata": '{"turn_id": "t1"}',
    }
    status, _ = post(model, "/agents/A/v1/responses", body, respond_headers)
    assert status == 200

    records = log_records(model, tmp_path)

    text = (tmp_path / "model.jsonl").read_text(encoding="utf-8")
    assert "sk-secret-value" not in text and "another-secret" not in text
    request, response = records
    assert request["event"] == "request" and request["agent"] == "A" and request["body"] == body
    assert "authorization" not in request["headers"] and "api-key" not in request["headers"]
    assert request["headers"]["x-codex-turn-metadata"] == '{"turn_id": "t1"}'
    assert response["event"] == "response" and response["seq"] == request["seq"]
    assert response["rule"] == "greet" and response["outcome"] == "answered"
    assert response["items"][0]["content"][0]["text"] == "hi from A"
    assert response["at"] >= request["at"]


def test_the_log_stores_each_repeated_value_once_and_every_body_comes_back_whole(
        model: ScriptedModel, tmp_path: Path) -> None:
    instructions = "You are a coding agent. " * 400
    tools = [{"type": "function", "name": f"tool_{n}", "parameters": {"type": "object"}} for n in range(30)]
    history: list[dict[str, Any]] = []
    sent = []
    for n in range(6):
        history.append(user(f"hello {n} — “quoted” ✓"))
        body = {**request_body(*history), "instructions": instructions, "tools": tools}
        sent.append(json.loads(json.dumps(body)))
        respond(model, body)
    records = [r for r in log_records(model, tmp_path) if r["event"] == "request"]
    assert [r["body"] for r in records] == sent  # whole, byte-equal JSON values, in order
    assert [r["body_sha256"] for r in records] == [digest(body) for body in sent]

    raw = (tmp_path / "model.jsonl").read_text(encoding="utf-8")
    stored = [json.loads(line) for line in bodies_path(tmp_path / "model.jsonl").read_text().splitlines()]
    # one instructions, one tool list, six distinct input items: nothing stored twice
    assert len(stored) == 8 and len({entry["sha256"] for entry in stored}) == 8
    assert raw.count("You are a coding agent.") == 0 and raw.count("tool_29") == 0
    assert len(raw) + sum(len(json.dumps(e)) for e in stored) < sum(len(json.dumps(b)) for b in sent) / 3

    # a stored value altered afterwards no longer proves the request: the reader says which line
    altered = bodies_path(tmp_path / "model.jsonl")
    altered.write_text(altered.read_text().replace("hello 3", "hello 9"), encoding="utf-8")
    with pytest.raises(BodyError, match=r"model.jsonl:\d+: the expanded body hashes to"):
        list(read_log(tmp_path / "model.jsonl"))


# -- scenario files ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        (
            {"rules": {"A": [{"id": "r", "emit": [{"message": {"text": "x"}}], "bogus": 1}]}},
            "Additional properties",
        ),
        (
            {"rules": {"A": [{"id": "r", "emit": [{"message": {"text": "${nope}"}}]}]}},
            "not captured by `when`: nope",
        ),
        (
            {
                "rules": {
                    "A": [
                        {
                            "id": "r",
                            "when": [{"user_text": {"matches": "("}}],
                            "emit": [{"message": {"text": "x"}}],
                        }
                    ]
                }
            },
            "missing ), unterminated subpattern",
        ),
        (
            {
                "rules": {
                    "A": [
                        {"id": "r", "emit": [{"message": {"text": "a"}}]},
                        {"id": "r", "emit": [{"message": {"text": "b"}}]},
                    ]
                }
            },
            "duplicate rule id",
        ),
        (
            {
                "rules": {
                    "A": [
                        {
                            "id": "r",
                            "when": [{"tool_output": {"contains": "x"}}],
                            "emit": [{"message": {"text": "x"}}],
                        }
                    ]
                }
            },
            "'tool' is a required property",
        ),
        (
            {"rules": {"A": [{"id": "r", "emit": [{"message": {"text": "a", "phase": "final"}}]}]}},
            "is not one of",
        ),
    ],
)
def test_invalid_scenarios_are_refused_on_load(document: dict[str, Any], problem: str) -> None:
    with pytest.raises(ScenarioError) as refused:
        script_from_document(document, source="bad.toml")

    assert problem in str(refused.value)
    assert str(refused.value).startswith("bad.toml: ")


def test_invalid_toml_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text("[[rules.A]\n", encoding="utf-8")

    with pytest.raises(ScenarioError, match="invalid TOML"):
        load_script(path)


def test_smoke_scenario_validates_and_carries_the_fact_from_a_to_b() -> None:
    scenario = tomllib.loads((ROOT / "scenarios" / "smoke.toml").read_text(encoding="utf-8"))
    script = load_script(ROOT / "scenarios" / "smoke.toml")
    prompt_a, prompt_b = scenario["prompts"]["A"][0], scenario["prompts"]["B"][0]
    fact = prompt_a.split("exactly as written:\n", 1)[1]

    send = script.decide("A", request_body(user(prompt_a)))
    assert send is not None and send.rule_id == "send-fact"
    send_call = send.items[-1]
    assert (send_call["namespace"], send_call["name"]) == ("mcp__peerwire", "send_message")
    assert json.loads(send_call["arguments"]) == {"target": "B", "message": fact}
    assert "\n" in fact and not fact.isascii()

    receipt = {"interaction_id": "ix_" + "0" * 32, "kind": "information", "state": "admitted"}
    answered = script.decide(
        "A",
        request_body(
            user(prompt_a), *send.items, output(send_call["call_id"], "Output:\n" + json.dumps(receipt))
        ),
    )
    assert answered is not None and answered.items[0]["phase"] == "final_answer"

    receive = script.decide("B", request_body(user(prompt_b)))
    assert receive is not None and receive.items[0]["name"] == "receive_messages"
    records = {"records": [{"kind": "information", "sender": {"agent_id": "a", "name": "A"}, "body": fact}]}
    quoted = script.decide(
        "B",
        request_body(
            user(prompt_b), *receive.items, output(receive.items[0]["call_id"], json.dumps(records))
        ),
    )
    assert quoted is not None and quoted.items[0]["content"][0]["text"] == f"A wrote:\n{fact}"


# -- as a subprocess -------------------------------------------------------------------


def test_runs_as_a_subprocess_with_port_file_and_log(tmp_path: Path) -> None:
    scenario = tmp_path / "unit.toml"
    scenario.write_text(RULES, encoding="utf-8")
    port_file, log = tmp_path / "port", tmp_path / "log.jsonl"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness.model.server",
            "--scenario",
            str(scenario),
            "--port-file",
            str(port_file),
            "--log",
            str(log),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            announced = pool.submit(process.stdout.readline).result(timeout=WAIT)  # type: ignore[union-attr]
        port = int(port_file.read_text())
        assert announced.strip() == f"listening http://127.0.0.1:{port}"

        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
        connection.request("POST", "/agents/A/v1/responses", json.dumps(request_body(user("hello"))))
        assert sse(connection.getresponse().read().decode())[-1]["type"] == "response.completed"
        connection.close()
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=WAIT) == 0
        process.stdout.close()  # type: ignore[union-attr]
    assert [json.loads(line)["event"] for line in log.read_text().splitlines()] == ["request", "response"]


def test_the_report_command_shows_any_request_whole(model: ScriptedModel, tmp_path: Path) -> None:
    import io
    import shutil

    from harness.evidence import stored
    from harness.report.cli import main as report_main

    bodies = [request_body(user("hello first")), request_body(user("first"), user("hello second — ✓"))]
    for body in bodies:
        respond(model, {**body, "instructions": "be brief " * 50})
    model.stop()
    folder = tmp_path / "report" / "artifacts" / "smoke.attached"
    folder.mkdir(parents=True)
    for source in (tmp_path / "model.jsonl", bodies_path(tmp_path / "model.jsonl")):
        shutil.copy(source, folder / source.name.replace("model", "model-requests"))
    out = io.StringIO()
    assert report_main([str(tmp_path / "report"), "--request", "smoke.attached", "1"], out=out) == 0
    header, _, shown = out.getvalue().partition("\n")
    assert header.startswith("# smoke.attached model request 1 (model-requests.jsonl:3, agent A, sha256 ")
    assert json.loads(shown) == {**bodies[1], "instructions": "be brief " * 50}
    assert report_main([str(tmp_path / "report"), "--request", "smoke.attached", "7"], out=io.StringIO()) == 1
    # As a written report stores them, compressed: the same request, the same bytes.
    for name in ("model-requests.jsonl", bodies_path(folder / "model-requests.jsonl").name):
        stored.compress(folder / name)
    again = io.StringIO()
    assert report_main([str(tmp_path / "report"), "--request", "smoke.attached", "1"], out=again) == 0
    assert again.getvalue() == out.getvalue()
