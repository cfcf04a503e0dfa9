"""``peerwire mcp serve`` as a real subprocess: the official MCP client and raw lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from peerwire import contract
from peerwire.home import HOME_ENV, SESSION_ENV
from tests.patience import WAIT_S

SERVE = [sys.executable, "-m", "peerwire", "mcp", "serve"]


def _env(core=None, caller=None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (HOME_ENV, SESSION_ENV)}
    if core is not None:
        env[HOME_ENV] = str(core.home.path)
    if caller is not None:
        env[SESSION_ENV] = caller.token
    return env


async def _sdk_session_calls(env: dict[str, str], calls: list[tuple[str, dict]]):
    params = StdioServerParameters(command=SERVE[0], args=SERVE[1:], env=env)
    out = []
    with anyio.fail_after(WAIT_S):
        async with stdio_client(params) as streams:
            async with ClientSession(*streams) as session:
                init = await session.initialize()
                tools = await session.list_tools()
                for name, args in calls:
                    out.append(await session.call_tool(name, args))
    return init, tools, out


def test_official_client_sees_the_contract_schemas_without_a_home():
    init, tools, _ = anyio.run(_sdk_session_calls, _env(), [])
    assert init.server_info.name == "peerwire"
    advertised = {t.name: t for t in tools.tools}
    assert list(advertised) == list(contract.TOOL_ORDER)
    for spec in contract.tools():
        assert advertised[spec["name"]].input_schema == spec["inputSchema"]
        assert advertised[spec["name"]].output_schema == spec["outputSchema"]


def test_official_client_task_round_trip(core):
    a, b = core.register("a"), core.register("b")
    body = "Zähle die Äpfel 🍎\r\nline two\ttabbed — “quoted”"
    _, _, (sent,) = anyio.run(_sdk_session_calls, _env(core, a),
                              [("followup_task", {"target": "b", "message": body})])
    assert sent.is_error is False
    receipt = sent.structured_content
    assert receipt["kind"] == "task" and receipt["state"] == "admitted"
    assert json.loads(sent.content[0].text) == receipt

    _, _, (page,) = anyio.run(_sdk_session_calls, _env(core, b), [("receive_messages", {})])
    (record,) = page.structured_content["records"]
    assert record["body"] == body  # byte-for-byte through two JSON hops and SQLite
    assert record["sender"] == {"agent_id": a.agent_id, "name": "a"}
    assert page.structured_content["new_work"] == [receipt["request_id"]]

    _, _, (rep, again) = anyio.run(_sdk_session_calls, _env(core, b), [
        ("reply", {"request_id": receipt["request_id"], "status": "done", "message": "4 Äpfel"}),
        ("reply", {"request_id": receipt["request_id"], "status": "done", "message": "again"}),
    ])
    assert rep.is_error is False and rep.structured_content["recipient"]["name"] == "a"
    assert again.is_error is True
    assert again.structured_content["error"]["code"] == "already_replied"


def test_codex_call_metadata_becomes_the_tool_receipt(core):
    a, _ = core.register("a"), core.register("b")
    turn = {"session_id": "s-1", "thread_id": "th-1", "turn_id": "tu-1", "model": "scripted-1"}
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "send_message", "arguments": {"target": "b", "message": "hi"},
            "_meta": {"callId": "call_9", "x-codex-turn-metadata": json.dumps(turn)}}},
    ]
    (response,) = _raw(lines, _env(core, a))
    receipt = response["result"]["structuredContent"]
    trace = subprocess.run([*SERVE[:3], "trace", receipt["interaction_id"], "--json"], env=_env(core),
                           capture_output=True, text=True, timeout=WAIT_S)
    stored = json.loads(trace.stdout)["interactions"][0]["tool_receipt"]
    assert stored == {"via": "mcp", "call_id": "call_9", **turn}


def _raw(messages: list, env: dict[str, str], extra_lines: list[bytes] = ()) -> list[dict]:
    data = b"".join(json.dumps(m).encode() + b"\n" for m in messages) + b"".join(extra_lines)
    done = subprocess.run(SERVE, input=data, env=env, capture_output=True, timeout=WAIT_S)
    assert done.returncode == 0, done.stderr.decode()
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_raw_lines_protocol_errors_and_survival():
    out = _raw(
        [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}},
         {"jsonrpc": "2.0", "method": "notifications/initialized"},
         {"jsonrpc": "2.0", "id": 2, "method": "nope"},
         {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "no_such_tool"}},
         {"id": 4, "method": "ping"},
         {"jsonrpc": "2.0", "id": 5, "method": "ping"}],
        _env(),
        [b"{not json\n"],
    )
    by_id = {m["id"]: m for m in out}
    assert by_id[1]["result"]["protocolVersion"] == "2025-06-18"
    assert by_id[2]["error"]["code"] == -32601
    assert by_id[3]["error"]["code"] == -32602
    assert by_id[4]["error"]["code"] == -32600
    assert by_id[5]["result"] == {}
    assert by_id[None]["error"]["code"] == -32700
    assert len(out) == 6  # the notification got no answer


@pytest.mark.parametrize("env_kind, code", [("no_home", "app_unavailable"), ("no_session", "unknown_caller"),
                                            ("bad_session", "unknown_caller")])
def test_missing_home_or_session_is_a_tool_error(core, env_kind, code):
    a = core.register("a")
    env = _env(core, a)
    if env_kind == "no_home":
        env.pop(HOME_ENV)
    elif env_kind == "no_session":
        env.pop(SESSION_ENV)
    else:
        env[SESSION_ENV] = "forged"
    (response,) = _raw([{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                         "params": {"name": "list_agents", "arguments": {}}}], env)
    assert response["result"]["isError"] is True
    assert response["result"]["structuredContent"]["error"]["code"] == code


async def _auto_mode_calls(env: dict[str, str], calls: list[tuple[str, dict]]):
    """The official client's default ``auto`` mode: it probes server/discover, then goes stateless."""
    from mcp import Client

    params = StdioServerParameters(command=SERVE[0], args=SERVE[1:], env=env)
    with anyio.fail_after(WAIT_S):
        async with Client(params) as client:
            tools = await client.list_tools()
            return client.protocol_version, tools, [await client.call_tool(name, args) for name, args in calls]


def test_official_client_auto_mode_speaks_the_stateless_revision(core):
    a, _ = core.register("a"), core.register("b")
    version, tools, (sent, failed) = anyio.run(_auto_mode_calls, _env(core, a), [
        ("send_message", {"target": "b", "message": "stateless hello"}),
        ("send_message", {"target": "nobody", "message": "x"}),
    ])
    assert version == "2026-07-28"
    assert [t.name for t in tools.tools] == list(contract.TOOL_ORDER)
    assert sent.is_error is False and sent.structured_content["state"] == "admitted"
    assert failed.is_error is True and failed.structured_content["error"]["code"] == "unknown_target"


class _Session:
    """A raw ``mcp serve`` process kept open: one request at a time, answers read by id."""

    def __init__(self, env: dict[str, str]):
        self.proc = subprocess.Popen(SERVE, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.next_id = 0

    def call(self, name: str, arguments: dict) -> dict:
        self.next_id += 1
        line = {"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
                "params": {"name": name, "arguments": arguments}}
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(line).encode() + b"\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())  # bounded by the test timeout
        assert answer["id"] == self.next_id
        return answer["result"]

    def close(self) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        status = self.proc.wait(timeout=WAIT_S)
        self.proc.stdout.close()
        return status


def _code(result: dict) -> str | None:
    return result["structuredContent"]["error"]["code"] if result.get("isError") else None


def test_one_session_survives_an_app_restart(core):
    a, _ = core.register("a"), core.register("b")
    session = _Session(_env(core, a))
    try:
        assert _code(session.call("list_agents", {})) is None
        core.stop_app()
        assert _code(session.call("list_agents", {})) == "app_unavailable"  # answered, not hung
        core.start_app()
        assert _code(session.call("send_message", {"target": "b", "message": "after the restart"})) is None
        core.restart()  # kill -9 and start again: the session's connection breaks under it
        outcome = _code(session.call("list_agents", {}))
        assert outcome in (None, "app_unavailable")
        assert _code(session.call("list_agents", {})) is None
    finally:
        assert session.close() == 0


@pytest.mark.parametrize("arguments", [
    b'{"target": "b", "message": 1e400}',
    b'{"target": "b", "message": "x", "extra": -1e400}',
    b'{"target": "b", "message": "x", "extra": {"deep": [1, 2, 1E999]}}',
])
def test_a_number_json_cannot_carry_is_the_clients_error_never_internal(core, arguments):
    a = core.register("a")
    core.register("b")
    call = (b'{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "send_message", "arguments": '
            + arguments + b'}}\n')
    out = _raw([{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}},
                {"jsonrpc": "2.0", "method": "notifications/initialized"}], _env(core, a),
               [call, b'{"jsonrpc": "2.0", "id": 10, "method": "ping"}\n'])
    by_id = {m["id"]: m for m in out}
    assert "error" not in by_id[9], by_id[9]
    error = by_id[9]["result"]["structuredContent"]["error"]
    assert error["code"] == "invalid_argument" and "out of range" in error["message"], error
    assert by_id[10]["result"] == {}


def test_the_app_refuses_a_control_line_with_an_out_of_range_number_and_keeps_the_connection(core):
    import socket

    a = core.register("a")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with core.home.socket_address() as address:
        sock.connect(address)
    sock.settimeout(WAIT_S)
    reader = sock.makefile("rb")
    try:
        sock.sendall(b'{"id": 1, "op": "tool", "tool": "receive_messages", "args": {"limit": 1e400}, "token": "'
                     + a.token.encode() + b'"}\n{"id": 2, "op": "tool", "tool": "list_agents", "args": {}}\n')
        answers = {answer["id"]: answer for answer in (json.loads(reader.readline()) for _ in range(2))}
    finally:
        reader.close()
        sock.close()
    assert answers[1]["error"]["code"] == "invalid_argument" and "out of range" in answers[1]["error"]["message"]
    assert answers[2]["ok"], answers[2]
