"""One line limit at every hop, probed at the bound, one byte under and one byte over.

The hops: the MCP server's stdin (``mcp serve``), its control line to the app
(:class:`~peerwire.control.ControlChannel`), the CLI's control line
(:class:`~peerwire.control.ControlClient`) and the app reading the control
socket. A line over :data:`~peerwire.limits.MAX_LINE_BYTES` fails that call
only, with ``message_too_large`` and the call's own id: the connection or
session stays, and the other calls in flight on it (a pending wait) are
answered as if nothing happened.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys

import pytest

from harness.contract.endpoints import RawEndpoint
from peerwire import framing
from peerwire.control import ControlChannel, ControlClient, encode
from peerwire.errors import Code, PeerwireError
from peerwire.home import HOME_ENV, SESSION_ENV
from peerwire.limits import MAX_BODY_BYTES, MAX_LINE_BYTES
from tests.patience import WAIT_S

ANSWER_S = WAIT_S


def _padded(message: dict, size: int, where: list[str]) -> bytes:
    """``message`` as one line of exactly ``size`` bytes (newline excluded), padding the string at ``where``."""
    node = message
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = ""
    bare = len(encode(message)) - 1
    node[where[-1]] = "p" * (size - bare)
    line = encode(message)[:-1]
    assert len(line) == size
    return line


# -- the framing itself ---------------------------------------------------------------------


@pytest.mark.parametrize("size", [MAX_LINE_BYTES - 1, MAX_LINE_BYTES, MAX_LINE_BYTES + 1])
@pytest.mark.parametrize("chunk", [1000, 65536, 10**7])
def test_lines_split_at_the_limit_whatever_the_chunks(size, chunk):
    data = b"x" * size + b"\n" + b'{"ok":1}\n'
    lines = framing.Lines()
    out = []
    for start in range(0, len(data), chunk):
        out += lines.feed(data[start:start + chunk])
    if size <= MAX_LINE_BYTES:
        assert out == [b"x" * size, b'{"ok":1}']
    else:
        assert isinstance(out[0], framing.Oversize) and out[0].size == size
        assert out[1:] == [b'{"ok":1}']


@pytest.mark.parametrize("message", [
    {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"arguments": {"message": "x" * 3_000_000}}},
    {"method": "tools/call", "params": {"arguments": {"message": "x" * 3_000_000}}, "jsonrpc": "2.0", "id": "k-7"},
    {"id": 12, "op": "tool", "args": {"message": "x" * 3_000_000}},
])
def test_an_oversize_line_still_names_its_request(message):
    [over] = framing.Lines().feed(json.dumps(message).encode() + b"\n")
    assert isinstance(over, framing.Oversize)
    assert over.member("id") == message["id"]
    assert over.member("method") == message.get("method")


@pytest.mark.parametrize("line", [
    # the id only inside a nested object or a string: nothing to name
    b'{"params": {"id": 5, "m": "' + b"x" * 2_000_000 + b'"}}',
    b'{"params": "' + b"x" * 2_000_000 + b'", "note": "the \\"id\\": 9"}',
    b'{"params": {"a": "' + b"x" * 2_000_000 + b'", "id": 9}}',
    b"x" * 2_000_000,
])
def test_an_oversize_line_names_no_request_it_cannot_prove(line):
    [over] = framing.Lines().feed(line + b"\n")
    assert isinstance(over, framing.Oversize)
    assert over.member("id") is None


# -- the hops ----------------------------------------------------------------------------------


def _mcp(core, caller, tmp_path) -> RawEndpoint:
    env = {**os.environ, HOME_ENV: str(core.home.path), SESSION_ENV: caller.token}
    endpoint = RawEndpoint.open([sys.executable, "-m", "peerwire", "mcp", "serve"], env, stderr=tmp_path / "mcp.log")
    endpoint.handshake()
    return endpoint


def test_mcp_stdin_takes_a_line_at_the_limit_and_refuses_one_byte_more_for_that_call_only(core, tmp_path):
    alice = core.register("alice")
    endpoint = _mcp(core, alice, tmp_path)
    server = endpoint.server
    try:
        waiting = endpoint.call_tool("wait_agent", {"timeout_ms": 20_000}, timeout=ANSWER_S)
        for size, refused in ((MAX_LINE_BYTES - 1, False), (MAX_LINE_BYTES, False), (MAX_LINE_BYTES + 1, True)):
            msg_id = f"edge-{size}"
            message = {"jsonrpc": "2.0", "id": msg_id, "method": "tools/call",
                       "params": {"name": "list_agents", "arguments": {}, "_meta": {"pad": ""}}}
            answered = server.expect_response(msg_id)
            server.send_line(_padded(message, size, ["params", "_meta", "pad"]))
            result = answered.result(ANSWER_S)["result"]
            if refused:
                assert result["isError"] and result["structuredContent"]["error"]["code"] == Code.MESSAGE_TOO_LARGE
                assert str(MAX_LINE_BYTES) in result["structuredContent"]["error"]["message"]
            else:
                assert not result["isError"], result
        # A body far past the line limit, in both key orders the official SDKs use.
        for msg_id, message in (
                ("big-1", {"jsonrpc": "2.0", "id": "big-1", "method": "tools/call",
                           "params": {"name": "send_message", "arguments": {"target": "alice", "message": "m" * 1_100_000}}}),
                ("big-2", {"method": "tools/call", "params": {"name": "followup_task", "arguments": {
                    "target": "alice", "message": "m" * 4_000_000}}, "jsonrpc": "2.0", "id": "big-2"})):
            answered = server.expect_response(msg_id)
            server.send(message)
            error = answered.result(ANSWER_S)["result"]["structuredContent"]["error"]
            assert error["code"] == Code.MESSAGE_TOO_LARGE, error
        assert not waiting.future.done(), "the session's pending wait is untouched"
        sent = endpoint.call_tool("send_message", {"target": "alice", "message": "after"}, timeout=ANSWER_S)
        assert not sent.outcome(ANSWER_S).is_error
        woke = waiting.outcome(ANSWER_S)
        assert not woke.is_error and woke.structured["woke"] is True, woke.response
    finally:
        endpoint.close()


def test_the_app_reads_a_control_line_at_the_limit_and_refuses_one_byte_more_on_a_connection_that_stays(core):
    alice = core.register("alice")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with core.home.socket_address() as address:
        sock.connect(address)
    sock.settimeout(ANSWER_S)
    reader = sock.makefile("rb")
    try:
        sock.sendall(encode({"id": "wait", "op": "tool", "profile": "messaging", "tool": "wait_agent",
                             "args": {"timeout_ms": 20_000}, "meta": {}, "token": alice.token}))
        for size, refused in ((MAX_LINE_BYTES - 1, False), (MAX_LINE_BYTES, False), (MAX_LINE_BYTES + 1, True)):
            message = {"id": size, "op": "tool", "profile": "messaging", "tool": "list_agents", "args": {},
                       "meta": {"pad": ""}}
            sock.sendall(_padded(message, size, ["meta", "pad"]) + b"\n")
            answer = json.loads(reader.readline())
            assert answer["id"] == size, answer
            if refused:
                assert not answer["ok"] and answer["error"]["code"] == Code.MESSAGE_TOO_LARGE, answer
            else:
                assert answer["ok"], answer
        ControlClient(core.home, alice.token).call("send_message", {"target": "alice", "message": "wake"})
        woke = json.loads(reader.readline())
        assert woke["id"] == "wait" and woke["ok"] and woke["result"]["woke"], woke
    finally:
        reader.close()
        sock.close()


def test_the_mcp_servers_control_line_is_held_to_the_limit_before_it_leaves(core):
    alice = core.register("alice")

    async def run() -> list:
        channel = ControlChannel(core.home, alice.token)
        outcomes = []
        try:
            await channel.call_tool("messaging", "list_agents", {}, {})  # the first request carries the token
            for size in (MAX_LINE_BYTES, MAX_LINE_BYTES + 1):
                bare = len(encode({"id": 2, "op": "tool", "profile": "messaging", "tool": "list_agents", "args": {},
                                   "meta": {"pad": ""}})) - 1
                meta = {"pad": "p" * (size - bare)}
                try:
                    await channel.call_tool("messaging", "list_agents", {}, meta)
                    outcomes.append("ok")
                except PeerwireError as exc:
                    outcomes.append(exc.code)
            outcomes.append((await channel.call_tool("messaging", "list_agents", {}, {}))["agents"][0]["name"])
        finally:
            await channel.close()
        return outcomes

    assert asyncio.run(run()) == ["ok", Code.MESSAGE_TOO_LARGE, "alice"]


@pytest.mark.parametrize("extra, code", [(0, None), (1, Code.MESSAGE_TOO_LARGE)])
def test_the_cli_sends_a_body_at_its_bound_and_refuses_one_byte_more(core, extra, code):
    alice = core.register("alice")
    env = {**os.environ, HOME_ENV: str(core.home.path), SESSION_ENV: alice.token}
    done = subprocess.run([sys.executable, "-m", "peerwire", "send", "--to", "alice", "--stdin", "--json"],
                          input="é" * (MAX_BODY_BYTES // 2) + "x" * extra, env=env, capture_output=True, text=True,
                          timeout=ANSWER_S)
    out = json.loads(done.stdout)
    assert (out.get("error") or {}).get("code") == code, out


def test_the_cli_refuses_a_line_over_the_limit_as_too_large_not_unavailable(core):
    alice = core.register("alice")
    env = {**os.environ, HOME_ENV: str(core.home.path), SESSION_ENV: alice.token}
    done = subprocess.run([sys.executable, "-m", "peerwire", "send", "--to", "alice", "--stdin", "--json"],
                          input="m" * 2_000_000, env=env, capture_output=True, text=True, timeout=ANSWER_S)
    assert json.loads(done.stdout)["error"]["code"] == Code.MESSAGE_TOO_LARGE, done.stdout
    assert ControlClient(core.home, alice.token).call("list_agents")["agents"]  # the app is up and well
