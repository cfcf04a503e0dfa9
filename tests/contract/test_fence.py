"""Silence judged by a fence: a real server process that answers late, out of order, or not at all.

The server below answers ``ping`` after ``--ping-delay`` seconds, ``late``
after ``--late-delay`` seconds (on a timer, so it keeps reading: the ping sent
after ``late`` is answered first), and never answers ``drop``. The suite's
wait (:func:`harness.contract.wire.settle`, behind ``answer_to``) must pass the
first two and call the third silent in about a second, not after
``--call-timeout``; and an error without an id is a valid answer exactly where
the negotiated revision allows it.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from harness.contract.stdio import Line, StdioServer
from harness.contract.wire import answer_to, settle

LATE_SERVER = r'''
import json, sys, threading
ping_delay, late_delay = float(sys.argv[1]), float(sys.argv[2])
lock = threading.Lock()
def answer(msg_id):
    with lock:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": {}}) + "\n")
        sys.stdout.flush()
for line in sys.stdin:
    message = json.loads(line)
    delay = {"ping": ping_delay, "late": late_delay}.get(message["method"])
    if delay is not None:
        threading.Timer(delay, answer, (message["id"],)).start()
'''


@pytest.fixture
def late_server(tmp_path: Path):
    started: list[StdioServer] = []

    def start(ping_delay: float, late_delay: float) -> StdioServer:
        script = tmp_path / "late_server.py"
        script.write_text(LATE_SERVER)
        server = StdioServer([sys.executable, str(script), str(ping_delay), str(late_delay)], {},
                             stderr=tmp_path / "stderr.log")
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


def _request(method: str, msg_id: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method}).encode()


def test_an_answer_that_overtakes_its_fence_passes(late_server):
    server = late_server(ping_delay=0, late_delay=0.25)
    response = answer_to(server, _request("late", "l1"), ("l1",), "an answer")
    assert response["id"] == "l1"
    assert server.responses_to("l1") and server.lines[0].message["id"].startswith("fence-"), \
        "the fence was answered first: the line was judged by the grace after it, not by a long wait"


def test_a_slow_fence_lengthens_the_grace(late_server):
    """The fence takes 0.4 s, the line 1.2 s: past a flat 0.5 s grace, within five round trips of the fence."""
    server = late_server(ping_delay=0.4, late_delay=1.2)
    response = answer_to(server, _request("late", "l2"), ("l2",), "an answer")
    assert response["id"] == "l2"


def test_a_dropped_line_is_called_silent_at_once_with_the_fence_as_evidence(late_server):
    server = late_server(ping_delay=0, late_delay=0)
    started = time.monotonic()
    with pytest.raises(AssertionError) as failure:
        answer_to(server, _request("drop", "d1"), ("d1",), "an answer")
    elapsed = time.monotonic() - started
    message = str(failure.value)
    assert "the server's transport may have dropped the line" in message and "fence ping" in message, message
    assert elapsed < 10, f"called silent after {elapsed:.1f} s: the wait was not judged by the fence"


def test_a_server_that_stops_answering_is_told_apart(late_server, monkeypatch):
    from harness.contract import limits as limits_module
    monkeypatch.setattr(limits_module, "_current", limits_module.Limits(call_s=1.0))
    server = late_server(ping_delay=60, late_delay=60)
    settled = settle(server, [server.expect_response("x")])
    assert not settled.fenced and settled.pending
    assert "the server stopped answering" in settled.silence, settled.silence


@pytest.mark.parametrize(("revision", "valid"), [("2025-11-25", True), (None, True), ("2025-06-18", False),
                                                 ("2024-11-05", False)])
def test_an_error_without_id_is_an_mcp_message_from_2025_11_25_on(revision, valid):
    error = Line(raw=b"", message={"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}}, at=0)
    assert error.is_json_rpc
    assert error.valid_under(revision) is valid
    null = Line(raw=b"", message={"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "x"}}, at=0)
    assert null.valid_under(revision)
    result = Line(raw=b"", message={"jsonrpc": "2.0", "result": {}}, at=0)
    assert not result.is_json_rpc, "a result always carries its request's id"
