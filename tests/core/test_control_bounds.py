"""The control socket under pressure: abandoned waits, bounded waiters and connections, quiet logs.

The app runs as a real subprocess whose file limit is set in the child with
``resource.setrlimit``; clients are raw Unix sockets speaking control lines.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import resource
import socket
import subprocess
from pathlib import Path

import pytest

from harness.process.app import AppProcess
from peerwire.control import ControlClient, encode
from peerwire.control_server import RepeatedFailures, connection_limit
from peerwire.home import Home
from peerwire.limits import CONTROL_FD_RESERVE, MAX_CONNECTIONS_PER_CALLER, MAX_WAITERS_PER_CALLER

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
        bound = nofile - CONTROL_FD_RESERVE
        status = encode({"id": 1, "op": "status", "args": {}, "operator": app.home.operator_credential()})
        for _ in range(bound):
            sock = _connect(app.home)
            sock.sendall(status)
            assert _read_answer(sock)["ok"] is True  # served, and held open
            held.append(sock)
        with _connect(app.home) as extra:
            refused = _read_answer(extra)
        assert refused["error"]["code"] == "too_many_connections"
        assert refused["error"]["details"] == {"limit": bound}
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
            assert refused["error"]["details"] == {"limit": MAX_CONNECTIONS_PER_CALLER, "per": "caller"}
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
    assert connection_limit(10) == min(10, soft - CONTROL_FD_RESERVE)
    assert connection_limit(10 ** 9) <= soft - CONTROL_FD_RESERVE


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
