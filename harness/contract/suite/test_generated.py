"""Generated arguments: valid ones get a declared outcome, invalid ones invalid_argument.

Runs are deterministic (``derandomize``) so a baseline stays meaningful, and
small, so the suite stays fast. Each tool gets a fresh server for a fresh caller
with one unacknowledged record waiting, so that a generated ``wait_agent``
without ``timeout_ms`` (60 s by default) returns at once. After the examples the
server must still be running and answer a ping (never a crash, never a hang).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, assume, given, settings

from harness.contract.driver import call_bound_s
from harness.contract.fixtures import tool_call
from harness.contract.generation import invalid_arguments, valid_arguments
from harness.contract.manifest import requirement
from harness.contract.schemas import TOOL_NAMES, error_result_violations, tool_contract

EXAMPLES = settings(max_examples=20, deadline=None, database=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def _judge_call(endpoint, tool, arguments, allowed_codes=None):
    """The outcome of one generated call, asserting it is declared; returns the error code or None."""
    outcome = tool_call(endpoint, tool, arguments, timeout=call_bound_s(tool, arguments))
    shown = f"arguments {json.dumps(arguments, ensure_ascii=False)[:300]} -> {json.dumps(outcome.response)[:500]}"
    assert outcome.response is not None, f"{outcome.failure}; {shown}"
    assert outcome.protocol_error is None, f"a protocol error instead of a tool result; {shown}"
    structured = outcome.structured
    if outcome.is_error:
        assert not error_result_violations(structured), f"malformed error result; {shown}"
        code = structured["error"]["code"]
        allowed = allowed_codes if allowed_codes is not None else tool_contract(tool).errors
        assert code in allowed, f"{code} is not one of {sorted(allowed)}; {shown}"
        return code
    assert allowed_codes is None, f"invalid arguments were accepted; {shown}"
    violations = tool_contract(tool).result_violations(structured)
    assert not violations, f"output does not conform: {violations[:3]}; {shown}"
    return None


def _fuzzed_caller(servers):
    """A server for a fresh caller with a record pending, and a peer it can address."""
    caller, peer = servers.caller("fuzz"), servers.caller("peer")
    endpoint = servers.start(caller)
    note = tool_call(servers.start(), "send_message", {"target": caller.name, "message": "pending"})
    assert note.result is not None and not note.is_error, f"could not seed the mailbox: {note.response}"
    return endpoint, peer


def _still_serving(endpoint) -> None:
    assert endpoint.server.alive(), f"the server exited; {endpoint.server.stderr_tail()}"
    assert endpoint.server.call("ping", timeout=5.0).get("result") == {}


@requirement("fuzz:valid:declared-outcome")
@pytest.mark.parametrize("tool", TOOL_NAMES)
def test_valid_arguments_get_a_declared_outcome(tool, servers):
    endpoint, peer = _fuzzed_caller(servers)

    @EXAMPLES
    @given(valid_arguments(tool_contract(tool).input_schema, known_targets=[peer.name]))
    def call(arguments):
        _judge_call(endpoint, tool, arguments)

    call()
    _still_serving(endpoint)


@requirement("fuzz:invalid:invalid-argument")
@pytest.mark.parametrize("tool", TOOL_NAMES)
def test_invalid_arguments_are_invalid_argument(tool, servers):
    endpoint, peer = _fuzzed_caller(servers)
    contract = tool_contract(tool)

    @EXAMPLES
    @given(invalid_arguments(contract.input_schema, known_targets=[peer.name]))
    def call(generated):
        assume(contract.input_violations(generated.arguments))  # the schema may admit a drawn "wrong" value
        _judge_call(endpoint, tool, generated.arguments, allowed_codes=generated.allowed_codes)

    call()
    _still_serving(endpoint)
