"""The numbers the core enforces in code agree with what ``contracts/`` states (see :mod:`peerwire.limits`).

Defaults the app applies are the schemas' ``default``s; the body bound is the one
the schema's description promises; the collaboration profile's bounds are its
schemas' patterns and maxima; a body at its bound, escaped as badly as JSON can,
still fits one control-socket line.
"""

from __future__ import annotations

import json
import re

from peerwire import collab, contract, limits
from peerwire.profiles import COLLAB


def inputs(tool: str, profile: str = "messaging") -> dict:
    return contract.tool(tool, profile)["inputSchema"]["properties"]


def test_the_defaults_the_app_applies_are_the_schemas_defaults():
    assert inputs("receive_messages")["limit"]["default"] == limits.DEFAULT_RECEIVE_LIMIT
    assert inputs("receive_messages")["timeout_ms"]["default"] == limits.DEFAULT_RECEIVE_TIMEOUT_MS
    assert inputs("wait_agent")["timeout_ms"]["default"] == limits.DEFAULT_WAIT_TIMEOUT_MS
    # a default the schema itself would refuse is no default
    limit = inputs("receive_messages")["limit"]
    assert limit["minimum"] <= limits.DEFAULT_RECEIVE_LIMIT <= limit["maximum"]
    assert limits.DEFAULT_WAIT_TIMEOUT_MS <= contract.definitions()["timeout_ms"]["maximum"]
    assert limits.MAX_WAIT_MS == contract.definitions()["timeout_ms"]["maximum"]
    assert limits.MAX_WAIT_MS / 1000 + limits.ANSWER_GRACE_S < limits.CODEX_TOOL_TIMEOUT_S


def test_the_body_bound_is_the_one_the_schema_promises():
    description = contract.definitions()["body"]["description"]
    assert re.search(r"\b(\d+) UTF-8 bytes", description).group(1) == str(limits.MAX_BODY_BYTES)


def test_the_collaboration_bounds_are_its_schemas():
    assert inputs("wait_agent", COLLAB)["timeout_ms"]["maximum"] == collab.WAIT_MAX_MS
    assert inputs("spawn_agent", COLLAB)["task_name"]["pattern"] == collab.TASK_NAME.pattern
    segment = collab.TASK_NAME.pattern.strip("^$")
    assert inputs("send_message", COLLAB)["target"]["pattern"] == f"^{collab.ROOT}(/{segment}){{0,{collab.MAX_DEPTH}}}$"


def test_a_page_of_records_at_the_body_bound_fits_one_answer_line():
    worst = "\x01" * limits.MAX_BODY_BYTES
    record = {"record_id": "ix_" + "0" * 32, "kind": "task", "body": worst, "sender": {"name": "s" * 64}}
    page = {"id": 1, "ok": True, "result": {"records": [record] * 100, "cursor": "c" * 200}}
    assert len(json.dumps(page, ensure_ascii=False).encode("utf-8")) + 1 <= limits.MAX_ANSWER_LINE_BYTES


def test_a_body_at_its_bound_fits_one_control_line_however_it_is_escaped():
    # Control characters are what JSON escapes longest (\u00XX: six bytes for one).
    worst = "\x01" * limits.MAX_BODY_BYTES
    request = {"id": 1, "op": "followup_task", "token": "t" * 64,
               "args": {"target": "x" * 256, "message": worst}, "meta": {"via": "mcp", "call_id": "c" * 64}}
    assert len(json.dumps(request, ensure_ascii=False).encode("utf-8")) + 1 <= limits.MAX_LINE_BYTES
