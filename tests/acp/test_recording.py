"""The fixtures' normalisers: one mechanism, each protocol's ids (the app-server's, ACP's)."""

from __future__ import annotations

from harness.acceptance import record
from tests.acp.recording import Normaliser

UUID = "0b8f4c1e-2d3a-4b5c-8d9e-0f1a2b3c4d5e"


def test_acp_ids_times_and_paths_become_placeholders_the_same_way_throughout():
    normaliser = Normaliser({"workspace": "/runs/r1/agents/B/workspace", "home": "/runs/r1"})
    out = normaliser.value({"sessionId": "ses_Ab12", "cwd": "/runs/r1/agents/B/workspace/src", "createdAt": 1733,
                            "text": "ses_Ab12 wrote msg_9Z at 2026-12-02T01:02:03.5Z in /runs/r1/x",
                            "cursor": "c-1", "nested": [{"messageId": "msg_9Z", "id": UUID}]})
    assert out == {"sessionId": "<session:1>", "cwd": "<path:workspace>/src", "createdAt": 0,
                   "text": "<session:1> wrote <message:1> at <time> in <path:home>/x",
                   "cursor": "c-1", "nested": [{"messageId": "<message:1>", "id": "<uuid:1>"}]}


def test_the_app_server_normaliser_keeps_its_own_ids_and_machine_values():
    normaliser = record.Normaliser({"workspace": "/w"})
    out = normaliser.value({"threadId": UUID, "again": UUID, "startedAt": 5, "completedAt": "2026-12-02",
                            "serverName": "build-host-7", "cwd": "/w"})
    assert out == {"threadId": "<id:1>", "again": "<id:1>", "startedAt": 0, "completedAt": "<time>",
                   "serverName": "<host>", "cwd": "<path:workspace>"}
