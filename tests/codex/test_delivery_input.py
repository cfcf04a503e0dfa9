"""What a task's turn/start and turn/steer carry, by the Codex version's capabilities.

The pinned Codex has no ``additionalContext`` on ``turn/steer`` (its generated
schema defines ``AdditionalContextEntry`` but no request refers to it), so
capability ``steer_context`` is unsupported and the routing metadata travels as
a separate input part. The live test below runs against the pinned Codex and
is skipped, naming the capability, until a release offers it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.lab.reference import ReferenceLab
from harness.lab.recorded import routes
from harness.contract.manifest import requirement
from peerwire import envelope
from peerwire.codex.adapter import TASK_CONTEXT_NAME, steer_request, task_input
from peerwire.codex.capabilities import Assessment, Capability, Verdict, evaluate

RECORD = {"kind": "task", "request_id": "rq_" + "0" * 32, "sender": {"name": "A", "agent_id": "a-1"},
          "body": "  literal\npeer text ✓  \n"}


def with_steer_context(base: Assessment) -> Assessment:
    verdicts = {**base.verdicts, Capability.STEER_CONTEXT: Verdict(Capability.STEER_CONTEXT, True, "offered")}
    return Assessment(base.version, verdicts, base.fields)


@requirement("delivery:steer:additional-context")
def test_a_steer_sends_routing_in_additional_context_only_where_the_version_takes_it() -> None:
    head, body = envelope.head(RECORD), RECORD["body"]
    pinned = evaluate("0.171.0")
    assert not pinned.allows(Capability.STEER_CONTEXT)
    assert steer_request(head, body, pinned) == (task_input(head, body), {})
    steer_input, extra = steer_request(head, body, with_steer_context(pinned))
    assert steer_input == [{"type": "text", "text": body}]  # the peer's text, byte for byte, alone
    assert extra == {"additionalContext": [{"kind": "application", "name": TASK_CONTEXT_NAME, "value": head}]}
    assert envelope.parse(extra["additionalContext"][0]["value"] + "\n" + body)["payload"] == body


def test_the_task_item_and_the_body_join_into_the_envelope() -> None:
    head = envelope.head(RECORD)
    parts = [p["text"] for p in task_input(head, RECORD["body"])]
    assert parts[1] == RECORD["body"] and RECORD["body"] not in parts[0]
    assert "\n".join(parts) == envelope.render(RECORD)
    assert envelope.parse("\n".join(parts))["headers"]["Request"] == RECORD["request_id"]


def test_the_pinned_schema_defines_additional_context_but_no_request_takes_it(pinned_protocol) -> None:
    """The evidence behind ``steer_context`` being unsupported on the pinned Codex."""
    refs = []

    def walk(node: object, path: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "$ref" and isinstance(value, str) and value.endswith("/AdditionalContextEntry"):
                    refs.append(path)
                walk(value, f"{path}/{key}")
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, f"{path}/{index}")

    for name in ("TurnStartParams", "TurnSteerParams"):
        schema = json.loads((Path(pinned_protocol.root) / "v2" / f"{name}.json").read_text())
        assert "AdditionalContextEntry" in schema.get("definitions", {})
        assert "additionalContext" not in schema["properties"]
        walk(schema, name)
    assert refs == []


@pytest.mark.codex
def test_a_live_steer_keeps_routing_in_additional_context(tmp_path: Path) -> None:
    with ReferenceLab(tmp_path, routes.model_script(), agents=("A", "B"), attach=False) as lab:
        owner = lab.attach("B")
        if Capability.STEER_CONTEXT.value not in owner["capabilities"]:
            pytest.skip(f"Codex {owner['codex_version']} lacks capability steer_context "
                        "(turn/steer additionalContext)")
        out = routes.steer(lab)
        lines = [json.loads(line) for line in lab.transcript("B").read_text().splitlines()]
        (steer,) = [entry["message"] for entry in lines if entry["dir"] == "sent" and entry["message"].get("method") == "turn/steer"]
        assert steer["params"]["input"] == [{"type": "text", "text": "[steer] second task"}]
        (context,) = steer["params"]["additionalContext"]
        assert envelope.parse(context["value"] + "\n")["headers"]["Request"] == out["request_ids"][1]
