"""Checks on the wire shared by the suite's tests: fences, answers whatever their id, consented calls.

A *fence* is a ping sent after something whose answer (or absence of answer)
is the point: the server reads its input in order, so once the fence is
answered the line before it has been read. Silence is judged by a fence, not
by a long wait: once the fence is answered, the line gets a short grace scaled
by the fence's own round trip (:func:`settle`), so a server that answers out of
order passes and a slow server on a busy machine is not called silent. Every
wait is bounded by ``--call-timeout``; every failure message says what was
sent, what came back (every line, whatever its id) and what was expected.

Where a line's id cannot be read, JSON-RPC 2.0 asks for ``"id": null``; MCP
2025-11-25's schema lets an error leave the id out instead. Both answer the
same lines here (:func:`~harness.contract.stdio.response_id`); which forms a
server used is kept as a note on the verdict (:func:`note_error_ids`).
"""

from __future__ import annotations

import itertools
import json
import time
from concurrent.futures import ALL_COMPLETED, FIRST_COMPLETED, Future, wait
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

from jsonschema import validators
from jsonschema.exceptions import SchemaError

from .endpoints import RawEndpoint
from .limits import limits
from .stdio import ID_OPTIONAL_SINCE, Line, NoResponse, ServerExited, StdioServer, id_may_be_omitted
from .target import Target, ToolCall
from .verdicts import VoteRecorder

NOTIFICATION_CAPABILITIES = {
    "notifications/tools/list_changed": ("tools", "listChanged"),
    "notifications/resources/list_changed": ("resources", "listChanged"),
    "notifications/prompts/list_changed": ("prompts", "listChanged"),
    "notifications/resources/updated": ("resources", "subscribe"),
}
"""Server notifications and the capability (and flag) a server must have declared to send them."""
LOG_NOTIFICATION = "notifications/message"
GRACE_FLOOR_S = 0.5
GRACE_PER_RTT = 5
"""After its fence is answered, a line still unanswered gets max(GRACE_FLOOR_S, GRACE_PER_RTT × the fence's round
trip), never more than --call-timeout: a busy machine's slow fence lengthens the grace with it."""
_fences = itertools.count(1)


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


@dataclass(frozen=True)
class Settled:
    """What :func:`settle` saw: the awaited futures that completed and those that did not, whether the fence was
    answered, and, if something is missing, why (with the fence's evidence)."""

    done: list[Future]
    pending: list[Future]
    fenced: bool
    silence: str | None = None


def settle(server: StdioServer, futures: list[Future], *, every: bool = False, through_fence: bool = False) -> Settled:
    """Wait for one of ``futures`` (all of them with ``every``) behind a fence.

    A ping goes out after the line(s) the futures answer. Once the ping is answered the server has read them,
    and what is still missing gets a grace of :data:`GRACE_PER_RTT` times the ping's round trip (at least
    :data:`GRACE_FLOOR_S`, at most ``--call-timeout``); a fence unanswered within ``--call-timeout`` means the
    server stopped answering altogether. With ``through_fence`` the fence's answer is awaited even when the
    futures complete first, so that every line the server wrote about what came before it has arrived."""
    bound = limits().call_s
    fence_id = f"fence-{next(_fences)}"
    sent = time.monotonic()
    try:
        _, fence_future = server.request("ping", msg_id=fence_id)
    except ServerExited as exc:
        fence_future = Future()
        fence_future.set_exception(exc)

    def finished() -> bool:
        done = [f for f in futures if f.done()]
        return len(done) == len(futures) if every else bool(done)

    deadline = sent + bound
    while not fence_future.done() and (through_fence or not finished()) and time.monotonic() < deadline:
        wait([*(f for f in futures if not f.done()), fence_future], timeout=deadline - time.monotonic(),
             return_when=FIRST_COMPLETED)
    fenced = fence_future.done() and fence_future.exception() is None
    rtt = time.monotonic() - sent
    silence = None
    if fenced and not finished():
        grace = min(bound, max(GRACE_FLOOR_S, GRACE_PER_RTT * rtt))
        wait([f for f in futures if not f.done()], timeout=grace, return_when=ALL_COMPLETED if every else
             FIRST_COMPLETED)
        silence = (f"no answer; the server's transport may have dropped the line: the fence ping {fence_id!r} "
                   f"sent after it was answered in {rtt * 1000:.0f} ms, and nothing answered the line within a "
                   f"further {grace:.2g} s")
    elif fence_future.done() and not fenced:
        silence = f"no answer, and the server is gone: {fence_future.exception()}"
    elif not fenced and (through_fence or not finished()):
        silence = (f"no answer, and the fence ping {fence_id!r} sent after it got none within {bound:g} s either: "
                   "the server stopped answering")
    done = [f for f in futures if f.done()]
    return Settled(done, [f for f in futures if not f.done()], fenced, silence if not finished() or not fenced
                   else None)


def answer_to(server: StdioServer, raw: bytes, ids: tuple[Any, ...], expected: str) -> dict:
    """Send ``raw`` and return the first response carrying one of ``ids`` (``None``: the null id, or none where
    the negotiated revision allows an error to leave it out), judged by a fence (:func:`settle`)."""
    start = server.line_count
    futures = [server.expect_response(i) for i in ids]
    server.send_line(raw)
    settled = settle(server, futures)
    wanted = " or ".join("null" if i is None else json.dumps(i) for i in ids)
    assert settled.done, (f"sent {shown(raw)}; expected {expected}, a response with id {wanted}: {settled.silence}; "
                          f"{since(server, start)}; {server.stderr_tail(300)}")
    try:
        response = settled.done[0].result()
    except ServerExited as exc:
        raise AssertionError(f"sent {shown(raw)}; expected {expected}: {exc}") from None
    assert "id" in response or id_may_be_omitted(server.revision), (
        f"sent {shown(raw)}; the error answering it has no id: the negotiated revision {server.revision} requires "
        f'one (JSON-RPC 2.0: "id": null where it cannot be read; MCP allows leaving it out from '
        f"{ID_OPTIONAL_SINCE} on); got {response}")
    return response


def note_error_ids(votes: VoteRecorder, requirement: str, server: StdioServer) -> None:
    """Note on ``requirement``'s verdict which forms the server's errors without a readable id took."""
    null = omitted = 0
    for line in server.lines:
        for response in line.responses:
            null += "id" in response and response["id"] is None
            omitted += "id" not in response
    if null or omitted:
        forms = ", ".join(f"{n} {form}" for n, form in ((null, 'with "id": null'), (omitted, "without id")) if n)
        votes.record(requirement, True, "errors whose request id could not be read carry a form the revision "
                     "allows", detail=f"seen under {server.revision}: {forms} (JSON-RPC 2.0 asks for null; MCP "
                     f"{ID_OPTIONAL_SINCE} also allows leaving the id out)")


class Rows:
    """Judges every row of a table requirement, and fails once at the end naming each failing row."""

    def __init__(self) -> None:
        self.count = 0
        self.failures: list[tuple[str, str]] = []

    @contextmanager
    def row(self, label: str) -> Iterator[None]:
        self.count += 1
        try:
            yield
        except (AssertionError, NoResponse, ServerExited) as exc:
            self.failures.append((label, str(exc)))

    def check(self) -> None:
        """Fail, naming every failing row, if any failed."""
        if self.failures:
            labels = ", ".join(label for label, _ in self.failures)
            raise AssertionError(f"{len(self.failures)} of {self.count} rows failed ({labels}): "
                                 + " || ".join(f"[{label}] {why[:400]}" for label, why in self.failures))


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
