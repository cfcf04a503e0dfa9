"""A retried call gets its first receipt and creates nothing.

The same caller with the same MCP ``_meta.callId`` (or, from the CLI, the same
``--idempotency-key``) is one call however often it arrives: across dropped
answers and app restarts, since the answered calls are in the store.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from contextlib import closing
import socket

from harness.contract.manifest import requirement
from peerwire.control import ControlClient, encode
from peerwire.home import HOME_ENV, SESSION_ENV
from peerwire.lifecycle import Stage
from peerwire.store import Call, Store

from .conftest import call, cli, cli_json, wait_until
from tests.patience import WAIT_S



class Mcp:
    """``peerwire mcp serve`` as ``caller``, spoken to with raw JSON-RPC lines."""

    def __init__(self, core, caller):
        env = {**os.environ, HOME_ENV: str(core.home.path), SESSION_ENV: caller.token}
        self.proc = subprocess.Popen([sys.executable, "-m", "peerwire", "mcp", "serve"], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.ids = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "retrying-client", "version": "1"}})

    def request(self, method: str, params: dict) -> dict:
        self.ids += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params})
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def tool(self, name: str, arguments: dict, call_id: str | None) -> dict:
        params: dict = {"name": name, "arguments": arguments}
        if call_id is not None:
            params["_meta"] = {"callId": call_id}
        return self.request("tools/call", params)["result"]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=WAIT_S)
        self.proc.stdout.close()


def records_for(core, caller) -> list[dict]:
    return call(core, caller, "receive_messages", {"limit": 100})["records"]


@requirement("call:retry:idempotent")
def test_a_retried_mcp_call_returns_the_first_receipt_and_admits_once(core):
    a, b = core.register("a"), core.register("b")
    mcp = Mcp(core, a)
    try:
        first = mcp.tool("followup_task", {"target": "b", "message": "only once"}, "call_1")
        again = mcp.tool("followup_task", {"target": "b", "message": "only once"}, "call_1")
        other = mcp.tool("followup_task", {"target": "b", "message": "only once"}, "call_2")
        unkeyed = [mcp.tool("send_message", {"target": "b", "message": "no key"}, None) for _ in range(2)]
    finally:
        mcp.close()
    assert first["isError"] is False and again == first
    assert other["structuredContent"]["request_id"] != first["structuredContent"]["request_id"]
    assert unkeyed[0]["structuredContent"]["interaction_id"] != unkeyed[1]["structuredContent"]["interaction_id"]
    assert [r["body"] for r in records_for(core, b)] == ["only once", "only once", "no key", "no key"]


@requirement("call:retry:idempotent")
def test_a_retry_after_the_answer_was_dropped_and_the_app_crashed(core):
    a, b = core.register("a"), core.register("b")
    request = {"id": 1, "op": "send_message", "token": a.token, "meta": {"via": "mcp", "call_id": "call_lost"},
               "args": {"target": "b", "message": "sent, answer lost"}}
    with closing(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)) as sock:
        with core.home.socket_address() as address:
            sock.connect(address)
        sock.sendall(encode(request))
        # Committed while the caller waits; then the caller is gone and the app dies.
        wait_until(lambda: records_for(core, b), WAIT_S, "the first attempt to commit")
    core.app.process.send_signal(signal.SIGKILL)
    core.app.process.wait()
    core.restart()
    (record,) = records_for(core, b)
    retried = ControlClient(core.home, a.token).call("send_message", request["args"], meta=request["meta"])
    assert retried["interaction_id"] == record["record_id"]
    assert [r["record_id"] for r in records_for(core, b)] == [record["record_id"]]
    stages = [s["stage"] for s in cli_json(core, "trace", record["record_id"])["interactions"][0]["stages"]]
    assert "retried" in stages, stages


@requirement("call:retry:idempotent")
def test_a_call_id_reused_for_another_call_is_refused(core):
    a, b = core.register("a"), core.register("b")
    client = ControlClient(core.home, a.token)
    client.call("send_message", {"target": "b", "message": "first"}, meta={"call_id": "call_x"})
    for op, args in (("send_message", {"target": "b", "message": "different"}),
                     ("followup_task", {"target": "b", "message": "first"})):
        error = cli_error(lambda: client.call(op, args, meta={"call_id": "call_x"}))
        assert error.code.value == "invalid_argument" and "call_x" in error.message
    assert [r["body"] for r in records_for(core, b)] == ["first"]


def test_call_ids_belong_to_their_caller(core):
    a, c, b = core.register("a"), core.register("c"), core.register("b")
    for sender in (a, c):
        ControlClient(core.home, sender.token).call("send_message", {"target": "b", "message": "same id"},
                                                    meta={"call_id": "call_shared"})
    assert len(records_for(core, b)) == 2


def test_a_retried_reply_returns_its_first_receipt(core):
    a, b = core.register("a"), core.register("b")
    task = call(core, a, "followup_task", {"target": "b", "message": "answer once"})
    client = ControlClient(core.home, b.token)
    args = {"request_id": task["request_id"], "status": "done", "message": "the answer"}
    first = client.call("reply", args, meta={"call_id": "call_reply"})
    assert client.call("reply", args, meta={"call_id": "call_reply"}) == first
    error = cli_error(lambda: client.call("reply", args, meta={"call_id": "call_other"}))
    assert error.code.value == "already_replied", "a new call is a second reply"


def test_cli_idempotency_key(core):
    a, b = core.register("a"), core.register("b")
    first = cli_json(core, "task", "--to", "b", "--body", "keyed", "--idempotency-key", "job-42", caller=a)
    again = cli_json(core, "task", "--to", "b", "--body", "keyed", "--idempotency-key", "job-42", caller=a)
    assert again == first
    clash = cli(core, "task", "--to", "b", "--body", "other", "--idempotency-key", "job-42", caller=a)
    assert clash.returncode == 1 and json.loads(clash.stdout)["error"]["code"] == "invalid_argument"
    reply = ["reply", first["request_id"], "--status", "done", "--message", "ok", "--idempotency-key", "r-1"]
    assert cli_json(core, *reply, caller=b) == cli_json(core, *reply, caller=b)
    assert [r["kind"] for r in records_for(core, b)] == ["task"]


def cli_error(fn):
    from peerwire.errors import PeerwireError

    try:
        fn()
    except PeerwireError as exc:
        return exc
    raise AssertionError("the call did not fail")


def test_a_receipt_is_kept_once_and_a_retry_still_gets_it_byte_for_byte(tmp_path):
    """The record holds its tool receipt; admitted evidence and the answered call do not store it again."""
    store = Store(tmp_path / "db")
    ann, bob = store.registry.register_agent("ann", "manual")[0], store.registry.register_agent("bob", "manual")[0]
    the_call = Call.of({"call_id": "call_1"}, "send_message", {"target": "bob", "message": "hi"})
    tool = {"via": "mcp", "call_id": "call_1", "thread_id": "t" * 36, "turn_id": "u" * 36, "model": "m"}
    with store.database.write() as db:
        first = store.mailbox.information_job(ann, bob, "hi", receipt=tool, call=the_call)(db)
    with store.database.write() as db:
        again = store.mailbox.information_job(ann, bob, "hi", receipt=tool, call=the_call)(db)
    assert json.dumps(again) == json.dumps(first)
    assert store.database.db.execute("SELECT COUNT(*) FROM interactions").fetchone()[0] == 1
    stored = store.dump()
    assert json.loads(stored["interactions"][0]["tool_receipt"]) == tool
    (admitted,) = [json.loads(e["detail"]) for e in stored["evidence"] if e["stage"] == Stage.ADMITTED]
    assert "tool_receipt" not in admitted
    assert stored["calls"][0]["receipt"] == ""
    store.close()
