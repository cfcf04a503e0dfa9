"""The messaging contract's own rules on the wire, stricter than JSON-RPC 2.0 and MCP.

The protocol profile (``test_protocol.py``) holds a server to what JSON-RPC 2.0
and MCP say; these hold a messaging server to what the contract adds: specific
error codes for hostile input where the specs only ask for an answer, NaN
refused although a parser may accept it, batches refused where the negotiated
revision has none. Whether the server survived is asked with ``ping`` and
``tools/list``, never with a messaging tool.
"""

from __future__ import annotations

import json
from typing import Any

from harness.contract.endpoints import CLIENT_INFO
from harness.contract.fixtures import call_s, tool_call
from harness.contract.manifest import requirement
from harness.contract.schemas import TOOL_NAMES
from harness.contract.stdio import StdioServer
from harness.contract.wire import answer_to, fence, listed_tools, shown


def _error_for(server: StdioServer, raw: bytes, ids: tuple[Any, ...] = (None,)) -> dict:
    """Send ``raw`` and return the error response carrying one of ``ids``."""
    response = answer_to(server, raw, ids, "an error")
    assert "error" in response, f"sent {shown(raw)}; expected an error; it was answered with a result: {response}"
    return response


def _fence(server: StdioServer, label: str) -> set[str]:
    return fence(server, label)


@requirement("wire:initialize:no-home")
def test_discovery_needs_no_caller_environment(servers):
    endpoint = servers.start(env=servers.bare_env(), handshake=False)
    endpoint.handshake()
    listed = endpoint.server.call("tools/list", {}, timeout=call_s())
    names = [t.get("name") for t in listed.get("result", {}).get("tools", [])]
    assert set(TOOL_NAMES) <= set(names), f"tools/list without a caller environment: {listed}"


@requirement("wire:params:invalid")
def test_invalid_tools_call_params(servers):
    server = servers.start().server
    for params in ([1, 2], {}, {"name": 5}, {"name": "no_such_tool", "arguments": {}},
                   {"name": "list_agents", "arguments": [1]}, {"name": "list_agents", "arguments": "x"}):
        response = server.call("tools/call", params, timeout=call_s())
        assert response.get("error", {}).get("code") == -32602, f"params {json.dumps(params)}: {response}"


@requirement("wire:server:survives")
def test_server_survives_hostile_input(servers):
    endpoint = servers.start()
    server = endpoint.server
    for raw in (b"", b"   ", b"\x00\x01\x02", b"[" * 100_000, b'{"a":' * 50_000, b"x" * 1_000_000,
                b'{"jsonrpc": "2.0", "id": "big", "method": "ping", "params": {"pad": "' + b"y" * 500_000 + b'"}}',
                b"[]", b"{}", b"null", b'{"jsonrpc": "2.0", "result": {}, "id": 99}'):
        server.send_line(raw)
    outcome = tool_call(endpoint, "send_message", {"target": "nobody-at-all", "message": "z" * 200_000})
    assert outcome.response is not None, outcome.failure
    _fence(server, "survival")
    assert server.alive(), f"the server exited; {server.stderr_tail()}"
    assert set(TOOL_NAMES) <= {t.get("name") for t in listed_tools(server)}, "tools/list after the barrage"


def _never_internal(response: dict, what: str) -> None:
    """A client-caused failure is the client's error, never -32603 or a tool error ``internal``."""
    assert response.get("error", {}).get("code") != -32603, f"{what}: -32603 for the client's own input: {response}"
    result = response.get("result")
    if isinstance(result, dict) and result.get("isError"):
        code = (result.get("structuredContent") or {}).get("error", {}).get("code")
        assert code != "internal", f"{what}: tool error internal for the client's own input: {response}"


def _still_answers(server: StdioServer, label: str) -> None:
    assert server.alive(), f"the server exited; {server.stderr_tail()}"
    _fence(server, label)
    stray = server.stray_lines()
    assert not stray, f"stdout carried a line that is not JSON-RPC in valid UTF-8: {stray[0].raw[:200]!r}"


LONE = "\ud800"
"""A lone high surrogate: a valid JSON escape, but no Unicode text."""


@requirement("wire:unicode:lone-surrogate")
def test_lone_surrogates_anywhere_are_answered(servers):
    endpoint = servers.start()
    server = endpoint.server
    escaped = json.dumps(LONE)  # "\ud800" as a JSON escape
    raw = '"\udc80x"'.encode("utf-8", "surrogatepass")  # the raw bytes ED B2 80: not UTF-8 at all
    cases = [
        ("id", f'{{"jsonrpc":"2.0","id":{escaped},"method":"ping"}}'.encode(), None),
        ("method", f'{{"jsonrpc":"2.0","id":"m","method":{escaped}}}'.encode(), "m"),
        ("tool name", f'{{"jsonrpc":"2.0","id":"n","method":"tools/call","params":{{"name":{escaped}}}}}'.encode(), "n"),
    ]
    for field in ("target", "message"):
        args = {"target": "nobody-at-all", "message": "x", field: f"a{LONE}b"}
        cases.append((field, json.dumps({"jsonrpc": "2.0", "id": field, "method": "tools/call",
                                         "params": {"name": "send_message", "arguments": args}}).encode(), field))
    for name, args in (("receive_messages", {"cursor": f"c1.{LONE}"}), ("reply", {
            "request_id": f"rq_{LONE}", "status": "done", "message": "m"})):
        cases.append((name, json.dumps({"jsonrpc": "2.0", "id": name, "method": "tools/call",
                                        "params": {"name": name, "arguments": args}}).encode(), name))
    cases.append(("_meta.callId", json.dumps({"jsonrpc": "2.0", "id": "meta", "method": "tools/call", "params": {
        "name": "list_agents", "arguments": {}, "_meta": {"callId": LONE}}}).encode(), "meta"))
    cases.append(("raw bytes in the id", b'{"jsonrpc":"2.0","id":' + raw + b',"method":"ping"}', None))
    cases.append(("raw bytes in a target", b'{"jsonrpc":"2.0","id":"rb","method":"tools/call","params":{"name":'
                  b'"send_message","arguments":{"target":' + raw + b',"message":"x"}}}', "rb"))
    for what, line, msg_id in cases:
        if msg_id is None:  # the id itself is not text: refused with id null, or echoed as it came (RFC 8259 § 8.2)
            response = answer_to(server, line, (None, LONE), f"{what}: -32600 with id null, or the id echoed")
            _never_internal(response, what)
            assert "error" in response, f"{what}: sent {shown(line)}; it was answered as a request: {response}"
        else:
            # Raw bytes that are not UTF-8 may be refused before the id is read (-32700, id null), or read
            # leniently; either way the answer is an error, never an acceptance.
            response = answer_to(server, line, (msg_id, None), f"{what}: an error or a tool error")
            _never_internal(response, what)
            assert "error" in response or response["result"].get("isError") is True, \
                f"{what}: sent {shown(line)}; text that is not Unicode was accepted: {response}"
    _still_answers(server, "surrogates")


@requirement("wire:json:non-finite")
def test_nan_and_infinity_are_not_json(servers):
    server = servers.start().server
    for token in (b"NaN", b"Infinity", b"-Infinity"):
        line = (b'{"jsonrpc":"2.0","id":"nf","method":"tools/call","params":{"name":"receive_messages",'
                b'"arguments":{"limit":' + token + b'}}}')
        response = _error_for(server, line, ("nf", None))
        assert response["error"].get("code") == -32700, f"{token!r} is not JSON; expected -32700: {response}"
    _still_answers(server, "non-finite")


@requirement("wire:nesting:deep")
def test_deep_nesting_gets_a_clear_error(servers):
    server = servers.start().server
    for depth in (200, 985, 1000, 5000):
        target = "[" * depth + '"x"' + "]" * depth
        line = ('{"jsonrpc":"2.0","id":"deep-%d","method":"tools/call","params":{"name":"send_message",'
                '"arguments":{"target":%s,"message":"x"}}}' % (depth, target)).encode()
        response = answer_to(server, line, (f"deep-{depth}", None), f"an error for a target nested {depth} deep")
        _never_internal(response, f"nested {depth} deep")
        assert "error" in response or response["result"].get("isError") is True, \
            f"a target nested {depth} deep was accepted: {response}"
    _still_answers(server, "deep")


def _initialized(servers, version: str) -> tuple[StdioServer, str]:
    """A server after the handshake asking for ``version``, and the revision it negotiated."""
    endpoint = servers.start(handshake=False)
    answer = endpoint.initialize(version)
    assert "result" in answer, f"initialize {version}: {answer}"
    endpoint.server.notify("notifications/initialized")
    return endpoint.server, answer["result"].get("protocolVersion")


@requirement("wire:batch:by-revision")
def test_batches_are_refused_where_the_revision_has_none(servers):
    batch = [{"jsonrpc": "2.0", "id": "b1", "method": "ping"},
             {"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": "b2", "method": "tools/call", "params": {"name": "list_agents", "arguments": {}}},
             {"jsonrpc": "2.0", "id": "b3", "method": "peerwire/no-such-method"}]
    for version in ("2025-06-18", "2025-11-25"):
        strict, negotiated = _initialized(servers, version)
        response = _error_for(strict, json.dumps(batch).encode())
        assert response["error"].get("code") == -32600, f"{version} has no batches: {response}"
        _fence(strict, f"batch-{version}")
        assert not strict.responses_to("b1") and not strict.responses_to("b2"), \
            f"{version}: a refused batch must run nothing: {strict.responses_to('b1') + strict.responses_to('b2')}"


@requirement("wire:revision:discover")
def test_server_discover_is_answered(servers):
    """The official Python SDK's automatic mode probes ``server/discover`` before anything else."""
    endpoint = servers.start(handshake=False)
    server = endpoint.server
    envelope = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": CLIENT_INFO}
    answer = endpoint.first_request("server/discover", {"_meta": envelope})
    _never_internal(answer, "server/discover")
    if "error" in answer:
        # A handshake-only server: the probing client falls back to initialize, which must work.
        assert answer["error"]["code"] in (-32601, -32022), f"refuse server/discover so a client falls back: {answer}"
        fallback = server.call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                              "clientInfo": CLIENT_INFO}, timeout=call_s())
        assert "result" in fallback, f"initialize after a refused server/discover: {fallback}"
        return
    result = answer["result"]
    versions = result.get("supportedVersions")
    assert isinstance(versions, list) and versions, f"supportedVersions: {result}"
    assert result.get("resultType") == "complete" and isinstance(result.get("capabilities"), dict), result
    assert isinstance(result.get("ttlMs"), int) and result.get("cacheScope") in ("public", "private"), result
    if "2026-07-28" in versions:
        listed = server.call("tools/list", {"_meta": envelope}, timeout=call_s())
        tools = listed.get("result", {})
        assert set(TOOL_NAMES) <= {t.get("name") for t in tools.get("tools", [])}, listed
        assert tools.get("resultType") == "complete" and "ttlMs" in tools and "cacheScope" in tools, listed
        called = server.call("tools/call", {"name": "list_agents", "arguments": {}, "_meta": envelope},
                             timeout=call_s())
        assert called.get("result", {}).get("resultType") == "complete", called
        wrong = server.call("tools/list", {"_meta": {**envelope, "io.modelcontextprotocol/protocolVersion":
                                                     "1999-01-01"}}, timeout=call_s())
        assert wrong.get("error", {}).get("code") == -32022, f"an unsupported revision is -32022: {wrong}"
