"""JSON-RPC on stdio, through the suite's raw client: framing, errors, notifications, ids.

Where the absence of a response is the point, the check sends requests after
it as a fence and waits for their answers: by then anything answering the
notification would have arrived (the server reads its input in order).
"""

from __future__ import annotations

import json
from concurrent.futures import FIRST_COMPLETED, wait
from typing import Any

from harness.contract.endpoints import CLIENT_INFO
from harness.contract.fixtures import tool_call
from harness.contract.manifest import requirement
from harness.contract.schemas import TOOL_NAMES
from harness.contract.stdio import StdioServer

BOUND_S = 10.0
KNOWN_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


def _error_for(server: StdioServer, raw: bytes, ids: tuple[Any, ...] = (None,)) -> dict:
    """Send ``raw`` and return the error response carrying one of ``ids``."""
    futures = [server.expect_response(i) for i in ids]
    server.send_line(raw)
    done, _ = wait(futures, timeout=BOUND_S, return_when=FIRST_COMPLETED)
    assert done, f"no response to {raw[:80]!r} within {BOUND_S}s; {server.stderr_tail()}"
    response = next(iter(done)).result()
    assert "error" in response, f"{raw[:80]!r} was answered with a result: {response}"
    return response


def _fence(server: StdioServer, label: str) -> set[str]:
    """Two pings answered in turn: everything sent before them has been read. Returns their ids."""
    ids = {f"fence-{label}-{n}" for n in (1, 2)}
    for msg_id in sorted(ids):
        _, future = server.request("ping", msg_id=msg_id)
        response = future.result(BOUND_S)
        assert response.get("result") == {}, f"ping {msg_id} answered {response}"
    return ids


@requirement("wire:initialize:handshake")
def test_initialize_handshake(servers):
    server = servers.start(handshake=False).server
    response = server.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                          "clientInfo": CLIENT_INFO}, timeout=BOUND_S)
    result = response.get("result")
    assert isinstance(result, dict), f"initialize failed: {response}"
    assert result.get("protocolVersion") in KNOWN_VERSIONS, result
    assert isinstance(result.get("capabilities", {}).get("tools"), dict), f"no tools capability: {result}"
    info = result.get("serverInfo")
    assert isinstance(info, dict) and info.get("name") and info.get("version"), f"serverInfo: {info}"

    other = servers.start(handshake=False).server
    answer = other.call("initialize", {"protocolVersion": "1999-01-01", "capabilities": {},
                                       "clientInfo": CLIENT_INFO}, timeout=BOUND_S)
    assert answer.get("result", {}).get("protocolVersion") in KNOWN_VERSIONS, \
        f"an unsupported requested version must be answered with one the server supports: {answer}"


@requirement("wire:initialize:no-home")
def test_discovery_needs_no_caller_environment(servers):
    endpoint = servers.start(env=servers.bare_env(), handshake=False)
    endpoint.handshake()
    listed = endpoint.server.call("tools/list", {}, timeout=BOUND_S)
    names = [t.get("name") for t in listed.get("result", {}).get("tools", [])]
    assert set(TOOL_NAMES) <= set(names), f"tools/list without a caller environment: {listed}"


@requirement("wire:ping")
def test_ping(servers):
    server = servers.start().server
    request, future = server.request("ping", msg_id="ping-1")
    response = future.result(BOUND_S)
    assert response == {"jsonrpc": "2.0", "id": "ping-1", "result": {}}, f"{request} -> {response}"


@requirement("wire:json:parse-error")
def test_malformed_json_is_a_parse_error(servers):
    server = servers.start().server
    for raw in (b'{"jsonrpc": "2.0", "id": 1, "method": "ping"', b"not json at all", b"\xff\xfe\x00 not utf-8",
                b'{"jsonrpc": "2.0", "id": 1, "method": "ping",}'):
        response = _error_for(server, raw)
        assert response["error"].get("code") == -32700, f"{raw!r}: {response}"
        assert response.get("id") is None, f"{raw!r}: a parse error's id is null: {response}"


@requirement("wire:request:invalid")
def test_invalid_requests(servers):
    server = servers.start().server
    cases = [
        (b"42", (None,)),
        (b'"a string"', (None,)),
        (b'{"id": 7, "method": "ping"}', (7, None)),
        (b'{"jsonrpc": "1.0", "id": 8, "method": "ping"}', (8, None)),
        (b'{"jsonrpc": "2.0", "id": 9}', (None,)),
        (b'{"jsonrpc": "2.0", "id": 10, "method": 42}', (None,)),
        (b'{"jsonrpc": "2.0", "id": 11, "method": null}', (None,)),
        (b'{"jsonrpc": "2.0", "id": 12, "method": ["ping"]}', (None,)),
        (b'{"jsonrpc": "2.0", "id": {"nested": true}, "method": "ping"}', (None,)),
    ]
    for raw, ids in cases:
        response = _error_for(server, raw, ids)
        assert response["error"].get("code") == -32600, f"{raw!r}: {response}"


@requirement("wire:method:unknown")
def test_unknown_method(servers):
    server = servers.start().server
    for method in ("peerwire/no-such-method", "tools/unknown"):
        response = server.call(method, {}, timeout=BOUND_S)
        assert response.get("error", {}).get("code") == -32601, f"{method}: {response}"


@requirement("wire:params:invalid")
def test_invalid_tools_call_params(servers):
    server = servers.start().server
    for params in ([1, 2], {}, {"name": 5}, {"name": "no_such_tool", "arguments": {}},
                   {"name": "list_agents", "arguments": [1]}, {"name": "list_agents", "arguments": "x"}):
        response = server.call("tools/call", params, timeout=BOUND_S)
        assert response.get("error", {}).get("code") == -32602, f"params {json.dumps(params)}: {response}"


@requirement("wire:notification:no-response")
def test_notifications_are_never_answered(servers):
    server = servers.start().server
    seen = len(server.lines)
    server.notify("notifications/initialized")
    server.notify("notifications/cancelled", {"requestId": 424242, "reason": "never sent"})
    server.notify("notifications/peerwire-unknown", {"x": 1})
    server.notify("notifications/initialized", [1, 2])
    server.send_line(b'{"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "list_agents"}}')
    fence = _fence(server, "notification")
    extra = [ln.raw for ln in server.lines[seen:]
             if not (ln.is_json_rpc and isinstance(ln.message, dict) and ln.message.get("id") in fence)]
    assert not extra, f"notifications were answered: {extra[:3]}"


@requirement("wire:response:exactly-one")
def test_every_request_gets_exactly_one_response(servers):
    server = servers.start().server
    requests = [
        ("a-1", "ping", None), (2, "ping", None), ("tl", "tools/list", {}),
        (3, "tools/call", {"name": "list_agents", "arguments": {}}),
        ("slow", "tools/call", {"name": "wait_agent", "arguments": {"timeout_ms": 300}}),
        (4, "tools/call", {"name": "receive_messages", "arguments": {"timeout_ms": 100}}),
        (5, "peerwire/no-such-method", {}), ("5", "ping", None), (0, "ping", None), (-1, "ping", None),
        (2 ** 53, "ping", None), ("", "ping", None),
    ]
    futures = {}
    for msg_id, method, params in requests:
        _, futures[json.dumps(msg_id)] = server.request(method, params, msg_id=msg_id)
    done, pending = wait(list(futures.values()), timeout=BOUND_S)
    assert not pending, f"{len(pending)} requests got no response; {server.stderr_tail()}"
    _fence(server, "exactly-one")
    for msg_id, method, _ in requests:
        answers = server.responses_to(msg_id)
        assert len(answers) == 1, f"id {msg_id!r} ({method}) got {len(answers)} responses: {answers}"
        assert type(answers[0]["id"]) is type(msg_id), f"id {msg_id!r} came back as {answers[0]['id']!r}"


@requirement("wire:stdout:json-rpc-only")
def test_stdout_carries_only_json_rpc(servers):
    endpoint = servers.start()
    server = endpoint.server
    server.call("tools/list", {}, timeout=BOUND_S)
    tool_call(endpoint, "list_agents", {})
    tool_call(endpoint, "send_message", {"target": "nobody-at-all", "message": "x"})
    server.send_line(b"garbage")
    _fence(server, "stdout")
    server.close()
    stray = server.stray_lines()
    assert not stray, f"stdout carried {len(stray)} non-JSON-RPC lines, first: {stray[0].raw[:200]!r}"


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
    outcome = tool_call(endpoint, "list_agents", {})
    assert outcome.result is not None and not outcome.is_error, f"list_agents after the barrage: {outcome.response}"


def _never_internal(response: dict, what: str) -> None:
    """A client-caused failure is the client's error, never -32603 or a tool error ``internal``."""
    assert response.get("error", {}).get("code") != -32603, f"{what}: -32603 for the client's own input: {response}"
    result = response.get("result")
    if isinstance(result, dict) and result.get("isError"):
        code = (result.get("structuredContent") or {}).get("error", {}).get("code")
        assert code != "internal", f"{what}: tool error internal for the client's own input: {response}"


def _answered(server: StdioServer, msg_id: Any, raw: bytes, what: str) -> dict:
    future = server.expect_response(msg_id)
    server.send_line(raw)
    try:
        response = future.result(BOUND_S)
    except TimeoutError:
        raise AssertionError(f"{what}: no answer within {BOUND_S}s to {raw[:120]!r}; {server.stderr_tail()}") from None
    _never_internal(response, what)
    return response


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
                  b'"send_message","arguments":{"target":' + raw + b',"message":"x"}}}', None))
    for what, line, msg_id in cases:
        if msg_id is None:
            response = _error_for(server, line)
            _never_internal(response, what)
        else:
            response = _answered(server, msg_id, line, what)
            assert "error" in response or response["result"].get("isError") is True, \
                f"{what}: text that is not Unicode was accepted: {response}"
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
        future, fallback = server.expect_response(f"deep-{depth}"), server.expect_response(None)
        server.send_line(line)
        done, _ = wait([future, fallback], timeout=BOUND_S, return_when=FIRST_COMPLETED)
        assert done, f"no answer to a target nested {depth} deep within {BOUND_S}s; {server.stderr_tail()}"
        response = next(iter(done)).result()
        _never_internal(response, f"nested {depth} deep")
        assert "error" in response or response["result"].get("isError") is True, \
            f"a target nested {depth} deep was accepted: {response}"
    _still_answers(server, "deep")


def _initialized(servers, version: str) -> tuple[StdioServer, str]:
    """A server after the handshake asking for ``version``, and the revision it negotiated."""
    server = servers.start(handshake=False).server
    answer = server.call("initialize", {"protocolVersion": version, "capabilities": {}, "clientInfo": CLIENT_INFO},
                         timeout=BOUND_S)
    assert "result" in answer, f"initialize {version}: {answer}"
    server.notify("notifications/initialized")
    return server, answer["result"].get("protocolVersion")


@requirement("wire:batch:by-revision")
def test_batches_follow_the_negotiated_revision(servers):
    batch = [{"jsonrpc": "2.0", "id": "b1", "method": "ping"},
             {"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": "b2", "method": "tools/call", "params": {"name": "list_agents", "arguments": {}}},
             {"jsonrpc": "2.0", "id": "b3", "method": "peerwire/no-such-method"}]
    server, negotiated = _initialized(servers, "2025-03-26")
    if negotiated == "2025-03-26":  # the one revision with batches
        futures = {i: server.expect_response(i) for i in ("b1", "b2", "b3")}
        server.send(batch)
        answers = {i: f.result(BOUND_S) for i, f in futures.items()}
        assert "result" in answers["b1"] and "result" in answers["b2"], answers
        assert answers["b3"].get("error", {}).get("code") == -32601, answers
        line = next(ln for ln in server.lines if isinstance(ln.message, list))
        assert len(line.message) == 3, f"one batch answer holding the three responses: {line.raw[:300]!r}"
    for version in ("2025-06-18", "2025-11-25"):
        strict, _ = _initialized(servers, version)
        response = _error_for(strict, json.dumps(batch).encode())
        assert response["error"].get("code") == -32600, f"{version} has no batches: {response}"
        assert not strict.responses_to("b1"), f"{version}: a refused batch must run nothing"


@requirement("wire:revision:discover")
def test_server_discover_is_answered(servers):
    """The official Python SDK's automatic mode probes ``server/discover`` before anything else."""
    server = servers.start(handshake=False).server
    envelope = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": CLIENT_INFO}
    answer = server.call("server/discover", {"_meta": envelope}, timeout=BOUND_S)
    _never_internal(answer, "server/discover")
    if "error" in answer:
        # A handshake-only server: the probing client falls back to initialize, which must work.
        assert answer["error"]["code"] in (-32601, -32022), f"refuse server/discover so a client falls back: {answer}"
        fallback = server.call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                              "clientInfo": CLIENT_INFO}, timeout=BOUND_S)
        assert "result" in fallback, f"initialize after a refused server/discover: {fallback}"
        return
    result = answer["result"]
    versions = result.get("supportedVersions")
    assert isinstance(versions, list) and versions, f"supportedVersions: {result}"
    assert result.get("resultType") == "complete" and isinstance(result.get("capabilities"), dict), result
    assert isinstance(result.get("ttlMs"), int) and result.get("cacheScope") in ("public", "private"), result
    if "2026-07-28" in versions:
        listed = server.call("tools/list", {"_meta": envelope}, timeout=BOUND_S)
        tools = listed.get("result", {})
        assert set(TOOL_NAMES) <= {t.get("name") for t in tools.get("tools", [])}, listed
        assert tools.get("resultType") == "complete" and "ttlMs" in tools and "cacheScope" in tools, listed
        called = server.call("tools/call", {"name": "list_agents", "arguments": {}, "_meta": envelope},
                             timeout=BOUND_S)
        assert called.get("result", {}).get("resultType") == "complete", called
        wrong = server.call("tools/list", {"_meta": {**envelope, "io.modelcontextprotocol/protocolVersion":
                                                     "1999-01-01"}}, timeout=BOUND_S)
        assert wrong.get("error", {}).get("code") == -32022, f"an unsupported revision is -32022: {wrong}"
