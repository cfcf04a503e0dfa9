"""The control socket under pressure: abandoned waits, bounded waiters and connections, quiet logs.

The app runs as a real subprocess whose file limit is set in the child with
``resource.setrlimit``; clients are raw Unix sockets speaking control lines.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import resource
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from harness.process.app import AppProcess
from peerwire.control import ControlClient, encode
from peerwire.control_server import RepeatedFailures, connection_limit, fd_reserve
from peerwire.home import HOME_ENV, SESSION_ENV, Home
from peerwire.limits import (CONTROL_FD_RESERVE, CONTROL_FD_RESERVE_MIN, MAX_CONNECTIONS_PER_CALLER,
                             MAX_CONTROL_CONNECTIONS, MAX_WAITERS_PER_CALLER)

from .conftest import wait_until
from tests.patience import WAIT_S

ANSWER_S = WAIT_S


def _limited_app(tmp_path: Path, nofile: int) -> AppProcess:
    """``peerwire app`` whose soft and hard file limits are ``nofile`` (set in the child)."""

    def spawn(argv, env, stderr):
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr, env=env,
                                start_new_session=True,
                                preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile)))

    return AppProcess.start(Home(tmp_path / "home"), spawn=spawn)


def _register(home: Home, name: str) -> str:
    return ControlClient(home).call("register_agent", {"name": name})["session_token"]


def _connect(home: Home) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with home.socket_address() as address:
        sock.connect(address)  # blocking: a full accept queue makes it wait, not fail
    sock.settimeout(ANSWER_S)
    return sock


def _wait_request(token: str, request_id: int = 1, timeout_ms: int = 60_000) -> bytes:
    return encode({"id": request_id, "op": "tool", "profile": "messaging", "tool": "wait_agent",
                   "args": {"timeout_ms": timeout_ms}, "meta": {}, "token": token})


def _read_answer(sock: socket.socket) -> dict:
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(65536)
        assert chunk, "the app closed the connection without an answer"
        data += chunk
    return json.loads(data.splitlines()[0])


def _open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _waiting(home: Home, key: str = "waiting") -> int:
    """Waits blocked right now (``waiting``), or subscriptions held at all (``subscribed``)."""
    return sum(ControlClient(home).call("status")[key].values())


@pytest.mark.slow
def test_a_thousand_abandoned_waits_release_their_waiters_and_descriptors(tmp_path):
    app = _limited_app(tmp_path, 1024)
    try:
        home = app.home
        tokens = [_register(home, f"waiter-{i}") for i in range(5)]
        sender = _register(home, "sender")
        baseline = _open_fds(app.process.pid)
        abandoned = 0
        for _ in range(5):
            held = []
            for i in range(200):
                sock = _connect(home)
                sock.sendall(_wait_request(tokens[i % len(tokens)]))
                held.append(sock)
            wait_until(lambda: _waiting(home) == 200, ANSWER_S, "200 waits to be pending")
            for sock in held:
                sock.close()  # the client is gone, with its wait pending for another minute
            abandoned += len(held)
            wait_until(lambda: _waiting(home, "subscribed") == 0, ANSWER_S, "the abandoned waiters to be released")
            wait_until(lambda: _open_fds(app.process.pid) <= baseline + 2, ANSWER_S,
                       "the abandoned connections' descriptors to be closed")
        assert abandoned == 1000
        receipt = ControlClient(home, sender).call("send_message", {"target": "waiter-0", "message": "still here"})
        assert receipt["state"] == "admitted"
        app.terminate()
        log = app.log.read_text("utf-8", errors="replace")
        assert "Too many open files" not in log and log.count("\n") < 50, log[-3000:]
    finally:
        app.terminate()


def test_waits_per_caller_are_bounded_with_a_clear_code(tmp_path):
    app = _limited_app(tmp_path, 1024)
    try:
        token = _register(app.home, "busy")
        with _connect(app.home) as sock:
            sock.sendall(b"".join(_wait_request(token, i) for i in range(1, MAX_WAITERS_PER_CALLER + 1)))
            wait_until(lambda: _waiting(app.home) == MAX_WAITERS_PER_CALLER, ANSWER_S, "every wait to be pending")
            sock.sendall(_wait_request(token, 999))
            refused = _read_answer(sock)
            assert refused["id"] == 999 and refused["ok"] is False
            assert refused["error"]["code"] == "too_many_waiters"
            assert refused["error"]["details"] == {"limit": MAX_WAITERS_PER_CALLER}
            sock.sendall(encode({"op": "cancel", "target": 1}))  # one wait let go makes room for another
            assert _read_answer(sock) == {"id": 1, "cancelled": True}
            sock.sendall(_wait_request(token, 1000, timeout_ms=0))
            assert _read_answer(sock)["ok"] is True
    finally:
        app.terminate()


def test_connections_are_bounded_by_the_file_limit(tmp_path):
    nofile = 160
    app = _limited_app(tmp_path, nofile)
    held: list[socket.socket] = []
    try:
        bound = connection_limit(soft=nofile)
        status = encode({"id": 1, "op": "status", "args": {}, "operator": app.home.operator_credential()})
        for _ in range(bound):
            sock = _connect(app.home)
            sock.sendall(status)
            assert _read_answer(sock)["ok"] is True  # served, and held open
            held.append(sock)
        with _connect(app.home) as extra:
            refused = _read_answer(extra)
        assert refused["error"]["code"] == "too_many_connections"
        assert refused["error"]["details"] == {"limit": bound, "retriable": True}
        held.pop().close()
        wait_until(lambda: _serves(app.home), ANSWER_S, "a connection to be served again after one closed")
        assert app.process.poll() is None
    finally:
        for sock in held:
            sock.close()
        app.terminate()


def test_connections_per_caller_are_bounded_with_a_clear_code(tmp_path):
    app = _limited_app(tmp_path, 1024)
    held: list[socket.socket] = []
    try:
        greedy, other = _register(app.home, "greedy"), _register(app.home, "other")
        for i in range(MAX_CONNECTIONS_PER_CALLER):
            sock = _connect(app.home)
            sock.sendall(_wait_request(greedy, i, timeout_ms=0))
            assert _read_answer(sock)["ok"] is True  # served, and held open
            held.append(sock)
        with _connect(app.home) as extra:
            extra.sendall(_wait_request(greedy, 7, timeout_ms=0) + _wait_request(greedy, 8, timeout_ms=0))
            refused = _read_answer(extra)
            assert refused["id"] == 7 and refused["ok"] is False
            assert refused["error"]["code"] == "too_many_connections"
            assert refused["error"]["details"] == {"limit": MAX_CONNECTIONS_PER_CALLER, "per": "caller",
                                                   "retriable": True}
            assert extra.recv(65536) == b"", "a refused connection takes no more requests"
        with _connect(app.home) as fine:  # another caller is not held back by the greedy one
            fine.sendall(_wait_request(other, 1, timeout_ms=0))
            assert _read_answer(fine)["ok"] is True
        held.pop().close()  # one closed makes room for the same caller again

        def served_again() -> bool:
            with _connect(app.home) as again:
                again.sendall(_wait_request(greedy, 9, timeout_ms=0))
                return _read_answer(again)["ok"] is True

        wait_until(served_again, ANSWER_S, "the caller to be served again after one of its connections closed")
    finally:
        for sock in held:
            sock.close()
        app.terminate()


def _serves(home: Home) -> bool:
    try:
        return ControlClient(home).call("status")["ok"] is True
    except Exception:
        return False


def test_the_connection_bound_leaves_descriptors_for_the_app():
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert connection_limit(10) == min(10, soft - fd_reserve(soft))
    for limit in (16, 32, 64, 128, 256, 1024, 4096, 65536):
        reserve = limit - connection_limit(10 ** 9, soft=limit)
        assert CONTROL_FD_RESERVE_MIN <= reserve or connection_limit(10 ** 9, soft=limit) == 1, limit
        assert reserve <= max(CONTROL_FD_RESERVE, limit - 1), limit
    # The reserve scales with the limit instead of eating it: a low limit leaves most of it to connections.
    assert connection_limit(soft=64) >= 32
    assert connection_limit(soft=1024) == MAX_CONTROL_CONNECTIONS


SERVE = [sys.executable, "-m", "peerwire", "mcp", "serve"]


def _mcp_call(session: subprocess.Popen, call_id: int, tool: str, arguments: dict) -> dict:
    assert session.stdin is not None and session.stdout is not None
    session.stdin.write(json.dumps({"jsonrpc": "2.0", "id": call_id, "method": "tools/call",
                                    "params": {"name": tool, "arguments": arguments}}).encode() + b"\n")
    session.stdin.flush()
    answer = json.loads(session.stdout.readline())  # bounded by the test's timeout
    assert answer["id"] == call_id, answer
    return answer["result"]


def test_a_low_file_limit_serves_many_sessions_and_tells_the_next_one_why(tmp_path):
    nofile = 64
    app = _limited_app(tmp_path, nofile)
    held: list[socket.socket] = []
    session = None
    try:
        token = _register(app.home, "a")
        _register(app.home, "b")
        status = encode({"id": 1, "op": "status", "args": {}, "operator": app.home.operator_credential()})
        while True:
            sock = _connect(app.home)
            sock.sendall(status)
            answer = _read_answer(sock)
            if not answer.get("ok"):
                sock.close()
                break
            held.append(sock)
            assert len(held) <= nofile, "the app must bound its connections below its file limit"
        assert answer["error"]["code"] == "too_many_connections", answer
        assert len(held) >= 32, f"ulimit -n {nofile} served only {len(held)} connections"
        # A session (a real mcp serve) over the bound is told so, retriably, with the limit: not app_unavailable.
        env = {**{k: v for k, v in os.environ.items() if k not in (HOME_ENV, SESSION_ENV)},
               HOME_ENV: str(app.home.path), SESSION_ENV: token}
        session = subprocess.Popen(SERVE, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        call_ids = itertools.count(1)
        refused = _mcp_call(session, next(call_ids), "send_message", {"target": "b", "message": "over the bound"})
        assert refused["isError"] is True, refused
        error = refused["structuredContent"]["error"]
        assert error["code"] == "too_many_connections", error
        assert error["details"] == {"limit": len(held), "retriable": True}, error
        assert app.process.poll() is None
        held.pop().close()  # room again: the same session's retry goes through
        wait_until(lambda: not _mcp_call(session, next(call_ids), "list_agents", {}).get("isError"), ANSWER_S,
                   "the session's retry to be served after a connection closed")
    finally:
        if session is not None:
            assert session.stdin is not None and session.stdout is not None
            session.stdin.close()
            session.wait(WAIT_S)
            session.stdout.close()
        for sock in held:
            sock.close()
        app.terminate()


def test_a_repeated_failure_is_logged_once_with_a_count(caplog):
    failures = RepeatedFailures(logging.getLogger("peerwire.test"), every_s=3600)
    loop = asyncio.new_event_loop()
    try:
        emfile = OSError(24, "Too many open files")
        with caplog.at_level(logging.ERROR, logger="peerwire.test"):
            for _ in range(1000):
                failures(loop, {"message": "socket.accept() out of system resource", "exception": emfile})
            failures(loop, {"message": "something else", "exception": ValueError("x")})
            assert len(caplog.records) == 2
            failures.flush()
    finally:
        loop.close()
    assert len(caplog.records) == 3
    assert "repeated 999 times" in caplog.records[-1].getMessage()
