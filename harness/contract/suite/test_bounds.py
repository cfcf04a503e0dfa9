"""Boundaries: every bound in the contract's schemas, each neighbour of it, and paging at the edges.

The probes come from the schemas (:mod:`harness.contract.bounds`), so a bound
added to a schema is covered here without an edit. Arguments a probe does not
look at get plain valid values; tools that wait find mail waiting, so a probe
at the largest timeout answers at once. Paging is probed at each limit the
schema names (its minimum, default and maximum) with no records, limit - 1,
limit and limit + 1 waiting.
"""

from __future__ import annotations

import itertools
import json
import secrets
from typing import Any, Callable, Mapping

from harness.contract.bounds import Probe, minimal_value, probes, resolved_properties
from harness.contract.fixtures import call_s, succeed, tool_call
from harness.contract.manifest import requirement
from harness.contract.schemas import ToolContract, error_result_violations, tool_contract, tool_contracts

"""A probe answers at once (waits find mail waiting); this only bounds a server that hangs."""

Values = Mapping[str, Callable[[], Any]]


def _arguments(contract: ToolContract, probe: Probe, values: Values) -> dict[str, Any]:
    props = resolved_properties(contract)
    required = contract.input_schema.get("required", ())
    arguments = {name: (values[name]() if name in values else minimal_value(props[name]))
                 for name in required if name != probe.argument}
    arguments[probe.argument] = probe.value
    return arguments


def _judge(contract: ToolContract, probe: Probe, outcome) -> str | None:
    """Why ``outcome`` is wrong for ``probe``; ``None`` when it is right."""
    seen = json.dumps(outcome.response, ensure_ascii=False)[:300] if outcome.response else outcome.failure
    if outcome.result is None:
        return f"{probe.label}: no tool result: {seen}"
    structured = outcome.structured
    error = structured.get("error") if outcome.is_error and isinstance(structured, dict) else None
    if outcome.is_error and (error_result_violations(structured) or not isinstance(error, dict)):
        return f"{probe.label}: a malformed tool error: {seen}"
    if probe.inside:
        if error is None:
            violations = contract.result_violations(structured)
            return f"{probe.label}: the result does not conform: {violations[:2]}" if violations else None
        if error["code"] == probe.refusal:
            return f"{probe.label}: refused with {error['code']} although the value is within the bound: {seen}"
        if error["code"] not in contract.errors:
            return f"{probe.label}: {error['code']} is not an error {contract.name} declares: {seen}"
        return None
    if error is None or error["code"] != probe.refusal:
        return f"{probe.label}: expected {probe.refusal}, got {seen}"
    if probe.argument not in error.get("message", ""):
        return f"{probe.label}: the {probe.refusal} message does not name {probe.argument!r}: {error['message']!r}"
    return None


def _probe_all(profile: str, endpoint, values: Values, seed: Callable[[], None]) -> list[str]:
    problems = []
    for contract in tool_contracts(profile).values():
        waits = "timeout_ms" in contract.input_schema.get("properties", {})
        # Outside first: they reserve nothing, so capacity the inside probes use up cannot decide them.
        for probe in sorted(probes(contract), key=lambda p: p.inside):
            if waits:
                seed()
            outcome = tool_call(endpoint, contract.name, _arguments(contract, probe, values), timeout=call_s())
            problem = _judge(contract, probe, outcome)
            if problem:
                problems.append(problem)
    return problems


@requirement("bounds:input:edges")
def test_every_input_bound_and_its_neighbours(servers):
    caller, peer = servers.caller("edges"), servers.caller("peer")
    endpoint, peer_end = servers.start(caller), servers.start(peer)

    def fresh_request() -> str:
        return succeed(peer_end, "followup_task", {"target": caller.name, "message": "a task to answer"})["request_id"]

    values = {"target": lambda: peer.name, "message": lambda: "boundary probe", "request_id": fresh_request}
    problems = _probe_all("messaging", endpoint, values,
                          lambda: succeed(peer_end, "send_message", {"target": caller.name, "message": "mail"}))
    problems += _names_at_the_bound(servers, endpoint)
    assert not problems, f"{len(problems)} boundary probes went wrong:\n  " + "\n  ".join(problems)


def _names_at_the_bound(servers, endpoint) -> list[str]:
    """A name and an alias as long as the longest name_prefix work as targets and come back whole."""
    longest = tool_contract("list_agents").input_schema["properties"]["name_prefix"]["maxLength"]
    stem = f"edge{secrets.token_hex(3)}-"
    name, alias = (stem + fill * (longest - len(stem)) for fill in ("n", "a"))
    agent = servers.provisioner.register(name, aliases=(alias,))
    problems = []
    listed = succeed(endpoint, "list_agents", {"name_prefix": name})["agents"]
    if [(a.get("agent_id"), a.get("name"), a.get("aliases", [alias])) for a in listed] != [(agent.agent_id, name, [alias])]:
        problems.append(f"list_agents name_prefix={longest} characters: {json.dumps(listed)[:300]}")
    for target in (name, alias):
        outcome = tool_call(endpoint, "send_message", {"target": target, "message": "to the longest name"})
        recipient = (outcome.structured or {}).get("recipient") if not outcome.is_error else None
        if recipient != {"agent_id": agent.agent_id, "name": name}:
            problems.append(f"send_message to a {len(target)}-character {'name' if target == name else 'alias'}: "
                            f"{json.dumps(outcome.response)[:300]}")
    return problems


@requirement("collab:bounds:edges")
def test_every_collab_input_bound_and_its_neighbours(tree_servers):
    root = tree_servers.provisioner.register(f"root-{secrets.token_hex(3)}", collab_root=True)
    endpoint = tree_servers.start(root, profile="collab")
    succeed(endpoint, "spawn_agent", {"task_name": "w0", "message": "stand by"})
    names = (f"b{n}" for n in itertools.count())
    values = {"target": lambda: "/root/w0", "message": lambda: "boundary probe", "task_name": lambda: next(names)}
    problems = _probe_all("collab", endpoint, values,
                          lambda: succeed(endpoint, "send_message", {"target": "/root", "message": "mail"}))
    assert not problems, f"{len(problems)} boundary probes went wrong:\n  " + "\n  ".join(problems)


# -- paging ------------------------------------------------------------------------------------

def _page_limits() -> list[int]:
    limit = resolved_properties(tool_contract("receive_messages"))["limit"]
    return sorted({limit["minimum"], limit["default"], limit["maximum"]})


@requirement("receive:paging:edges")
def test_paging_with_none_fewer_exactly_and_more_than_limit_waiting(servers):
    feeder = servers.start()  # any caller: only the recipients' mailboxes are read
    default = resolved_properties(tool_contract("receive_messages"))["limit"]["default"]
    problems: list[str] = []
    for limit in _page_limits():
        recipient = servers.caller(f"paged{limit}")
        reader = servers.start(recipient)
        sent: list[dict] = []
        exposed: set[str] = set()

        def admit(count: int) -> None:
            for _ in range(count):
                n = len(sent)
                tool = "followup_task" if n % 2 else "send_message"  # tasks and information alike
                sent.append(succeed(feeder, tool, {"target": recipient.name, "message": f"record {n}"}))

        def read(label: str, first: int, count: int, has_more: bool, **arguments: Any) -> dict:
            """Expect records ``first`` .. ``first + count - 1`` (in admission order) and has_more."""
            if limit != default:
                arguments["limit"] = limit  # the default limit is probed by leaving limit out
            page = succeed(reader, "receive_messages", arguments)
            where = f"limit {limit}, {label}"
            bodies = [r.get("body") for r in page["records"]]
            wanted = [f"record {n}" for n in range(first, first + count)]
            if bodies != wanted:
                problems.append(f"{where}: {len(bodies)} records {bodies[:2]}…, expected {len(wanted)}: "
                                f"{wanted[:2]}…")
            if page["has_more"] is not has_more:
                problems.append(f"{where}: has_more is {page['has_more']}, expected {has_more}")
            # Exposure is decided by claims, not by paging: a task is new work in the first page that
            # holds its record, and a page never hands out a task whose record it does not hold.
            held = {r["request_id"] for r in page["records"] if r.get("kind") == "task"}
            beyond = set(page["new_work"]) - held
            missed = held - exposed - set(page["new_work"])
            if beyond:
                problems.append(f"{where}: new_work names tasks beyond the page: {sorted(beyond)}")
            if missed:
                problems.append(f"{where}: tasks first read here are not new work: {sorted(missed)}")
            exposed.update(page["new_work"])
            return page

        read("nothing waiting", 0, 0, False)
        admit(limit - 1)
        read(f"{limit - 1} waiting", 0, limit - 1, False)
        admit(1)
        read(f"exactly {limit} waiting", 0, limit, False)
        admit(1)
        full = read(f"{limit + 1} waiting", 0, limit, True)
        rest = read("the rest, from the full page's cursor", limit, 1, False, cursor=full["cursor"])
        empty = read("past the end, from the last page's cursor", limit + 1, 0, False, cursor=rest["cursor"])
        admit(1)
        read("from the empty page's cursor, after one more arrived", limit + 1, 1, False, cursor=empty["cursor"])
        never = [r["request_id"] for r in sent if "request_id" in r and r["request_id"] not in exposed]
        if never:
            problems.append(f"limit {limit}: tasks never exposed as new work: {never}")
    assert not problems, "paging at the edges:\n  " + "\n  ".join(problems)
