"""A request id in flight belongs to its request until it is answered, at every hop that tracks ids.

``mcp serve`` (its client's JSON-RPC ids), the app's control socket (the MCP
server's and the CLI's ids) and the stdio peer under the Codex app-server and
ACP clients (the ids it issues, and those of the requests its server sends):
a second request under a live id is refused and runs nothing, the first keeps
its answer and its cancel, and the id is free again once the first is done.
``7`` and ``"7"`` are two ids throughout. All over real processes and pipes.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from peerwire.control import ControlChannel, encode
from peerwire.home import HOME_ENV, SESSION_ENV, Home
from peerwire.stdio_peer import StdioPeer, Transcript, spawn
from tests.core.conftest import call
from tests.patience import WAIT_S

SERVE = [sys.executable, "-m", "peerwire", "mcp", "serve"]
LONG_WAIT_MS = 60000  # the longest wait_agent: a call that is still waiting when the test looks


def _env(core, caller) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (HOME_ENV, SESSION_ENV)}
    return {**env, HOME_ENV: str(core.home.path), SESSION_ENV: caller.token}


class _Serve:
    """A raw ``mcp serve``: lines written as they come, every answer read in order by a thread."""

    def __init__(self, env: dict[str, str], revision: str = "2025-06-18"):
        self.proc = subprocess.Popen(SERVE, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {"protocolVersion": revision}})
        assert self.answer()["id"] == "init"

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def send(self, message: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def tool(self, msg_id: Any, name: str, arguments: dict) -> None:
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": "tools/call",
                   "params": {"name": name, "arguments": arguments}})

    def answer(self) -> Any:
        line = self.lines.get(timeout=WAIT_S)
        assert line, "mcp serve closed its stdout"
        return json.loads(line)

    def close(self) -> list[Any]:
        """Close stdin and return whatever was still to come."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(timeout=WAIT_S) == 0
        rest = []
        while line := self.lines.get(timeout=WAIT_S):
            rest.append(json.loads(line))
        assert self.proc.stdout is not None
        self.proc.stdout.close()  # the pump has read to its end
        return rest


def _refused(answer: dict, msg_id: Any) -> None:
    assert answer["id"] == msg_id and answer["error"]["code"] == -32600, answer
    assert json.dumps(msg_id) in answer["error"]["message"] or str(msg_id) in answer["error"]["message"], answer


@pytest.mark.parametrize("first, twin", [(7, "7"), ("7", 7)])
def test_mcp_serve_refuses_a_live_id_and_the_first_call_keeps_its_cancel(core, first, twin):
    a = core.register("a")
    core.register("b")
    serve = _Serve(_env(core, a))
    try:
        serve.tool(first, "wait_agent", {"timeout_ms": LONG_WAIT_MS})
        serve.tool(first, "list_agents", {})  # another tool under the live id
        _refused(serve.answer(), first)
        serve.send({"jsonrpc": "2.0", "id": first, "method": "ping"})  # a method answered at once: refused too
        _refused(serve.answer(), first)
        serve.send({"jsonrpc": "2.0", "id": first, "method": "nope"})  # one refused anyway: for its id first
        _refused(serve.answer(), first)
        serve.send({"jsonrpc": "2.0", "id": twin, "method": "ping"})  # same digits, other type: another id
        assert serve.answer() == {"jsonrpc": "2.0", "id": twin, "result": {}}

        serve.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": first}})
        # The cancel reached the first call: its id is free again, so this call runs and is answered.
        serve.tool(first, "list_agents", {})
        reused = serve.answer()
        assert reused["id"] == first and "error" not in reused, reused
        assert sorted(agent["name"] for agent in reused["result"]["structuredContent"]["agents"]) == ["a", "b"]
    finally:
        rest = serve.close()
    assert rest == []  # the cancelled wait was never answered


def test_mcp_serve_frees_an_id_when_its_call_is_answered(core):
    a, b = core.register("a"), core.register("b")
    serve = _Serve(_env(core, a))
    try:
        serve.tool("w", "wait_agent", {"timeout_ms": LONG_WAIT_MS})
        serve.tool("w", "wait_agent", {"timeout_ms": 0})
        _refused(serve.answer(), "w")  # so the first wait is in flight and subscribed before b sends
        send_as(core, b, "a", "wake up")
        woke = serve.answer()
        assert woke["id"] == "w" and woke["result"]["structuredContent"]["woke"] is True, woke
        serve.tool("w", "list_agents", {})
        again = serve.answer()
        assert again["id"] == "w" and "error" not in again, again
    finally:
        assert serve.close() == []


def test_a_batch_checks_its_ids_and_each_of_its_calls_stays_cancellable(core):
    a = core.register("a")
    serve = _Serve(_env(core, a), revision="2025-03-26")  # the one revision with batches
    try:
        serve.tool(1, "wait_agent", {"timeout_ms": LONG_WAIT_MS})
        serve.send([
            {"jsonrpc": "2.0", "id": 1, "method": "ping"},  # live outside the batch
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
             "params": {"name": "wait_agent", "arguments": {"timeout_ms": LONG_WAIT_MS}}},
            {"jsonrpc": "2.0", "id": 2, "method": "ping"},  # taken earlier in the batch
            {"jsonrpc": "2.0", "id": "2", "method": "ping"},
        ])
        serve.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})  # live in the batch
        _refused(serve.answer(), 2)
        for target in (2, 1):
            serve.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": target}})
        batch = serve.answer()  # the batch is answered once its cancelled call has ended
        assert isinstance(batch, list), batch
        _refused(batch[0], 1)
        _refused(batch[1], 2)
        assert batch[2] == {"jsonrpc": "2.0", "id": "2", "result": {}}
        assert len(batch) == 3  # the cancelled call has no answer
        serve.send({"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert serve.answer() == {"jsonrpc": "2.0", "id": 1, "result": {}}
    finally:
        assert serve.close() == []


def send_as(core, sender, target: str, message: str) -> None:
    call(core, sender, "send_message", {"target": target, "message": message})


# -- the control socket ------------------------------------------------------------------------


class _Control:
    """A raw control connection to the app: lines out, answers in order."""

    def __init__(self, core):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with core.home.socket_address() as address:
            self.sock.connect(address)
        self.sock.settimeout(WAIT_S)
        self.reader = self.sock.makefile("rb")

    def send(self, message: dict) -> None:
        self.sock.sendall(json.dumps(message).encode() + b"\n")

    def answer(self) -> dict:
        line = self.reader.readline()
        assert line, "the app closed the connection"
        return json.loads(line)

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


@pytest.mark.parametrize("first, twin", [(7, "7"), ("7", 7)])
def test_the_control_socket_refuses_a_live_id_and_keeps_the_first_calls_cancel(core, first, twin):
    a = core.register("a")
    b = core.register("b")
    control = _Control(core)
    try:
        control.send({"id": first, "op": "tool", "tool": "wait_agent", "args": {"timeout_ms": LONG_WAIT_MS},
                      "token": a.token})
        control.send({"id": first, "op": "tool", "tool": "list_agents", "args": {}})
        refused = control.answer()
        assert refused["id"] == first and refused["ok"] is False, refused
        assert refused["error"]["code"] == "invalid_argument" and "in flight" in refused["error"]["message"]
        assert refused["error"]["details"] == {"id": first, "in_flight": True}
        control.send({"id": twin, "op": "tool", "tool": "list_agents", "args": {}})
        assert control.answer()["id"] == twin

        control.send({"op": "cancel", "target": first})
        assert control.answer() == {"id": first, "cancelled": True}  # the first call, not the refused one
        control.send({"id": first, "op": "tool", "tool": "wait_agent", "args": {"timeout_ms": LONG_WAIT_MS}})
        control.send({"id": "probe", "op": "tool", "tool": "list_agents", "args": {}})
        assert control.answer()["id"] == "probe"  # the reused id is waiting, not refused
        send_as(core, b, "a", "wake up")
        woke = control.answer()
        assert woke["id"] == first and woke["ok"] and woke["result"]["woke"] is True, woke
    finally:
        control.close()


# -- the stdio peer under the Codex app-server and ACP clients --------------------------------

PEER_SERVER = r"""
import json, sys

def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()

def answer():
    return json.loads(sys.stdin.readline())

for line in sys.stdin:
    message = json.loads(line)
    rid, method = message.get("id"), message.get("method")
    if method == "stray":
        # Answers that match nothing in flight, then the real one.
        for wrong in (str(rid), True, rid + 1000):
            send({"jsonrpc": "2.0", "id": wrong, "result": "not yours"})
        send({"jsonrpc": "2.0", "id": rid, "result": "yours"})
        send({"jsonrpc": "2.0", "id": rid, "result": "a second answer"})
    elif method == "reuse":
        for sid in (5, 5, "5"):
            send({"jsonrpc": "2.0", "id": sid, "method": "hold", "params": {}})
        refusal = answer()  # the first 5 and "5" are held by the client's handler
        send({"jsonrpc": "2.0", "method": "refused", "params": refusal})
        held = [answer(), answer()]
        send({"jsonrpc": "2.0", "id": 5, "method": "hold", "params": {}})  # free again
        send({"jsonrpc": "2.0", "id": rid, "result": {"held": held, "again": answer()}})
"""


async def _peer(tmp_path: Path, handler=None) -> StdioPeer:
    script = tmp_path / "peer_server.py"
    script.write_text(PEER_SERVER, encoding="utf-8")
    process = await spawn([sys.executable, str(script)], cwd=tmp_path, env=os.environ)
    options = {"server_request_handler": handler} if handler is not None else {}
    return StdioPeer(process, transcript=Transcript(), **options)


def test_the_stdio_peer_takes_only_its_own_answer_and_keeps_the_rest(tmp_path: Path):
    async def run() -> None:
        async with await _peer(tmp_path) as peer:
            assert await peer.request("stray", timeout=WAIT_S) == "yours"  # id 1: true is not 1, nor "1"
            assert await peer.request("stray", timeout=WAIT_S) == "yours"  # id 2, never 1 again
            await peer.request("stray", timeout=WAIT_S)
        ids = [entry["message"].get("id") for entry in peer.transcript.entries
               if entry["dir"] == "sent" and "method" in entry["message"]]
        assert ids == [1, 2, 3]
        # Read once the server is gone, so every line it wrote has been read.
        assert [(json.dumps(r.id), r.result) for r in peer.unmatched_responses] == [  # dumps: true is not 1
            (json.dumps(wrong), result) for rid in (1, 2, 3)
            for wrong, result in ((str(rid), "not yours"), (True, "not yours"), (rid + 1000, "not yours"),
                                  (rid, "a second answer"))
        ]

    asyncio.run(asyncio.wait_for(run(), WAIT_S))


def test_the_stdio_peer_refuses_a_server_request_under_a_live_id(tmp_path: Path):
    async def run() -> None:
        release = asyncio.Event()
        ran: list[Any] = []

        async def hold(request):
            ran.append(request.id)
            await release.wait()
            return {"held": request.id}

        async with await _peer(tmp_path, hold) as peer:
            reuse = asyncio.ensure_future(peer.request("reuse", timeout=WAIT_S))
            refused = await peer.wait_for_notification("refused", timeout=WAIT_S)
            release.set()
            result = await reuse
        assert refused.params["id"] == 5 and refused.params["error"]["code"] == -32600, refused
        assert "5" in refused.params["error"]["message"]
        assert ran == [5, "5", 5]  # the refused request ran nothing
        assert sorted(json.dumps(a) for a in result["held"]) == sorted(json.dumps(
            {"jsonrpc": "2.0", "id": sid, "result": {"held": sid}}) for sid in (5, "5"))
        assert result["again"] == {"jsonrpc": "2.0", "id": 5, "result": {"held": 5}}

    asyncio.run(asyncio.wait_for(run(), WAIT_S))


def test_the_control_channel_takes_only_the_answer_to_its_own_id(tmp_path: Path):
    """The MCP server's side of the control socket, against a stand-in app on a real socket."""
    home = Home(tmp_path / "home")
    home.path.mkdir(mode=0o700)

    hung_up = asyncio.Event()

    async def app(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request_id = json.loads(await reader.readline())["id"]
        for wrong in (True, str(request_id), request_id + 1000):  # none of them is the channel's id
            writer.write(encode({"id": wrong, "ok": True, "result": {"for": "someone else"}}))
        writer.write(encode({"id": request_id, "ok": True, "result": {"for": "the channel"}}))
        await writer.drain()
        await reader.read()  # until the channel hangs up
        writer.close()
        await writer.wait_closed()
        hung_up.set()

    async def run() -> None:
        with home.socket_address() as address:
            server = await asyncio.start_unix_server(app, address)
        home.socket.chmod(0o600)
        channel = ControlChannel(home, "a-token")
        try:
            assert await asyncio.wait_for(channel.request({"op": "status"}), WAIT_S) == {"for": "the channel"}
        finally:
            await channel.close()
            await asyncio.wait_for(hung_up.wait(), WAIT_S)
            server.close()
            await server.wait_closed()

    asyncio.run(run())
