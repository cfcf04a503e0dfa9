"""The app-server client: framing and lifecycle against a stand-in server, then
the Codex behaviours the adapter relies on against the real pinned CLI."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tomllib
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from harness.codex.home import AgentSettings, PeerwireServer, Projection, ScriptedProvider
from harness.codex.install import locate_codex
from harness.model.rules import script_from_document
from harness.model.server import ScriptedModel
from peerwire.codex import (
    AppServerClient,
    AppServerExited,
    JsonRpcError,
    ServerRequest,
    text_input,
)
from tests.patience import GLANCE_S, WAIT_S

pytestmark = pytest.mark.anyio

WAIT = WAIT_S


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# -- a stand-in app-server: same framing, scripted behaviour ------------------------

STAND_IN = r"""
import json, os, signal, sys

def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()

stashed = []
for line in sys.stdin:
    message = json.loads(line)
    method, rid, params = message.get("method"), message.get("id"), message.get("params") or {}
    if method is None:
        continue  # an answer to one of our server requests, read inline below
    if rid is None:
        send({"method": "client/notified", "params": {"method": method}})
        continue
    if method == "initialize":
        send({"id": rid, "result": {"userAgent": "stand-in", "echo": params}})
    elif method == "later":
        stashed.append((rid, params))
    elif method == "flush":
        send({"id": rid, "result": {"flushed": len(stashed)}})
        for stashed_id, stashed_params in reversed(stashed):
            send({"id": stashed_id, "result": stashed_params})
        stashed.clear()
    elif method == "fail":
        send({"id": rid, "error": {"code": -32600, "message": "no active turn to steer", "data": {"why": "stale"}}})
    elif method == "ask":
        send({"id": "srv-1", "method": params["ask"], "params": {"threadId": "t"}})
        answer = json.loads(sys.stdin.readline())
        send({"id": rid, "result": {"answer": answer}})
    elif method == "emit":
        for name in params["names"]:
            send({"method": name, "params": {"n": name}})
        send({"id": rid, "result": {}})
    elif method == "die":
        sys.stderr.write("stand-in: dying on request\n")
        sys.stderr.flush()
        os._exit(3)
    else:
        send({"id": rid, "error": {"code": -32601, "message": "unknown " + method}})
if os.environ.get("STAND_IN_IGNORES_EOF"):
    signal.pause()
"""


@pytest.fixture
def stand_in(tmp_path: Path) -> list[str]:
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN, encoding="utf-8")
    return [sys.executable, str(script)]


@asynccontextmanager
async def started(command: list[str], tmp_path: Path, **options: Any) -> AsyncIterator[AppServerClient]:
    options = {"codex_home": tmp_path / "codex-home", "cwd": tmp_path, **options}
    client = await AppServerClient.start(
        codex=command, transcript_path=tmp_path / "transcript.jsonl", timeout=WAIT, **options
    )
    try:
        yield client
    finally:
        await client.close()


async def test_handshake_sends_initialize_then_initialized(stand_in: list[str], tmp_path: Path) -> None:
    async with started(stand_in, tmp_path) as client:
        notified = await client.wait_for_notification("client/notified", timeout=WAIT)

    assert client.initialize_result is not None
    assert client.initialize_result["echo"]["capabilities"] == {"experimentalApi": True}
    assert client.initialize_result["echo"]["clientInfo"]["name"] == "peerwire"
    assert notified.params == {"method": "initialized"}


async def test_answers_are_matched_to_requests_by_id(stand_in: list[str], tmp_path: Path) -> None:
    async with started(stand_in, tmp_path) as client:
        first = asyncio.ensure_future(client.request("later", {"n": 1}, timeout=WAIT))
        second = asyncio.ensure_future(client.request("later", {"n": 2}, timeout=WAIT))
        await client.wait_for_notification(
            "client/notified", timeout=WAIT
        )  # both requests are written by now
        flushed = await client.request("flush", timeout=WAIT)

        assert flushed == {"flushed": 2}
        assert await first == {"n": 1}
        assert await second == {"n": 2}


async def test_error_answers_raise_with_code_message_and_data(stand_in: list[str], tmp_path: Path) -> None:
    async with started(stand_in, tmp_path) as client:
        with pytest.raises(JsonRpcError) as failed:
            await client.turn_steer("thread", "turn", "hi", timeout=WAIT)
        with pytest.raises(JsonRpcError) as refused:
            await client.request("fail", timeout=WAIT)

    assert (failed.value.code, failed.value.method) == (-32601, "turn/steer")
    assert (refused.value.code, refused.value.message, refused.value.data) == (
        -32600,
        "no active turn to steer",
        {"why": "stale"},
    )


async def test_server_requests_are_declined_by_default_and_kept(stand_in: list[str], tmp_path: Path) -> None:
    async with started(stand_in, tmp_path) as client:
        approval = await client.request("ask", {"ask": "item/commandExecution/requestApproval"}, timeout=WAIT)
        elicitation = await client.request("ask", {"ask": "mcpServer/elicitation/request"}, timeout=WAIT)
        unknown = await client.request("ask", {"ask": "account/chatgptAuthTokens/refresh"}, timeout=WAIT)

    assert approval["answer"] == {"jsonrpc": "2.0", "id": "srv-1", "result": {"decision": "decline"}}
    assert elicitation["answer"]["result"] == {"action": "decline"}
    assert unknown["answer"]["error"]["code"] == -32601
    assert [handled.request.method for handled in client.server_requests] == [
        "item/commandExecution/requestApproval",
        "mcpServer/elicitation/request",
        "account/chatgptAuthTokens/refresh",
    ]


async def test_a_custom_handler_answers_server_requests(stand_in: list[str], tmp_path: Path) -> None:
    seen: list[ServerRequest] = []

    async def accept(request: ServerRequest) -> dict[str, Any]:
        seen.append(request)
        return {"decision": "accept"}

    async with started(stand_in, tmp_path, server_request_handler=accept) as client:
        answered = await client.request("ask", {"ask": "item/fileChange/requestApproval"}, timeout=WAIT)

    assert answered["answer"]["result"] == {"decision": "accept"}
    assert seen == [ServerRequest("srv-1", "item/fileChange/requestApproval", {"threadId": "t"})]


async def test_notifications_are_kept_in_order_and_can_be_awaited_later(
    stand_in: list[str], tmp_path: Path
) -> None:
    async with started(stand_in, tmp_path) as client:
        await client.wait_for_notification("client/notified", timeout=WAIT)  # the echo of `initialized`
        mark = len(client.received)
        await client.request(
            "emit", {"names": ["turn/started", "item/completed", "turn/completed"]}, timeout=WAIT
        )

        # Already arrived: found without waiting, in either order.
        completed = await client.wait_for_notification("turn/completed", since=mark, timeout=WAIT)
        started_ = await client.wait_for_notification("turn/started", since=mark, timeout=WAIT)
        with pytest.raises(TimeoutError):
            await client.wait_for_notification("turn/started", since=completed.index, timeout=GLANCE_S)

    assert [n.method for n in client.received[mark:]] == ["turn/started", "item/completed", "turn/completed"]
    assert started_.index < completed.index


async def test_transcript_has_every_line_in_order_with_direction(stand_in: list[str], tmp_path: Path) -> None:
    async with started(stand_in, tmp_path) as client:
        await client.wait_for_notification("client/notified", timeout=WAIT)
        await client.request("emit", {"names": ["x/y"]}, timeout=WAIT)

    entries = [json.loads(line) for line in (tmp_path / "transcript.jsonl").read_text().splitlines()]
    assert entries == client.transcript.entries
    assert [(e["dir"], e["message"].get("method"), e["message"].get("id")) for e in entries] == [
        ("sent", "initialize", 1),
        ("received", None, 1),
        ("sent", "initialized", None),
        ("received", "client/notified", None),
        ("sent", "emit", 2),
        ("received", "x/y", None),
        ("received", None, 2),
    ]
    assert [e["seq"] for e in entries] == list(range(len(entries)))
    assert all(a["mono"] <= b["mono"] for a, b in zip(entries, entries[1:]))


async def test_a_dying_server_fails_pending_requests_and_waiters(stand_in: list[str], tmp_path: Path) -> None:
    async with started(stand_in, tmp_path) as client:
        with pytest.raises(AppServerExited) as exited:
            await client.request("die", timeout=WAIT)
        with pytest.raises(AppServerExited):
            await client.wait_for_notification("never/sent", timeout=WAIT)
        with pytest.raises(AppServerExited):
            await client.request("flush", timeout=WAIT)
        seen = []
        with pytest.raises(AppServerExited):
            async for notification in client.notifications():
                seen.append(notification.method)

    assert seen == [notification.method for notification in client.received] == ["client/notified"]
    assert exited.value.returncode == 3
    assert "stand-in: dying on request" in exited.value.stderr_tail


@pytest.mark.skipif(os.name != "posix", reason="signals")
async def test_close_terminates_a_server_that_ignores_eof(stand_in: list[str], tmp_path: Path) -> None:
    client = await AppServerClient.start(
        codex=stand_in, codex_home=tmp_path, cwd=tmp_path, env={**os.environ, "STAND_IN_IGNORES_EOF": "1"}
    )

    returncode = await client.close(timeout=0.2)  # the bound under test: EOF ignored, then SIGTERM

    assert returncode == -signal.SIGTERM
    assert client.exited is not None


# -- the real Codex CLI ---------------------------------------------------------------

PROBE_MCP = r"""
import json, sys
log = open(sys.argv[1], "a", encoding="utf-8")
for line in sys.stdin:
    message = json.loads(line)
    log.write(line)
    log.flush()
    if "id" not in message:
        continue
    method = message["method"]
    if method == "initialize":
        result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "probe", "version": "0"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "lookup", "description": "Look a key up.",
                             "inputSchema": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}}]}
    elif method == "tools/call":
        key = message["params"]["arguments"]["key"]
        result = {"content": [{"type": "text", "text": json.dumps({"key": key, "request_id": "rq_0123"})}]}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": method}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"""

MODEL_RULES = r"""
[[rules.plain]]
id = "greet"
when = [{ user_text = { contains = "say hello", last = true } }]
emit = [
  { message = { phase = "commentary", text = "Saying hello." } },
  { message = { phase = "final_answer", text = "Hello — from the scripted model ✓" } },
]

[[rules.held]]
id = "after-steer"
when = [{ user_text = { contains = "steered:", last = true } }]
emit = [{ message = { phase = "final_answer", text = "saw the steer" } }]

[[rules.held]]
id = "slow"
when = [{ user_text = { contains = "work slowly", last = true } }]
hold = "slow"
emit = [{ message = { phase = "final_answer", text = "finished slowly" } }]

[[rules.held]]
id = "recall-injected"
when = [
  { user_text = { contains = "what did B say", last = true } },
  { envelope = { type = "MESSAGE", matches = 'Payload:\n(?P<payload>.+)' } },
]
emit = [{ message = { phase = "final_answer", text = "B said: ${payload}" } }]

[[rules.held]]
id = "greet"
when = [{ user_text = { contains = "say hello", last = true } }]
emit = [{ message = { phase = "final_answer", text = "hello" } }]

[[rules.tools]]
id = "use-result"
when = [{ tool_output = { tool = "lookup", namespace = "mcp__peerwire", last = true, json = { request_id = "request_id" } } }]
emit = [{ message = { phase = "final_answer", text = "lookup gave ${request_id}" } }]

[[rules.tools]]
id = "call-lookup"
when = [{ user_text = { contains = "look it up", last = true } }]
emit = [{ function_call = { namespace = "mcp__peerwire", name = "lookup", arguments = { key = "clé\nzwei" }, call_id = "call_lookup_1" } }]
"""


@dataclass
class CodexAgent:
    """A private CODEX_HOME projected for one scripted-model route, a git workspace, a probe MCP server."""

    codex_home: Path
    workspace: Path
    env: dict[str, str]
    mcp_log: Path

    def mcp_messages(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.mcp_log.read_text(encoding="utf-8").splitlines()]


AgentFactory = Callable[[str], CodexAgent]


@pytest.fixture(scope="session")
def codex_bin() -> Path:
    # The pinned install (or PEERWIRE_CODEX), version-checked: a missing CLI fails, never skips.
    return locate_codex().executable


@pytest.fixture
def model(tmp_path: Path) -> Iterator[ScriptedModel]:
    with ScriptedModel(
        script_from_document(tomllib.loads(MODEL_RULES)), log_path=tmp_path / "model.jsonl"
    ) as running:
        yield running


@pytest.fixture
def agent_factory(tmp_path: Path, model: ScriptedModel) -> Iterator[AgentFactory]:
    projections: list[Projection] = []

    def make(route: str) -> CodexAgent:
        workspace = tmp_path / f"{route}-workspace"
        workspace.mkdir()
        subprocess.run(["git", "init", "-q", str(workspace)], check=True, timeout=WAIT)
        probe = tmp_path / "probe_mcp.py"
        probe.write_text(PROBE_MCP, encoding="utf-8")
        mcp_log = tmp_path / f"{route}-mcp.jsonl"
        mcp_log.touch()
        provider = ScriptedProvider(base_url=model.base_url(route))
        # The probe stands in for `peerwire mcp serve`, registered under the same name.
        server = PeerwireServer(
            command=sys.executable,
            args=(str(probe), str(mcp_log)),
            env={"PEERWIRE_HOME": str(tmp_path / "peerwire-home"), "PEERWIRE_SESSION_ID": f"session-{route}"},
            approve_tools=("lookup",),
        )
        codex_home = tmp_path / f"{route}-codex-home"
        projections.append(Projection(codex_home, AgentSettings(workspace, server, provider)).apply())
        env = {**os.environ, provider.env_key: "scripted-model-key"}
        return CodexAgent(codex_home, workspace, env, mcp_log)

    yield make
    for projection in projections:
        projection.restore()


async def run_turn(client: AppServerClient, thread_id: str, text: str) -> dict[str, Any]:
    mark = len(client.received)
    turn = (await client.turn_start(thread_id, text, timeout=WAIT))["turn"]
    completed = await client.wait_for_notification(
        "turn/completed", lambda p: p["turn"]["id"] == turn["id"], since=mark, timeout=WAIT
    )
    return completed.params["turn"]


def started_options(agent: CodexAgent) -> dict[str, Any]:
    return {
        "codex_home": agent.codex_home,
        "cwd": agent.workspace,
        "env": agent.env,
        "stderr_path": agent.codex_home / "app-server.stderr",
    }


@pytest.mark.codex
def test_exec_prints_the_scripted_final_answer(
    codex_bin: Path, agent_factory: AgentFactory, model: ScriptedModel
) -> None:
    agent = agent_factory("plain")

    # --strict-config: Codex refuses any key of the projected config it does not know.
    finished = subprocess.run(
        [str(codex_bin), "exec", "--strict-config", "say hello"],
        cwd=agent.workspace,
        env={**agent.env, "CODEX_HOME": str(agent.codex_home)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=WAIT,
    )

    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.strip() == "Hello — from the scripted model ✓"
    (exchange,) = model.exchanges
    assert (exchange.rule_id, exchange.outcome) == ("greet", "answered")
    body = exchange.body
    assert (body["model"], body["stream"], body["reasoning"]["effort"]) == ("peerwire-scripted", True, "low")
    assert body["input"][-1] == {
        "type": "message",
        "id": body["input"][-1]["id"],
        "role": "user",
        "content": [{"type": "input_text", "text": "say hello"}],
    }
    (namespace,) = [tool for tool in body["tools"] if tool.get("name") == "mcp__peerwire"]
    assert namespace["type"] == "namespace"
    assert [(tool["type"], tool["name"]) for tool in namespace["tools"]] == [("function", "lookup")]
    assert namespace["tools"][0]["parameters"]["required"] == ["key"]
    assert "authorization" not in exchange.headers


@pytest.mark.codex
async def test_a_turn_reports_started_items_with_phase_and_completed(
    codex_bin: Path, agent_factory: AgentFactory, tmp_path: Path
) -> None:
    agent = agent_factory("plain")
    async with started([str(codex_bin)], tmp_path, **started_options(agent)) as client:
        thread = (await client.thread_start(cwd=agent.workspace, timeout=WAIT))["thread"]

        turn = await run_turn(client, thread["id"], "say hello")

    assert turn["status"] == "completed"
    started_ = [n for n in client.received if n.method == "turn/started"]
    assert [n.params["turn"]["id"] for n in started_] == [turn["id"]]
    messages = [
        n.params["item"]
        for n in client.received
        if n.method == "item/completed" and n.params["item"]["type"] == "agentMessage"
    ]
    assert [(m["phase"], m["text"]) for m in messages] == [
        ("commentary", "Saying hello."),
        ("final_answer", "Hello — from the scripted model ✓"),
    ]
    sent = [e["message"]["method"] for e in client.transcript.entries if e["dir"] == "sent"]
    assert sent == ["initialize", "initialized", "thread/start", "turn/start"]


@pytest.mark.codex
async def test_steer_reaches_the_active_turn_only_with_its_turn_id(
    codex_bin: Path, agent_factory: AgentFactory, model: ScriptedModel, tmp_path: Path
) -> None:
    agent = agent_factory("held")
    async with started([str(codex_bin)], tmp_path, **started_options(agent)) as client:
        thread_id = (await client.thread_start(cwd=agent.workspace, timeout=WAIT))["thread"]["id"]
        mark = len(client.received)
        turn_id = (await client.turn_start(thread_id, "work slowly", timeout=WAIT))["turn"]["id"]
        await anyio.to_thread.run_sync(lambda: model.wait_for_hold("slow", timeout=WAIT))

        with pytest.raises(JsonRpcError) as wrong:
            await client.turn_steer(thread_id, "not-the-active-turn", "steered: wrong", timeout=WAIT)
        steered = await client.turn_steer(thread_id, turn_id, text_input("steered: faster"), timeout=WAIT)
        model.release("slow")
        completed = await client.wait_for_notification("turn/completed", since=mark, timeout=WAIT)

    assert wrong.value.code == -32600
    assert wrong.value.message == f"expected active turn id `not-the-active-turn` but found `{turn_id}`"
    assert steered == {"turnId": turn_id}
    assert completed.params["turn"]["status"] == "completed"
    # Codex drops the in-flight answer and asks again with the steer appended.
    last_request = model.exchanges[-1]
    assert last_request.rule_id == "after-steer"
    assert last_request.input_items()[-1]["content"] == [{"type": "input_text", "text": "steered: faster"}]
    finals = [i["text"] for i in completed.params["turn"]["items"] if i.get("phase") == "final_answer"]
    assert finals == ["saw the steer"]


@pytest.mark.codex
async def test_interrupt_ends_the_active_turn_and_a_later_steer_is_stale(
    codex_bin: Path, agent_factory: AgentFactory, model: ScriptedModel, tmp_path: Path
) -> None:
    agent = agent_factory("held")
    async with started([str(codex_bin)], tmp_path, **started_options(agent)) as client:
        thread_id = (await client.thread_start(cwd=agent.workspace, timeout=WAIT))["thread"]["id"]
        mark = len(client.received)
        turn_id = (await client.turn_start(thread_id, "work slowly", timeout=WAIT))["turn"]["id"]
        held = await anyio.to_thread.run_sync(lambda: model.wait_for_hold("slow", timeout=WAIT))

        assert await client.turn_interrupt(thread_id, turn_id, timeout=WAIT) == {}
        completed = await client.wait_for_notification("turn/completed", since=mark, timeout=WAIT)
        with pytest.raises(JsonRpcError) as stale:
            await client.turn_steer(thread_id, turn_id, "steered: too late", timeout=WAIT)

    assert completed.params["turn"]["id"] == turn_id
    assert completed.params["turn"]["status"] == "interrupted"
    assert (stale.value.code, stale.value.message) == (-32600, "no active turn to steer")
    # Codex hung up on the held model request.
    finished = await anyio.to_thread.run_sync(
        lambda: model.wait_for_exchange(lambda e: e.seq == held.seq, timeout=WAIT)
    )
    assert finished.outcome == "disconnected"


@pytest.mark.codex
async def test_injected_items_join_the_history_without_starting_a_turn(
    codex_bin: Path, agent_factory: AgentFactory, model: ScriptedModel, tmp_path: Path
) -> None:
    agent = agent_factory("held")
    envelope = "Message Type: MESSAGE\nSender: B (agent-b)\nPayload:\nthe build is green ✓"
    injected = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": envelope}]}
    async with started([str(codex_bin)], tmp_path, **started_options(agent)) as client:
        thread_id = (await client.thread_start(cwd=agent.workspace, timeout=WAIT))["thread"]["id"]
        await run_turn(client, thread_id, "say hello")  # a thread with history
        mark, requests = len(client.received), len(model.exchanges)

        assert await client.thread_inject_items(thread_id, [injected], timeout=WAIT) == {}
        # The next turn is the only thing that makes Codex call the model again.
        turn = await run_turn(client, thread_id, "what did B say?")

    turn_starts = [n for n in client.received[mark:] if n.method == "turn/started"]
    assert [n.params["turn"]["id"] for n in turn_starts] == [turn["id"]]
    assert len(model.exchanges) == requests + 1
    new_input = model.exchanges[-1].input_items()
    assert [item.get("content") for item in new_input[-2:]] == [
        injected["content"],
        [{"type": "input_text", "text": "what did B say?"}],
    ]
    assert [i["text"] for i in turn["items"] if i.get("phase") == "final_answer"] == [
        "B said: the build is green ✓"
    ]


@pytest.mark.codex
async def test_an_mcp_tool_call_round_trips_with_codex_call_metadata(
    codex_bin: Path, agent_factory: AgentFactory, model: ScriptedModel, tmp_path: Path
) -> None:
    agent = agent_factory("tools")
    async with started([str(codex_bin)], tmp_path, **started_options(agent)) as client:
        thread_id = (await client.thread_start(cwd=agent.workspace, timeout=WAIT))["thread"]["id"]
        turn = await run_turn(client, thread_id, "please look it up")

    assert [i["text"] for i in turn["items"] if i.get("phase") == "final_answer"] == ["lookup gave rq_0123"]
    (tool_item,) = [
        n.params["item"]
        for n in client.received
        if n.method == "item/completed" and n.params["item"]["type"] == "mcpToolCall"
    ]
    assert (tool_item["server"], tool_item["tool"], tool_item["status"]) == (
        "peerwire",
        "lookup",
        "completed",
    )
    assert tool_item["arguments"] == {"key": "clé\nzwei"}
    (call,) = [m for m in agent.mcp_messages() if m.get("method") == "tools/call"]
    assert call["params"]["arguments"] == {"key": "clé\nzwei"}
    meta = call["params"]["_meta"]
    assert meta["callId"] == "call_lookup_1"
    turn_metadata = meta["x-codex-turn-metadata"]
    assert (turn_metadata["thread_id"], turn_metadata["turn_id"]) == (thread_id, turn["id"])
    assert turn_metadata["model"] == "peerwire-scripted"
    # The model's next request carries the output, tied to the call by call_id.
    output = model.exchanges[-1].input_items()[-1]
    assert (output["type"], output["call_id"]) == ("function_call_output", "call_lookup_1")


@pytest.mark.codex
async def test_a_request_no_rule_matches_fails_the_turn_once(
    codex_bin: Path, agent_factory: AgentFactory, model: ScriptedModel, tmp_path: Path
) -> None:
    agent = agent_factory("plain")
    async with started([str(codex_bin)], tmp_path, **started_options(agent)) as client:
        thread_id = (await client.thread_start(cwd=agent.workspace, timeout=WAIT))["thread"]["id"]
        turn = await run_turn(client, thread_id, "something nobody scripted")

    assert turn["status"] == "failed"
    assert "scripted model: no rule of agent 'plain' matches" in turn["error"]["message"]
    assert [e.outcome for e in model.exchanges] == ["unexpected"]  # no retry
