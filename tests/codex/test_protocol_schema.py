"""Reading a generated app-server schema, and validating fixtures with it (the pinned Codex's schema)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.codex.protocol import ProtocolSchema, ProtocolSchemaError, check_fixture, shape_of
from harness.codex.fixtures import FIXTURE_DIR, load
from peerwire.codex.capabilities import Fact

pytestmark = pytest.mark.codex


def test_methods_are_read_per_family(pinned_protocol: ProtocolSchema) -> None:
    assert {"turn/start", "turn/steer", "thread/inject_items", "initialize"} <= pinned_protocol.methods("request")
    assert {"turn/completed", "item/completed"} <= pinned_protocol.methods("notification")
    assert "item/commandExecution/requestApproval" in pinned_protocol.methods("server_request")
    assert pinned_protocol.kind_of("turn/started") == "notification"
    assert pinned_protocol.kind_of("no/such/method") is None


def test_paths_go_through_arrays_unions_and_nullable_references(pinned_protocol: ProtocolSchema) -> None:
    # thread/read answers thread.turns[].items[], a union of item kinds
    assert pinned_protocol.lookup("request", "thread/read", "result", "thread.turns.items.type")
    # item.phase exists only in the agentMessage variant, and is nullable there
    phase = shape_of(pinned_protocol.lookup("notification", "item/completed", "params", "item.phase"))
    assert {"final_answer", "commentary"} <= (phase.values or set()) and "null" in phase.types
    status = shape_of(pinned_protocol.lookup("notification", "turn/completed", "params", "turn.status"))
    assert status.values == {"completed", "interrupted", "failed", "inProgress"}
    assert shape_of(pinned_protocol.lookup("request", "turn/start", "result", "turn.id")).types == {"string"}
    assert not pinned_protocol.lookup("request", "turn/start", "params", "noSuchField")
    assert not pinned_protocol.lookup("request", "turn/start", "params", "threadId.deeper")


def test_requests_are_answered_by_the_response_named_after_their_params(pinned_protocol: ProtocolSchema) -> None:
    answer = pinned_protocol.result("request", "turn/start")
    assert answer is not None and answer.schema["title"] == "TurnStartResponse"
    assert pinned_protocol.result("request", "initialize") is not None
    assert pinned_protocol.required("request", "turn/steer") == {"threadId", "expectedTurnId", "input"}


def test_facts_are_offered_only_when_method_and_field_exist(pinned_protocol: ProtocolSchema) -> None:
    assert pinned_protocol.offers(Fact("turn/steer", "expectedTurnId"))
    assert pinned_protocol.offers(Fact("item/completed", "item.phase"))
    assert not pinned_protocol.offers(Fact("turn/steer", "additionalContext"))
    assert not pinned_protocol.offers(Fact("turn/teleport"))


def test_a_folder_without_a_schema_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ProtocolSchemaError, match="ClientRequest.json"):
        ProtocolSchema(tmp_path)


def rewrite(fixture: Path, target: Path, change) -> Path:
    lines = load(fixture)
    for line in lines:
        change(line)
    target.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return target


def test_a_fixture_that_breaks_the_protocol_fails_naming_the_message(pinned_protocol, tmp_path: Path) -> None:
    def drop_turn_id(line):
        message = line.get("message") or {}
        if message.get("method") == "turn/completed":
            del message["params"]["turn"]["id"]

    broken = rewrite(FIXTURE_DIR / "idle_start.jsonl", tmp_path / "idle_start.jsonl", drop_turn_id)
    check = check_fixture(broken, pinned_protocol)
    assert not check.ok
    assert any(error.startswith("turn/completed notification at turn") and "'id'" in error for error in check.errors)


def test_a_request_the_schema_lacks_is_an_error_an_unknown_notification_only_when_strict(pinned_protocol,
                                                                                         tmp_path: Path) -> None:
    def rename(line):
        message = line.get("message") or {}
        if message.get("method") == "thread/inject_items":
            message["method"] = "thread/inject_things"
        if message.get("method") == "thread/status/changed":
            message["method"] = "thread/mood/changed"

    changed = rewrite(FIXTURE_DIR / "inject.jsonl", tmp_path / "inject.jsonl", rename)
    lenient = check_fixture(changed, pinned_protocol, strict=False)
    assert lenient.errors == ["thread/inject_things request: Codex 0.171.0 has no such method"]
    assert lenient.not_offered == ["thread/mood/changed"]
    strict = check_fixture(changed, pinned_protocol)
    assert "thread/mood/changed notification: not in the schema" in strict.errors


def test_a_wrong_answer_is_found(pinned_protocol, tmp_path: Path) -> None:
    def bad_answer(line):
        result = (line.get("message") or {}).get("result")
        if isinstance(result, dict) and "turn" in result and line["dir"] == "received":
            result["turn"]["status"] = "pondering"

    changed = rewrite(FIXTURE_DIR / "idle_start.jsonl", tmp_path / "idle_start.jsonl", bad_answer)
    assert any(error.startswith("turn/start answer at turn/status") for error in
               check_fixture(changed, pinned_protocol).errors)
