"""The protocol profile: JSON-RPC 2.0 and MCP, against any MCP stdio server.

Nothing here needs a provisioner or calls a tool of the server's own unless
the run has consent (``--tool-call``, ``--call-tools read-only``; a provisioned
messaging target's own inert ``list_agents``). Whether the server survived is
asked with ``ping`` and ``tools/list``. Each test holds the server to the
sentence its requirement quotes, and to nothing stricter: where the spec lets
a server choose (a lenient parser, a 1.0 request object, an echoed id), every
allowed answer passes. A rule of one MCP revision is judged under the revision
the server negotiated, and is *not applicable* under another.
"""

from __future__ import annotations

import json
import pytest

from harness.contract.fixtures import call_s
from harness.contract.manifest import manifest, requirement
from harness.contract.stdio import response_id
from harness.contract.wire import (
    Rows,
    answer_to,
    call,
    consented_calls,
    declared,
    fence,
    listed_tools,
    log_notifications,
    note_error_ids,
    responses_since,
    schema_problem,
    settle,
    shown,
    since,
    unwelcome_notifications,
)

PUBLISHED = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


def _initialize(protocol, version: str) -> tuple[dict, object]:
    endpoint = protocol.start(handshake=False)
    return endpoint.initialize(version), endpoint


@requirement("wire:initialize:handshake")
def test_initialize_answers_with_capabilities_and_information(protocol):
    response, _ = _initialize(protocol, "2025-11-25")
    result = response.get("result")
    assert isinstance(result, dict), f"sent initialize (2025-11-25); expected a result; got {response}"
    assert isinstance(result.get("protocolVersion"), str), f"no protocolVersion string: {result}"
    assert isinstance(result.get("capabilities"), dict), f"no capabilities object: {result}"
    info = result.get("serverInfo")
    assert isinstance(info, dict) and isinstance(info.get("name"), str) and isinstance(info.get("version"), str), \
        f"serverInfo needs a name and a version: {info}"


@requirement("wire:initialize:version")
def test_version_negotiation(protocol):
    asked = {}
    # Every session is launched before any is asked: their start-ups overlap instead of adding up.
    launched = {version: protocol.start(handshake=False) for version in ("1999-01-01", *PUBLISHED)}
    for version, endpoint in launched.items():
        response = endpoint.initialize(version)
        answered = (response.get("result") or {}).get("protocolVersion")
        assert isinstance(answered, str), f"initialize asking for {version}: no protocolVersion in {response}"
        asked[version] = answered
    assert asked["1999-01-01"] != "1999-01-01", \
        f"asked for the unknown revision 1999-01-01, the server claimed to support it: {asked}"
    for version, answered in sorted(set(asked.items())):
        if answered == version or answered in asked:
            again = asked.get(answered)
        else:
            again = ((_initialize(protocol, answered)[0].get("result") or {}).get("protocolVersion"))
        assert again == answered, (f"asked for {version}, the server answered {answered}, so it supports "
                                   f"{answered}; asked for {answered} it must answer {answered}, not {again} "
                                   f"(all answers: {asked})")


@requirement("wire:ping")
def test_ping(protocol):
    server = protocol.start().server
    for msg_id in ("ping-1", 7):
        request, future = server.request("ping", msg_id=msg_id)
        response = future.result(call_s())
        assert response == {"jsonrpc": "2.0", "id": msg_id, "result": {}}, f"sent {request}; got {response}"


PARSE_ERRORS = (
    (b'{"jsonrpc": "2.0", "id": 1, "method": "ping"', ()),
    (b"not json at all", ()),
    (b"\xff\xfe\x00 not utf-8", ()),
    (b'{"jsonrpc": "2.0", "id": "tc", "method": "ping",}', ("tc",)),
    (b"{'jsonrpc': '2.0'}", ()),
)
"""Lines that are not JSON, and the request ids a lenient parser (RFC 8259 § 9) may still read in them."""


@requirement("wire:json:parse-error")
def test_malformed_json_is_a_parse_error(protocol, votes):
    server = protocol.start().server
    rows = Rows()
    for raw, lenient in PARSE_ERRORS:
        with rows.row(shown(raw, 60)):
            response = answer_to(server, raw, (None, *lenient), "-32700 (Parse error) with id null")
            if response_id(response) is not None:
                continue  # a lenient parser read the request in it, and answered it: allowed
            assert response.get("error", {}).get("code") == -32700, \
                f"sent {shown(raw)}; expected error -32700 (Parse error) with id null; got {response}"
    note_error_ids(votes, "wire:json:parse-error", server)
    rows.check()


INVALID_REQUESTS = (
    (b"42", ()),
    (b'"a string"', ()),
    (b'{"jsonrpc": "2.0", "id": 9}', (9,)),
    (b'{"jsonrpc": "2.0", "id": 10, "method": 42}', (10,)),
    (b'{"jsonrpc": "2.0", "id": 11, "method": null}', (11,)),
    (b'{"jsonrpc": "2.0", "id": 12, "method": ["ping"]}', (12,)),
    (b'{"jsonrpc": "2.0", "id": {"nested": true}, "method": "ping"}', ()),
)
"""Values that are not Request objects, and the id each one's request carries where it can be read: the answer
carries it (JSON-RPC 2.0 § 5: "the same as the value of the id member"), or null, since § 5 names Invalid Request
among the errors in detecting the id; with no readable id, null (or, from MCP 2025-11-25 on, no id)."""
ONE_POINT_ZERO = (b'{"id": 7, "method": "ping"}', b'{"jsonrpc": "1.0", "id": 8, "method": "ping"}')
"""Not 2.0 Request objects, which JSON-RPC 2.0 § 3 lets a server still handle as 1.0 ones."""


@requirement("wire:request:invalid")
def test_invalid_requests(protocol, votes):
    server = protocol.start().server
    rows = Rows()
    for raw, ids in INVALID_REQUESTS:
        expected = "-32600 (Invalid Request) with " + (f"id {ids[0]} or null" if ids else "id null")
        with rows.row(shown(raw, 60)):
            response = answer_to(server, raw, (*ids, None), expected)
            assert response.get("error", {}).get("code") == -32600, \
                f"sent {shown(raw)}; expected error {expected}; got {response}"
    for raw in ONE_POINT_ZERO:
        msg_id = json.loads(raw)["id"]
        with rows.row(shown(raw, 60)):
            response = answer_to(server, raw, (None, msg_id),
                                 "-32600 (Invalid Request), or an answer as a 1.0 request")
            if "error" in response:
                assert response["error"].get("code") == -32600, \
                    f"sent {shown(raw)}; an error must be -32600: {response}"
    note_error_ids(votes, "wire:request:invalid", server)
    rows.check()


@requirement("wire:method:unknown")
def test_unknown_method(protocol):
    server = protocol.start().server
    rows = Rows()
    for msg_id, method in ((1, "peerwire/no-such-method"), ("u2", "tools/unknown"), (3, "rpc.nothing")):
        raw = json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": {}}).encode()
        with rows.row(method):
            response = answer_to(server, raw, (msg_id,), "-32601 (Method not found) with the request's id")
            assert response.get("error", {}).get("code") == -32601, \
                f"sent {shown(raw)}; expected error -32601 (Method not found); got {response}"
    rows.check()


ODD_PARAMS = (
    ("tools/call", [1, 2]),
    ("tools/call", "x"),
    ("tools/call", {}),
    ("tools/call", {"name": 5}),
    ("tools/call", {"name": "no-such-tool-7f3a", "arguments": {}}),
    ("tools/call", {"name": "no-such-tool-7f3a", "arguments": [1]}),
    ("tools/list", [1]),
    ("tools/list", {"cursor": 12}),
    ("ping", [1]),
    ("initialize", {"protocolVersion": 5}),
)


@requirement("wire:request:answered")
def test_every_request_is_answered_whatever_its_params(protocol):
    server = protocol.start().server
    rows = Rows()
    for number, (method, params) in enumerate(ODD_PARAMS, start=1):
        msg_id = f"odd-{number}"
        raw = json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}).encode()
        with rows.row(f"{method} {json.dumps(params)}"):
            answer_to(server, raw, (msg_id, None), "a response (a result or an error) with the request's id")
    rows.check()
    fence(server, "answered")


@requirement("wire:notification:no-response")
def test_notifications_are_never_answered(protocol):
    server = protocol.start().server
    start = server.line_count
    server.notify("notifications/initialized")
    server.notify("notifications/cancelled", {"requestId": 424242, "reason": "never sent"})
    server.notify("notifications/peerwire-unknown", {"x": 1})
    server.notify("notifications/initialized", [1, 2])
    server.notify("notifications/roots/list_changed")
    server.send_line(b'{"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "no-such-tool-7f3a"}}')
    server.send_line(b'{"jsonrpc": "2.0", "method": "ping"}')
    ids = fence(server, "notification")
    answers = responses_since(server, start, ignore=ids)
    assert not answers, (f"notifications were answered (a response with a result or an error; the server's own "
                         f"notifications do not count): {[ln.raw[:200] for ln in answers[:3]]}")


ODD_IDS = ("a-1", 2, "5", 0, -1, 2 ** 53, "", "é-ü-🍎", "x" * 300, 2 ** 31)


@requirement("wire:response:exactly-one")
def test_every_request_gets_exactly_one_response(protocol):
    server = protocol.start().server
    requests = [(msg_id, "ping", None) for msg_id in ODD_IDS]
    requests += [("tl", "tools/list", {}), (5, "peerwire/no-such-method", {})]
    futures = {}
    for msg_id, method, params in requests:
        _, futures[json.dumps(msg_id)] = server.request(method, params, msg_id=msg_id)
    settled = settle(server, list(futures.values()), every=True)
    missing = [key[:40] for key, future in futures.items() if future in settled.pending]
    assert not missing, f"requests with ids {missing}: {settled.silence}; {server.stderr_tail(300)}"
    fence(server, "exactly-one")
    rows = Rows()
    for msg_id, method, _ in requests:
        with rows.row(f"id {json.dumps(msg_id)[:40]}"):
            answers = server.responses_to(msg_id)
            assert len(answers) == 1, f"({method}) got {len(answers)} responses: {answers}"
            assert type(answers[0]["id"]) is type(msg_id), f"came back as {answers[0]['id']!r}"
    rows.check()


LONE = "\ud800"


def _hostile_lines() -> list[tuple[str, bytes, tuple]]:
    """(what, line, the ids a response may carry): each a request whose answer is due."""
    raw_surrogate = '"\udc80x"'.encode("utf-8", "surrogatepass")  # bytes ED B2 80: not UTF-8
    deep = lambda n: "[" * n + "1" + "]" * n  # noqa: E731
    lines = [
        ("nested 3000 deep", f'{{"jsonrpc":"2.0","id":"deep","method":"ping","params":{{"a":{deep(3000)}}}}}'
         .encode(), ("deep", None)),
        ("nested 100000 deep", b'{"jsonrpc":"2.0","id":"deeper","method":"ping","params":{"a":' + b"[" * 100_000
         + b"]" * 100_000 + b"}}", ("deeper", None)),
        ("a line of 2 MB", b'{"jsonrpc":"2.0","id":"big","method":"ping","params":{"pad":"' + b"y" * 2_000_000
         + b'"}}', ("big", None)),
        ("a lone surrogate escape in the id", f'{{"jsonrpc":"2.0","id":{json.dumps(LONE)},"method":"ping"}}'.encode(),
         (LONE, None)),
        ("a lone surrogate escape in the params", json.dumps({"jsonrpc": "2.0", "id": "ls", "method": "ping",
                                                              "params": {"a": f"x{LONE}"}}).encode(), ("ls", None)),
        ("raw surrogate bytes in the params", b'{"jsonrpc":"2.0","id":"rb","method":"ping","params":{"a":'
         + raw_surrogate + b"}}", ("rb", None)),
        ("NaN in the params", b'{"jsonrpc":"2.0","id":"nan","method":"ping","params":{"a":NaN}}', ("nan", None)),
        ("-Infinity in the params", b'{"jsonrpc":"2.0","id":"inf","method":"ping","params":{"a":-Infinity}}',
         ("inf", None)),
        ("control characters in a string", json.dumps({"jsonrpc": "2.0", "id": "ctl", "method": "ping",
                                                       "params": {"a": "\x00\x01\x1f\x7f"}}).encode(), ("ctl", None)),
        ("a number of 400 digits", b'{"jsonrpc":"2.0","id":"huge","method":"ping","params":{"a":1' + b"0" * 400
         + b"}}", ("huge", None)),
    ]
    return lines


@requirement("wire:hostile:answered")
def test_hostile_requests_are_answered(protocol, votes):
    server = protocol.start().server
    rows = Rows()
    for what, raw, ids in _hostile_lines():
        with rows.row(what):
            answer_to(server, raw, ids, f"an answer to a request with {what}")
    note_error_ids(votes, "wire:hostile:answered", server)
    rows.check()
    fence(server, "hostile")


@requirement("wire:stdout:json-rpc-only")
def test_stdout_carries_only_json_rpc(protocol, votes):
    endpoint = protocol.start()
    server = endpoint.server
    listed_tools(server)
    for raw in (b"garbage", b'{"jsonrpc":"2.0","id":"s1","method":"no/such"}', b"[]", b"{}",
                b'{"jsonrpc":"2.0","id":"s2","method":"tools/call","params":{"name":"no-such-tool-7f3a"}}'):
        server.send_line(raw)
    fence(server, "stdout")
    endpoint.close()
    note_error_ids(votes, "wire:stdout:json-rpc-only", server)
    stray = server.stray_lines()
    assert not stray, (f"stdout carried {len(stray)} line(s) that are not one valid MCP message of the negotiated "
                       f"revision {server.revision} in UTF-8 (a JSON-RPC 2.0 message; an error leaves out its id only "
                       f"from MCP 2025-11-25 on), first: {shown(stray[0].raw, 300)}")


@requirement("wire:stdout:tool-call")
def test_stdout_stays_json_rpc_around_successful_calls(protocol, contract_target):
    endpoint = protocol.start()
    server = endpoint.server
    calls = consented_calls(contract_target, listed_tools(server))
    succeeded = []
    for tool in calls:
        response = call(endpoint, tool)
        result = (response or {}).get("result")
        if isinstance(result, dict) and result.get("isError") is not True:
            succeeded.append(tool.name)
    fence(server, "stdout-calls")
    if not succeeded:
        offered = sorted({t.get("name") for t in listed_tools(server) if isinstance(t.get("name"), str)})
        pytest.skip(f"not tested: none of the consented calls succeeded ({[c.name for c in calls]}); give a "
                    f"--tool-call that does; the server's tools: {', '.join(offered) or 'none'}")
    endpoint.close()
    stray = server.stray_lines()
    assert not stray, (f"around successful calls of {succeeded}, stdout carried {len(stray)} line(s) that are not "
                       f"one JSON-RPC message, first: {shown(stray[0].raw, 300)}")


@requirement("wire:capabilities:tools")
def test_a_server_with_tools_declared_them(protocol):
    endpoint = protocol.start()
    response = endpoint.initialized
    tools = listed_tools(endpoint.server)
    if tools:
        assert isinstance(declared(response).get("tools"), dict), \
            f"tools/list lists {len(tools)} tools, but initialize declared no tools capability: {response}"


def _session_lines(protocol, contract_target) -> tuple[dict, list, object]:
    """A session that gives the server every chance to notify: start-up, tools/list, errors, consented calls.
    Returns the initialize response, every line the server wrote, and the endpoint."""
    endpoint = protocol.start(handshake=False)
    response = endpoint.handshake(version=protocol.NEWEST)
    server = endpoint.server
    tools = listed_tools(server)
    server.send_line(b'{"jsonrpc":"2.0","id":"c1","method":"no/such"}')
    for tool in consented_calls(contract_target, tools):
        call(endpoint, tool)
    fence(server, "capabilities")
    return response, server.lines, endpoint


@requirement("wire:capabilities:logging")
def test_log_notifications_need_the_logging_capability(protocol, contract_target):
    response, lines, _ = _session_lines(protocol, contract_target)
    logs = log_notifications(lines)
    if logs:
        assert isinstance(declared(response).get("logging"), dict), (
            f"the server sent {len(logs)} notifications/message without declaring the logging capability "
            f"(capabilities: {json.dumps(declared(response))[:300]}); first: {shown(logs[0].raw, 300)}")


@requirement("wire:capabilities:negotiated")
def test_notifications_only_for_negotiated_capabilities(protocol, contract_target, votes):
    response, lines, endpoint = _session_lines(protocol, contract_target)
    rule = manifest()["wire:capabilities:negotiated"]
    if not rule.applies_to(endpoint.negotiated):
        votes.not_applicable(rule.id, f"the server negotiated {endpoint.negotiated}; the rule is a MUST from "
                                      "2025-03-26 on")
        return
    unwelcome = unwelcome_notifications(lines, declared(response))
    assert not unwelcome, f"notifications for capabilities the server did not declare: {unwelcome[:3]}"


@requirement("wire:tools:list")
def test_every_listed_tool_has_a_name_and_an_input_schema(protocol, votes):
    endpoint = protocol.start(version="2025-11-25")
    response = endpoint.initialized
    rule = manifest()["wire:tools:list"]
    if not rule.applies_to(endpoint.negotiated):
        votes.not_applicable(rule.id, f"the server negotiated {endpoint.negotiated}, not 2025-11-25")
        return
    if not isinstance(declared(response).get("tools"), dict):
        votes.not_applicable(rule.id, "the server declares no tools capability")
        return
    listed = endpoint.server.call("tools/list", {}, timeout=call_s())
    tools = (listed.get("result") or {}).get("tools")
    assert isinstance(tools, list), f"tools/list: expected a result with a tools array; got {listed}"
    problems = []
    for tool in tools:
        name = tool.get("name") if isinstance(tool, dict) else None
        if not isinstance(name, str):
            problems.append(f"a tool without a string name: {json.dumps(tool)[:200]}")
            continue
        why = schema_problem(tool.get("inputSchema"))
        if why:
            problems.append(f"{name}'s inputSchema: {why}")
    assert not problems, "tools/list: " + "; ".join(problems[:5])


@requirement("wire:batch:2025-03-26")
def test_batches_are_received_under_2025_03_26(protocol, votes):
    endpoint = protocol.start(handshake=False)
    response = endpoint.handshake(version="2025-03-26")
    rule = manifest()["wire:batch:2025-03-26"]
    if not rule.applies_to(endpoint.negotiated):
        votes.not_applicable(rule.id, f"asked for 2025-03-26, the server negotiated {endpoint.negotiated}")
        return
    server = endpoint.server
    batch = [{"jsonrpc": "2.0", "id": "b1", "method": "ping"},
             {"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": "b2", "method": "tools/list"},
             {"jsonrpc": "2.0", "id": "b3", "method": "peerwire/no-such-method"}]
    start = server.line_count
    futures = {i: server.expect_response(i) for i in ("b1", "b2", "b3")}
    server.send(batch)
    settled = settle(server, list(futures.values()), every=True)
    missing = [i for i, f in futures.items() if f in settled.pending]
    assert not missing, (f"negotiated 2025-03-26 ({response.get('result', {}).get('protocolVersion')}), sent the "
                         f"batch {json.dumps(batch)}; requests {missing}: {settled.silence}; {since(server, start)}")
    assert futures["b3"].result().get("error", {}).get("code") == -32601, futures["b3"].result()
    form = "one array" if any(isinstance(ln.message, list) for ln in server.lines_since(start)) else "separate lines"
    votes.record(rule.id, True, "the batch's requests answered, in one array or one line each",
                 detail=f"the answers came as {form}")
