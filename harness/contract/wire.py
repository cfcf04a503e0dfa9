"""Checks on the wire shared by the suite's tests: fences, answers whatever their id, consented calls.

A *fence* is a ping (two, answered in turn) sent after something whose
absence of answer is the point: the server reads its input in order, so once
the fence is answered anything answering what came before it has arrived.
Every wait is bounded by ``--call-timeout``; every failure message says what
was sent, what came back (every line, whatever its id) and what was expected.
"""

from __future__ import annotations

import json
from concurrent.futures import FIRST_COMPLETED, wait
from typing import Any

from jsonschema import validators
from jsonschema.exceptions import SchemaError

from .endpoints import RawEndpoint
from .limits import limits
from .stdio import Line, StdioServer
from .target import Target, ToolCall

NOTIFICATION_CAPABILITIES = {
    "notifications/tools/list_changed": ("tools", "listChanged"),
    "notifications/resources/list_changed": ("resources", "listChanged"),
    "notifications/prompts/list_changed": ("prompts", "listChanged"),
    "notifications/resources/updated": ("resources", "subscribe"),
}
"""Server notifications and the capability (and flag) a server must have declared to send them."""
LOG_NOTIFICATION = "notifications/message"


def shown(raw: bytes, limit: int = 160) -> str:
    return repr(raw[:limit]) + (f"…({len(raw)} bytes)" if len(raw) > limit else "")


def since(server: StdioServer, start: int) -> str:
    """What the server wrote from line ``start`` on, as text for a failure message."""
    came = server.lines_since(start)
    if not came:
        # Alive and silent is most often a transport (an SDK's reader) that dropped a line it could not parse.
        return "it wrote nothing" + (" (it is running: its transport may have dropped the line)"
                                     if server.alive() else "")
    return f"it wrote {len(came)} line(s): " + " | ".join(ln.raw[:200].decode("utf-8", "replace") for ln in came[-6:])


def fence(server: StdioServer, label: str) -> set[str]:
    """Two pings answered in turn: everything sent before them has been read. Returns their ids."""
    ids = {f"fence-{label}-{n}" for n in (1, 2)}
    for msg_id in sorted(ids):
        start = server.line_count
        _, future = server.request("ping", msg_id=msg_id)
        try:
            response = future.result(limits().call_s)
        except TimeoutError:
            raise AssertionError(f"the fence ping {msg_id!r} got no answer within {limits().call_s:g}s "
                                 f"(the server stopped answering); {since(server, start)}; "
                                 f"{server.stderr_tail()}") from None
        assert response.get("result") == {}, f"ping {msg_id} answered {response}"
    return ids


def answer_to(server: StdioServer, raw: bytes, ids: tuple[Any, ...], expected: str) -> dict:
    """Send ``raw`` and return the first response carrying one of ``ids`` (``None`` is the null id)."""
    start = server.line_count
    futures = [server.expect_response(i) for i in ids]
    server.send_line(raw)
    done, _ = wait(futures, timeout=limits().call_s, return_when=FIRST_COMPLETED)
    wanted = " or ".join("null" if i is None else json.dumps(i) for i in ids)
    assert done, (f"sent {shown(raw)}; expected {expected}, a response with id {wanted}, within "
                  f"{limits().call_s:g}s; {since(server, start)}; {server.stderr_tail(300)}")
    return next(iter(done)).result()


def responses_since(server: StdioServer, start: int, ignore: set[Any] = frozenset()) -> list[Line]:
    """Lines from ``start`` that are responses (a result or an error, no method), other than to ``ignore``.

    A server's own notifications and requests are not answers to anything the client sent."""
    out = []
    for line in server.lines_since(start):
        message = line.message
        items = message if isinstance(message, list) else [message]
        answers = [m for m in items if isinstance(m, dict) and "method" not in m and ("result" in m or "error" in m)
                   and m.get("id") not in ignore]
        if answers:
            out.append(line)
    return out


def declared(initialize: dict) -> dict:
    """The capabilities an initialize response declared (``{}`` when it declared none)."""
    result = initialize.get("result")
    capabilities = result.get("capabilities") if isinstance(result, dict) else None
    return capabilities if isinstance(capabilities, dict) else {}


def listed_tools(server: StdioServer) -> list[dict]:
    """tools/list's tools (every page), or ``[]`` when the server answers it with an error."""
    tools: list[dict] = []
    cursor = None
    for _ in range(20):
        params = {"cursor": cursor} if cursor else {}
        response = server.call("tools/list", params, timeout=limits().call_s)
        result = response.get("result")
        if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
            return tools
        tools += [t for t in result["tools"] if isinstance(t, dict)]
        cursor = result.get("nextCursor")
        if not cursor:
            break
    return tools


def schema_example(schema: Any) -> Any:
    """A value for a schema from what it states itself: its default, an example, its first enum or const
    value, else the simplest value of its type; an object gets its required properties only."""
    if not isinstance(schema, dict):
        return None
    for key in ("default", "const"):
        if key in schema:
            return schema[key]
    if schema.get("examples"):
        return schema["examples"][0]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties") or {}
        return {name: schema_example(properties.get(name)) for name in schema.get("required", [])}
    return {"string": "", "integer": 0, "number": 0, "boolean": False, "array": []}.get(kind)


def consented_calls(target: Target, tools: list[dict]) -> list[ToolCall]:
    """The calls the run may make of the server's own tools: those consented by name (and listed), then, with
    --call-tools read-only, each tool annotated readOnlyHint, with arguments drawn from its input schema."""
    names = {t.get("name") for t in tools}
    calls = [c for c in target.consented_calls() if c.name in names]
    if target.consent.read_only:
        chosen = {c.name for c in calls}
        for tool in tools:
            annotations = tool.get("annotations") if isinstance(tool.get("annotations"), dict) else {}
            if annotations.get("readOnlyHint") is True and tool.get("name") not in chosen:
                calls.append(ToolCall(tool["name"], schema_example(tool.get("inputSchema")) or {}))
    return calls


def schema_problem(schema: Any) -> str | None:
    """Why ``schema`` is not a valid JSON Schema object (by its own ``$schema``, default 2020-12), or None."""
    if not isinstance(schema, dict):
        return f"it is {json.dumps(schema)[:80]}, not an object"
    try:
        validators.validator_for(schema, default=validators.Draft202012Validator).check_schema(schema)
    except SchemaError as exc:
        return f"it is not a valid JSON Schema: {exc.message[:200]}"
    return None


def unwelcome_notifications(lines: list[Line], capabilities: dict) -> list[tuple[str, str]]:
    """Server notifications in ``lines`` that use a capability the server did not declare: (method, why)."""
    found = []
    for line in lines:
        message = line.message
        if not isinstance(message, dict) or "id" in message or not isinstance(message.get("method"), str):
            continue
        method = message["method"]
        need = NOTIFICATION_CAPABILITIES.get(method)
        if need is None:
            continue
        capability = capabilities.get(need[0])
        if not isinstance(capability, dict) or capability.get(need[1]) is not True:
            found.append((method, f"{need[0]}.{need[1]} was not declared (capabilities: "
                                  f"{json.dumps(capabilities)[:200]})"))
    return found


def log_notifications(lines: list[Line]) -> list[Line]:
    return [ln for ln in lines if isinstance(ln.message, dict) and ln.message.get("method") == LOG_NOTIFICATION
            and "id" not in ln.message]


def call(endpoint: RawEndpoint, tool: ToolCall) -> dict | None:
    """One consented tools/call; its response, or ``None`` when none came within ``--call-timeout``."""
    outcome = endpoint.call_tool(tool.name, tool.arguments, timeout=limits().call_s).outcome(limits().call_s)
    return outcome.response
