"""The recorded fixtures still speak the pinned Codex's protocol.

Every request the adapter sent, every notification and every answer in
``fixtures/appserver/`` validates against the schema that the pinned Codex
generates (``codex app-server generate-json-schema``). When Codex changes its
protocol this fails, and ``python runner.py record`` refreshes the fixtures.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from jsonschema import Draft7Validator

from harness.codex.install import locate_codex
from harness.codex.recorded.record import FIXTURE_DIR, load

pytestmark = pytest.mark.codex


@pytest.fixture(scope="module")
def protocol(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("protocol")
    codex = locate_codex()
    subprocess.run([str(codex.executable), "app-server", "generate-json-schema", "--out", str(out)],
                   check=True, capture_output=True, timeout=120, env=codex.child_env())
    return out


def _validator(path: Path) -> Draft7Validator:
    return Draft7Validator(json.loads(path.read_text()))


def _pascal(method: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in method.replace("_", "/").split("/"))


@pytest.mark.parametrize("fixture", sorted(FIXTURE_DIR.glob("*.jsonl")), ids=lambda p: p.stem)
def test_fixture_validates_against_the_pinned_protocol(fixture, protocol):
    requests, notifications = _validator(protocol / "ClientRequest.json"), _validator(protocol / "ServerNotification.json")
    methods: dict[int, str] = {}
    checked = 0
    for line in load(fixture):
        if line["dir"] == "session":
            methods.clear()
            continue
        message = line["message"]
        if line["dir"] == "sent" and "id" in message:
            methods[message["id"]] = message["method"]
            errors = [e.message for e in requests.iter_errors(message)]
            assert not errors, f"{fixture.name}: {message['method']} request: {errors[:3]}"
            checked += 1
        elif line["dir"] == "received" and "method" in message and "id" not in message:
            body = {k: v for k, v in message.items() if k in ("method", "params")}
            errors = [e.message for e in notifications.iter_errors(body)]
            assert not errors, f"{fixture.name}: {message['method']} notification: {errors[:3]}"
            checked += 1
        elif line["dir"] == "received" and "result" in message:
            schema = protocol / "v2" / f"{_pascal(methods[message['id']])}Response.json"
            if schema.exists():
                errors = [e.message for e in _validator(schema).iter_errors(message["result"])]
                assert not errors, f"{fixture.name}: {methods[message['id']]} answer: {errors[:3]}"
                checked += 1
    assert checked >= 10
