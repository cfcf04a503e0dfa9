"""The surface diff judges each kind of protocol change the way peerwire is affected by it.

Each case edits a copy of the pinned Codex's generated schema the way a new
release could change it, then compares it with the original.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.codex.protocol import ProtocolSchema
from harness.codex.surface_diff import MethodDrift, diff_surface

pytestmark = pytest.mark.codex


def edited(pinned: ProtocolSchema, tmp_path: Path, file: str, change: Callable[[dict[str, Any]], None]) -> ProtocolSchema:
    copy = tmp_path / "edited"
    shutil.copytree(pinned.root, copy)
    path = copy / file
    document = json.loads(path.read_text(encoding="utf-8"))
    change(document)
    path.write_text(json.dumps(document), encoding="utf-8")
    return ProtocolSchema(copy, "9.9.9")


def drift_of(drifts: list[MethodDrift], method: str) -> MethodDrift:
    return next(d for d in drifts if d.method == method)


def definitions(document: dict[str, Any]) -> dict[str, Any]:
    return document["definitions"]


def test_the_same_schema_is_unchanged_everywhere(pinned_protocol: ProtocolSchema) -> None:
    assert {d.verdict for d in diff_surface(pinned_protocol, pinned_protocol)} == {"unchanged"}


def test_a_field_peerwire_sends_that_is_gone_is_breaking(pinned_protocol, tmp_path: Path) -> None:
    other = edited(pinned_protocol, tmp_path, "ClientRequest.json",
                   lambda d: definitions(d)["TurnSteerParams"]["properties"].pop("expectedTurnId"))
    drift = drift_of(diff_surface(pinned_protocol, other), "turn/steer")
    assert drift.verdict == "breaking" and "params.expectedTurnId is gone (peerwire sends it)" in drift.changes


def test_a_gone_optional_field_says_the_adapter_copes(pinned_protocol, tmp_path: Path) -> None:
    other = edited(pinned_protocol, tmp_path, "ClientRequest.json",
                   lambda d: definitions(d)["TurnStartParams"]["properties"].pop("parentTurnId"))
    drift = drift_of(diff_surface(pinned_protocol, other), "turn/start")
    assert drift.changes == ["params.parentTurnId is gone (peerwire sends it); the adapter leaves it out below 0.162.0"]


def test_a_newly_required_field_peerwire_does_not_send_is_breaking(pinned_protocol, tmp_path: Path) -> None:
    def require_summary(document):
        definitions(document)["TurnStartParams"]["required"].append("summary")

    drift = drift_of(diff_surface(pinned_protocol, edited(pinned_protocol, tmp_path, "ClientRequest.json",
                                                          require_summary)), "turn/start")
    assert drift.changes == ["params.summary is now required and peerwire does not send it"]


def test_enum_values_peerwire_branches_on_must_stay_new_ones_are_additive(pinned_protocol, tmp_path: Path) -> None:
    def statuses(document):
        definitions(document)["TurnStatus"]["enum"] = ["completed", "interrupted", "inProgress", "cancelled"]

    drift = drift_of(diff_surface(pinned_protocol, edited(pinned_protocol, tmp_path, "ServerNotification.json",
                                                          statuses)), "turn/completed")
    assert drift.verdict == "breaking"
    assert "params.turn.status no longer has 'failed'" in drift.changes
    assert "params.turn.status gains 'cancelled'" in drift.changes


def test_a_read_field_that_may_now_be_null_is_breaking(pinned_protocol, tmp_path: Path) -> None:
    def nullable_id(document):
        definitions(document)["Turn"]["properties"]["id"] = {"type": ["string", "null"]}

    drift = drift_of(diff_surface(pinned_protocol, edited(pinned_protocol, tmp_path, "ServerNotification.json",
                                                          nullable_id)), "turn/started")
    assert drift.changes == ["params.turn.id may now be null"]


def test_a_change_peerwire_does_not_use_is_additive(pinned_protocol, tmp_path: Path) -> None:
    def new_param(document):
        definitions(document)["TurnInterruptParams"]["properties"]["reason"] = {"type": "string"}

    drifts = diff_surface(pinned_protocol, edited(pinned_protocol, tmp_path, "ClientRequest.json", new_param))
    assert drift_of(drifts, "turn/interrupt").changes == ["params: new reason (unused by peerwire)"]
    assert drift_of(drifts, "turn/interrupt").verdict == "additive"
    assert {d.verdict for d in drifts if d.method != "turn/interrupt"} == {"unchanged"}


def test_a_method_that_is_gone_is_breaking_a_server_request_that_is_gone_is_not(pinned_protocol,
                                                                             tmp_path: Path) -> None:
    def drop(method: str):
        def change(document):
            document["oneOf"] = [b for b in document["oneOf"] if b["properties"]["method"].get("enum") != [method]]
        return change

    requests = edited(pinned_protocol, tmp_path / "a", "ClientRequest.json", drop("thread/inject_items"))
    assert drift_of(diff_surface(pinned_protocol, requests), "thread/inject_items").changes == [
        "9.9.9 has no request thread/inject_items"]
    servers = edited(pinned_protocol, tmp_path / "b", "ServerRequest.json", drop("item/tool/call"))
    gone = drift_of(diff_surface(pinned_protocol, servers), "item/tool/call")
    assert gone.verdict == "additive" and "never sends it" in gone.changes[0]
