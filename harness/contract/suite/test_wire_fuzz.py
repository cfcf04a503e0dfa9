"""A bounded, seeded fuzz of the wire: whole lines, then tool arguments.

Each example is one line written to a live server, followed by a ``ping``
fence. A finding of JSON-RPC 2.0 and MCP (``wire:fuzz:messages``, the protocol
profile) is any of: the server exits; a request gets no answer (by its id, or
an error with id null before the fence); stdout carries a line that is not
JSON-RPC in valid UTF-8 (``NaN`` included). The line fuzz calls no tool of the
server's: a fuzzed ``tools/call`` names no tool the server lists. The
contract's stricter finding, an answer -32603 or a tool error ``internal`` for
input the client made up, is judged from the same exchanges
(``wire:fuzz:never-internal``) when the run selects it, and is the finding of
the tool-argument fuzz (messaging profile). Runs are seeded (``derandomize``)
and write no example database, so they repeat exactly and leave nothing
behind. ``PEERWIRE_FUZZ_EXAMPLES`` scales the example counts (default 1.0).
A failing example is reported as the line that was sent, byte for byte.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import Future
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from harness.contract.fixtures import tool_call
from harness.contract.manifest import requirement
from harness.contract.schemas import TOOL_NAMES
from harness.contract.stdio import StdioServer, response_id
from harness.contract.wire import listed_tools, settle, since

SCALE = float(os.environ.get("PEERWIRE_FUZZ_EXAMPLES", "1"))
MESSAGE_EXAMPLES = max(1, int(2000 * SCALE))
ARGUMENT_EXAMPLES = max(1, int(700 * SCALE))
NEVER_INTERNAL = "wire:fuzz:never-internal"
NOT_A_TOOL = "zz-not-a-tool-"
"""A fuzzed tools/call naming a tool the server lists is renamed with this prefix: the line fuzz calls no tool."""
FUZZ_TIMEOUT_S = 1200
"""Thousands of exchanges, each bounded by --call-timeout: a machine busy with other work needs far longer than 300 s."""
QUICK_MS = 20
"""Waits in fuzzed calls are cut to this, so that no example waits a minute."""
DEEP = "\x00deep\x00"
"""Placeholder a nested value's text replaces after rendering (json.dumps itself recurses)."""

# No shrinking: a finding may be an answer that never comes, and each try of a smaller example
# would wait out the bound again; the first failing line is reported as it was sent.
FUZZ = dict(deadline=None, database=None, derandomize=True, report_multiple_bugs=False,
            phases=[Phase.explicit, Phase.reuse, Phase.generate],
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])

# -- values a careless server trips over ---------------------------------------------------------

LONE_SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
hostile_text = st.one_of(
    st.text(max_size=12),
    st.text(alphabet=st.one_of(LONE_SURROGATES, st.characters()), max_size=8),
    st.sampled_from(["\ud800", "a\udc80b", "\udbff", "é", "e\u0301", "\u202egnp", "\x00", "🍎", "", " ", "\r\n",
                     "c1.é", "c1.\ud800", "rq_" + "0" * 32, "*", "all", "x" * 300]),
)
numbers = st.one_of(st.integers(), st.integers(-2, 101), st.sampled_from([0.0, 5.0, 1.5, -0.0, 1e300, 2 ** 64]),
                    st.floats(allow_nan=True, allow_infinity=True))
leaves = st.one_of(st.none(), st.booleans(), numbers, hostile_text)
json_values = st.recursive(leaves, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(hostile_text, inner, max_size=4), max_leaves=10)
odd_ids = st.one_of(st.integers(), st.sampled_from([0, -1, 2 ** 53, 2 ** 63, -(2 ** 63)]), hostile_text,
                    st.none(), st.booleans(), st.floats(allow_nan=True), st.just([1]), st.just({"id": 1}))
methods = st.one_of(st.sampled_from(["ping", "tools/list", "tools/call", "initialize", "server/discover",
                                     "notifications/cancelled", "resources/list", "rpc.discover"]),
                    hostile_text, st.integers(), st.none(), st.just(["ping"]))
depths = st.one_of(st.integers(1, 80), st.sampled_from([63, 64, 65, 985, 999, 1000, 3000]))


@st.composite
def tool_params(draw, *, tool: str | None = None) -> dict:
    params: dict[str, Any] = {"name": tool if tool is not None else draw(st.one_of(st.sampled_from(TOOL_NAMES),
                                                                                    hostile_text))}
    if tool is not None or draw(st.booleans()):
        params["arguments"] = draw(tool_arguments(tool or params["name"]))
    if draw(st.booleans()):
        params["_meta"] = draw(st.fixed_dictionaries({}, optional={
            "callId": st.one_of(hostile_text, numbers), "progressToken": odd_ids,
            "x-codex-turn-metadata": st.one_of(hostile_text, st.just('{"thread_id": NaN}'), json_values)}))
    return params


@st.composite
def tool_arguments(draw, tool: Any) -> Any:
    """Arguments near the schema: the right names with hostile values, extras, wrong shapes."""
    names = ["target", "message", "cursor", "ack_cursor", "limit", "timeout_ms", "request_id", "status",
             "include_disabled", "name_prefix", "provider"]
    if draw(st.integers(0, 9)) == 0:
        return draw(json_values)
    args = draw(st.dictionaries(st.sampled_from(names), st.one_of(hostile_text, numbers, json_values, st.just(
        DEEP)), max_size=4))
    if tool in ("send_message", "followup_task", "interrupt_agent") and draw(st.booleans()):
        args.setdefault("target", draw(st.sampled_from(["nobody-at-all", "*", "all", ["a", "b"]])))
        args.setdefault("message", draw(hostile_text))
    return args


@st.composite
def messages(draw) -> Any:
    message: dict[str, Any] = {}
    if draw(st.integers(0, 7)):
        message["jsonrpc"] = "2.0"
    elif draw(st.booleans()):
        message["jsonrpc"] = draw(json_values)
    if draw(st.integers(0, 3)):
        message["id"] = draw(st.one_of(st.integers(0, 10 ** 6), odd_ids))
    method = draw(methods) if draw(st.integers(0, 7)) else None
    if method is not None or draw(st.booleans()):
        message["method"] = method
    if method == "tools/call":
        message["params"] = draw(tool_params())
    elif draw(st.booleans()):
        message["params"] = draw(st.one_of(json_values, st.just({"protocolVersion": "2025-03-26"}),
                                           st.fixed_dictionaries({"requestId": odd_ids})))
    return message


class Plan:
    """One line to send: a value, how to write it, and optionally garbage in front of it.

    Not a dataclass: Hypothesis prints a failing example through ``repr``, which
    shows the line as sent (a dataclass would print a nesting depth even for a
    value that holds no nested placeholder)."""

    def __init__(self, value: Any, ascii_only: bool, depth: int, prefix: bytes = b""):
        self.value, self.ascii_only, self.depth, self.prefix = value, ascii_only, depth, prefix

    def __repr__(self) -> str:
        return f"Plan(line={self.line()[:400]!r})"

    def line(self) -> bytes:
        text = json.dumps(self.value, ensure_ascii=self.ascii_only, allow_nan=True, separators=(",", ":"))
        text = text.replace(json.dumps(DEEP), "[" * self.depth + '"x"' + "]" * self.depth)
        return self.prefix + text.encode("utf-8", "surrogatepass")  # a lone surrogate becomes raw ED A0 80 bytes

    @property
    def parsed(self) -> Any:
        """What the line means to a strict reader (``None`` when the prefix spoils it)."""
        return None if self.prefix else self.value


@st.composite
def plans(draw) -> Plan:
    value: Any = draw(st.lists(messages(), max_size=4)) if draw(st.integers(0, 5)) == 0 else draw(messages())
    prefix = draw(st.sampled_from([b"\xff", b"\xed\xa0\x80", b"NaN", b"[]", b"{", b"\x00"])) \
        if draw(st.integers(0, 15)) == 0 else b""
    return Plan(value, draw(st.booleans()), draw(depths), prefix)


def no_tools(value: Any, tools: set[str]) -> Any:
    """Rename every tools/call in ``value`` whose name the server lists: the line fuzz calls no tool."""
    items = value if isinstance(value, list) else [value]
    for message in items:
        params = message.get("params") if isinstance(message, dict) and message.get("method") == "tools/call" else None
        if isinstance(params, dict) and isinstance(params.get("name"), str) and params["name"] in tools:
            params["name"] = NOT_A_TOOL + params["name"]
    return value


def quicken(value: Any) -> Any:
    """Cut waits short, so an example never sits in a minute-long wait_agent or receive."""
    items = value if isinstance(value, list) else [value]
    for message in items:
        params = message.get("params") if isinstance(message, dict) else None
        args = params.get("arguments") if isinstance(params, dict) else None
        if isinstance(args, dict) and params.get("name") in ("wait_agent", "receive_messages"):
            timeout = args.get("timeout_ms")
            if timeout is None or (isinstance(timeout, (int, float)) and not isinstance(timeout, bool)
                                   and timeout == timeout and timeout > QUICK_MS):
                args["timeout_ms"] = QUICK_MS
    return value


# -- judging one exchange ------------------------------------------------------------------------


def _valid_id(msg_id: Any) -> bool:
    if isinstance(msg_id, bool) or not isinstance(msg_id, (int, str)):
        return False
    return not (isinstance(msg_id, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in msg_id))


def _must_answer(value: Any) -> tuple[list[Any], bool]:
    """(ids that must be answered, whether some answer must come at all) for a parsed line."""
    if isinstance(value, list):  # a batch: an array answer with its requests' responses, or one error
        parts = [_must_answer(item) for item in value]
        return [i for ids, _ in parts for i in ids], not value or any(due for _, due in parts)
    if not isinstance(value, dict):
        return [], True
    if "id" not in value:
        return [], not isinstance(value.get("method"), str)  # a notification is never answered
    requested = isinstance(value.get("method"), str) and value.get("jsonrpc") == "2.0" and _valid_id(value["id"])
    return ([value["id"]] if requested else []), True


class Exchange:
    """Sends fuzzed lines to one server and collects the findings of each.

    A protocol finding fails at once. ``internal``: what to do with an answer
    -32603 or a tool error ``internal``: ``"fail"`` (a finding), or ``"note"``
    (kept in :attr:`internal` for the contract's requirement)."""

    def __init__(self, server: StdioServer, internal: str = "fail"):
        self.server = server
        self.count = 0
        self.internal_mode = internal
        self.internal: list[str] = []

    def check(self, line: bytes, value: Any) -> None:
        server = self.server
        self.count += 1
        ids, answer_due = _must_answer(value)
        # One future per id: a batch may repeat an id, and any response with it answers it.
        unique = {json.dumps(i): i for i in ids}.values()
        futures: list[tuple[Any, Future]] = [(i, server.expect_response(i)) for i in unique]
        # With no request id to read, any answer will do (an error with id null or none, an array, or an answer
        # to an id JSON-RPC allows and MCP does not, such as 1.5). With ids, only an error whose id could not be
        # read (a batch or a line refused as a whole) excuses them. A batch's requests may be answered in one
        # array or one line each (MCP 2025-03-26 makes receiving batches a MUST, sending them a MAY).
        anything = server.expect_line(lambda ln: isinstance(ln.message, list) or any(
            not str(response_id(r)).startswith("fence-") for r in ln.responses)) if answer_due and not futures else None
        refusal = server.expect_line(lambda ln: any(response_id(r) is None and "error" in r for r in ln.responses)) \
            if futures else None
        seen = server.line_count
        server.send_line(line)
        shown = f"line {line[:300]!r}"
        settled = settle(server, [f for _, f in futures] or ([anything] if anything else []), every=True,
                         through_fence=True)
        for watcher in (anything, refusal):
            if watcher is not None and not watcher.done():
                watcher.cancel()
        if not settled.fenced:
            raise AssertionError(f"the server stopped answering after {shown}: {settled.silence}; "
                                 f"{server.stderr_tail()}")
        if settled.pending and not (refusal is not None and refusal.done() and not refusal.cancelled()):
            missing = [msg_id for msg_id, f in futures if f in settled.pending]
            what = f"request id {missing[0]!r}" if missing else "the line"
            raise AssertionError(f"{what}: {settled.silence}; {shown}; {since(server, seen)}")
        new = server.lines_since(seen)
        stray = [ln.raw[:200] for ln in new if not ln.valid_under(server.revision)]
        assert not stray, (f"stdout carried a line that is not JSON-RPC in valid UTF-8, or an error without id "
                           f"under {server.revision} {stray[0]!r}; {shown}")
        answers = [r for ln in new for r in ln.responses if not str(response_id(r)).startswith("fence-")]
        arrays = any(isinstance(ln.message, list) for ln in new)
        assert not answer_due or answers or arrays, f"nothing answered {shown}"
        for response in answers:
            found = None
            if response.get("error", {}).get("code") == -32603:
                found = f"-32603 for {shown}: {response}"
            result = response.get("result")
            if isinstance(result, dict) and result.get("isError"):
                code = (result.get("structuredContent") or {}).get("error", {}).get("code")
                if code == "internal":
                    found = f"tool error internal for {shown}: {response}"
            if found and self.internal_mode == "fail":
                raise AssertionError(found)
            if found:
                self.internal.append(found)
        assert server.alive(), f"the server exited after {shown}; {server.stderr_tail()}"


def _fuzz_server(servers, version: str) -> StdioServer:
    """A server for a fresh caller with one record pending (so waits return), negotiated at ``version``."""
    caller = servers.caller("fuzz")
    seeded = tool_call(servers.start(), "send_message", {"target": caller.name, "message": "pending"})
    assert seeded.result is not None and not seeded.is_error, f"could not seed the mailbox: {seeded.response}"
    endpoint = servers.start(caller, handshake=False)
    answer = endpoint.initialize(version)
    assert "result" in answer, answer
    endpoint.server.notify("notifications/initialized")
    return endpoint.server


@pytest.mark.long_running(60)
@pytest.mark.timeout(FUZZ_TIMEOUT_S)
@requirement("wire:fuzz:messages", also=(NEVER_INTERNAL,))
def test_fuzzed_lines_never_break_the_wire(protocol, votes):
    # Two sessions: one asking for a revision with batches (2025-03-26), one without (2025-11-25).
    exchanges = [Exchange(protocol.start(version=v).server, internal="note") for v in ("2025-03-26", "2025-11-25")]
    tools = {t.get("name") for t in listed_tools(exchanges[0].server)}

    @settings(max_examples=MESSAGE_EXAMPLES, **FUZZ)
    @given(plans(), st.integers(0, 1))
    def example(plan, which):
        no_tools(quicken(plan.value), tools)
        exchanges[which].check(plan.line(), plan.parsed)

    example()
    assert sum(e.count for e in exchanges) >= MESSAGE_EXAMPLES
    internal = [finding for e in exchanges for finding in e.internal]
    votes.record(NEVER_INTERNAL, not internal, "no answer is -32603 or the tool error internal",
                 detail=f"{len(internal)} of {MESSAGE_EXAMPLES} lines; first: {internal[0]}" if internal else None)


@pytest.mark.long_running(25)
@pytest.mark.timeout(FUZZ_TIMEOUT_S)
@requirement("wire:fuzz:tool-arguments")
def test_fuzzed_tool_arguments_get_specific_answers(servers):
    exchange = Exchange(_fuzz_server(servers, "2025-11-25"))

    @settings(max_examples=ARGUMENT_EXAMPLES, **FUZZ)
    @given(st.sampled_from(TOOL_NAMES).flatmap(lambda tool: tool_params(tool=tool)), st.booleans(), depths)
    def example(params, ascii_only, depth):
        plan = Plan(quicken({"jsonrpc": "2.0", "id": "call", "method": "tools/call", "params": params}),
                    ascii_only, depth)
        exchange.check(plan.line(), plan.parsed)

    example()
    assert exchange.count >= ARGUMENT_EXAMPLES
