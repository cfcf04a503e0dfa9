"""A server whose stdout is not JSON-RPC: found once, stopped with what it started, named in one line.

Real server processes throughout; what must not survive is looked up with psutil by pid.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from harness.contract.stdio import STRAY_LIMIT_LINES, NotJsonRpc, StdioServer, command_stdout_fault
from tests.patience import WAIT_S

from .conftest import run_contract

# A server that starts a child in its own group (which must end with it), notes both pids, then writes
# what its first argument says: lines of text, lines of JSON that is no JSON-RPC, text with no newline ever,
# a few stray lines before it answers like a server, or nothing (it just holds its stdout open).
SERVER = r"""
import json, os, subprocess, sys
kind = sys.argv[1]
child = subprocess.Popen(["sleep", "3600"])
with open(os.environ["SERVER_PIDS"], "a") as pids:
    pids.write(f"{os.getpid()} {child.pid}\n")
out = sys.stdout.buffer
if kind == "answers":
    for n in range(int(sys.argv[2])):
        out.write(b"starting, step %d\n" % n)
    request = json.loads(sys.stdin.readline())
    out.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"protocolVersion": "2025-06-18"}})
              .encode() + b"\n")
    out.flush()
    sys.stdin.read()
elif kind == "silent":
    sys.stdin.read()
else:
    chunk = {"text": b"F" * 80 + b"\n", "json": b"{}\n", "endless": b"F" * 4096}[kind]
    while True:
        out.write(chunk)
"""


@pytest.fixture
def server_argv(tmp_path: Path, monkeypatch) -> list[str]:
    script = tmp_path / "server.py"
    script.write_text(SERVER, encoding="utf-8")
    monkeypatch.setenv("SERVER_PIDS", str(tmp_path / "pids"))
    return [sys.executable, str(script)]


def _pids(tmp_path: Path) -> list[int]:
    return [int(pid) for line in (tmp_path / "pids").read_text().split("\n") if line for pid in line.split()]


def _none_survive(pids: list[int]) -> None:
    """Every process named is gone (a zombie awaiting its parent counts as gone), waited for within a bound."""
    assert pids, "the server noted no pids"
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        alive = [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
        if not alive:
            return
        time.sleep(0.02)
    raise AssertionError(f"still running after {WAIT_S}s: {alive}")


@pytest.mark.parametrize("kind, cause", [
    ("text", "server wrote non-JSON to stdout: 'FFFF"),
    ("json", "server wrote JSON that is not JSON-RPC to stdout: '{}'"),
    ("endless", "server wrote non-JSON to stdout: 'FFFF"),
])
def test_a_flooding_server_is_stopped_with_its_group_and_every_wait_names_the_cause(tmp_path, server_argv, kind,
                                                                                   cause):
    server = StdioServer([*server_argv, kind], dict(os.environ), stderr=tmp_path / "stderr")
    try:
        started = time.monotonic()
        with pytest.raises(NotJsonRpc) as stopped:
            server.call("initialize", {}, timeout=WAIT_S)
        assert str(stopped.value).startswith(cause), stopped.value
        assert "\n" not in str(stopped.value)
        with pytest.raises(NotJsonRpc):  # every later wait fails at once, the same way
            server.call("ping", timeout=WAIT_S)
        assert time.monotonic() - started < WAIT_S
        assert len(server.lines) <= STRAY_LIMIT_LINES  # what it flooded was not kept
        _none_survive(_pids(tmp_path))  # stopped by the client, not by close()
    finally:
        server.close()


def test_a_few_stray_lines_are_kept_for_the_suite_to_judge(tmp_path, server_argv):
    server = StdioServer([*server_argv, "answers", str(STRAY_LIMIT_LINES)], dict(os.environ),
                         stderr=tmp_path / "stderr")
    try:
        assert server.call("initialize", {}, timeout=WAIT_S)["result"] == {"protocolVersion": "2025-06-18"}
        assert len(server.stray_lines()) == STRAY_LIMIT_LINES and server.fault is None
    finally:
        server.close()
    _none_survive(_pids(tmp_path))


@pytest.mark.parametrize("kind, expected", [
    ("text", "server wrote non-JSON to stdout: 'FFFF"),
    ("answers", None),
    ("silent", None),
])
def test_the_probe_names_a_server_that_speaks_no_json_rpc_and_leaves_nothing(tmp_path, server_argv, kind, expected):
    command = shlex.join([*server_argv, kind, "3"] if kind == "answers" else [*server_argv, kind])
    fault = command_stdout_fault(command, timeout=0.5 if kind == "silent" else WAIT_S)
    assert fault == expected if expected is None else fault.startswith(expected), fault
    _none_survive(_pids(tmp_path))


def test_a_contract_run_against_a_flooding_server_stops_at_once_naming_it_and_leaves_no_process(tmp_path,
                                                                                               server_argv):
    run = run_contract(tmp_path, "--server-cmd", shlex.join([*server_argv, "text"]),
                       env={"SERVER_PIDS": str(tmp_path / "pids")})
    assert run.returncode == 2, run.output[-3000:]
    lines = run.output.strip().splitlines()
    assert len(lines) == 1 and "contract: " in lines[0], run.output
    assert ": server wrote non-JSON to stdout: 'FFFF" in lines[0], run.output
    assert "Traceback" not in run.output
    _none_survive(_pids(tmp_path))


OWNER = r"""
import os, sys
from pathlib import Path
from harness.contract.stdio import StdioServer
server = StdioServer(sys.argv[1:], dict(os.environ), stderr=Path(os.environ["SERVER_PIDS"] + ".stderr"))
print(server.process.pid, flush=True)
sys.stdin.read()
"""


def test_servers_end_with_their_owner_even_when_it_is_killed(tmp_path, server_argv):
    owner = subprocess.Popen([sys.executable, "-c", OWNER, *server_argv, "silent"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, cwd=Path(__file__).resolve().parents[2])
    try:
        assert owner.stdout is not None
        server_pid = int(owner.stdout.readline())
        deadline = time.monotonic() + WAIT_S
        while len(_pids(tmp_path) if (tmp_path / "pids").exists() else []) < 2:  # the server's child is up
            assert time.monotonic() < deadline, "the server never started its child"
            time.sleep(0.02)
        assert server_pid in _pids(tmp_path)
        owner.send_signal(signal.SIGKILL)  # no teardown of its own
        owner.wait(WAIT_S)
        _none_survive(_pids(tmp_path))
    finally:
        owner.kill()
        owner.wait(WAIT_S)
        for stream in (owner.stdin, owner.stdout):
            if stream is not None:
                stream.close()

