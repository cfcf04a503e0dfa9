"""The suite's own machinery for the bug classes: boundary probes, visible text differences, client answers."""

from __future__ import annotations

from harness.contract.bounds import ASTRAL, Probe, minimal_value, probes
from harness.contract.interop.clients import Answer, judge
from harness.contract.interop.plan import Plan, PlannedCall
from harness.contract.schemas import ToolContract, body_byte_limit
from harness.contract.textdiff import code_points, difference, escaped, explain


def contract(properties: dict, defs: dict | None = None) -> ToolContract:
    schema = {"type": "object", "properties": properties, "additionalProperties": False,
              **({"$defs": defs} if defs else {})}
    return ToolContract(name="probe_me", input_schema=schema, output_schema={}, errors=frozenset())


def values(found: list[Probe], argument: str) -> list[tuple[object, bool]]:
    return [(p.value, p.inside) for p in found if p.argument == argument]


def test_every_numeric_bound_gets_itself_and_both_neighbours():
    found = probes(contract({"n": {"type": "integer", "minimum": 1, "maximum": 100},
                             "x": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 9.5},
                             "f": {"type": "number", "minimum": 0, "maximum": 10}}))
    assert values(found, "n") == [(0, False), (1, True), (2, True), (99, True), (100, True), (101, False)]
    assert values(found, "x") == [(0, False), (1, True), (8.5, True), (9.5, False)]
    assert (-0.5, False) in values(found, "f") and (10.5, False) in values(found, "f"), "fractions, for a number"


def test_a_bound_added_to_a_schema_is_probed_without_more_code():
    before = probes(contract({"s": {"type": "string"}}))
    after = probes(contract({"s": {"type": "string", "maxLength": 8}}))
    assert before == [] and {p.bound for p in after} == {"maxLength 8 (code points)"}
    assert ("x" * 8, True) in values(after, "s") and ("x" * 9, False) in values(after, "s")
    assert (ASTRAL * 8, True) in values(after, "s"), "code points, not UTF-16 units or bytes"


def test_byte_bounds_come_from_definitions_and_follow_references():
    limit = body_byte_limit()
    found = probes(contract({"message": {"$ref": "#/$defs/body"}}, {"body": {"type": "string", "minLength": 1}}))
    by_bytes = [p for p in found if p.bound == f"{limit} UTF-8 bytes"]
    sizes = {(len(p.value.encode("utf-8")), p.inside) for p in by_bytes}
    assert {(limit - 1, True), (limit, True), (limit + 1, False)} <= sizes
    assert all(p.refusal == "message_too_large" for p in by_bytes)
    assert ("", False) in values(found, "message"), "and its minLength, like any other"


def test_patterned_strings_are_left_to_their_pattern():
    assert probes(contract({"path": {"type": "string", "pattern": "^/root$", "maxLength": 5}})) == []


def test_minimal_values_are_valid():
    assert minimal_value({"enum": ["done", "blocked"]}) == "done"
    assert minimal_value({"type": "integer", "minimum": 3}) == 3
    assert minimal_value({"type": "string", "minLength": 2}) == "xx"
    assert minimal_value({"type": "string", "pattern": "^[a-z]{3}$"}) == "aaa"


def test_text_differences_are_shown_with_escapes_and_code_points():
    shown = explain("cafe\u0301", "caf\u00e9")
    assert '"cafe\\u0301"' in shown and '"caf\\u00e9"' in shown
    assert "U+0065 U+0301" in shown and "U+00E9" in shown and "from code point 3" in shown
    assert escaped("a\r\n\t\u0000\U0001f600\"\\") == '"a\\r\\n\\t\\u0000\\U0001f600\\"\\\\"'
    assert code_points("é") == "U+00E9" and explain("same", "same") == ""
    where = difference({"records": [{"body": "x "}]}, {"records": [{"body": "x"}]})
    assert where.startswith("records.0.body: ") and "U+0020" in where
    assert difference({"a": 1}, {"a": 2}) is None, "only texts are explained"


def test_client_answers_are_judged_against_the_plan():
    plan = Plan(profile="messaging", server_cmd=("srv",), sessions={"caller": {}}, calls=(
        PlannedCall("ok", "list_agents", {}), PlannedCall("bad", "send_message", {}, "unknown_target"),
        PlannedCall("lost", "wait_agent", {})))
    good_error = {"isError": True, "structuredContent": {"error": {"code": "unknown_target", "message": "m"}}}
    assert judge(plan, [Answer(plan.calls[0], True, {"structuredContent": {"agents": []}}),
                        Answer(plan.calls[1], True, good_error)]) == ["lost: the client gave no answer at all"]
    problems = judge(plan, [
        Answer(plan.calls[0], True, {"isError": True, "structuredContent": {"error": {}}}),
        Answer(plan.calls[1], False, refusal="-32602 Structured content does not match"),
        Answer(plan.calls[2], True, {"content": []})])
    assert [p.split(" ")[0] for p in problems] == ["ok", "bad", "lost"]
    assert "refused the answer: -32602" in problems[1] and "no structuredContent" in problems[2]
    wrong_code = {**good_error, "structuredContent": {"error": {"code": "invalid_argument", "message": "m"}}}
    assert "saw the code 'invalid_argument'" in judge(plan, [Answer(plan.calls[1], True, wrong_code)])[-1]


def test_a_plan_cut_to_one_of_each_keeps_every_tool_both_ways_and_what_they_need():
    plan = Plan(profile="collab", server_cmd=("srv",), sessions={"caller": {}, "stranger": {}}, calls=(
        PlannedCall("spawn", "spawn_agent", {}), PlannedCall("spawn-full", "spawn_agent", {}, "limit_exceeded",
                                                            after="spawn"),
        PlannedCall("spawn-bad", "spawn_agent", {}, "invalid_argument"), PlannedCall("list", "list_agents", {}),
        PlannedCall("list-stranger", "list_agents", {}, "unknown_caller", session="stranger")))
    cut = plan.one_of_each()
    assert [c.id for c in cut.calls] == ["spawn", "spawn-full", "list", "list-stranger"]
    assert set(cut.sessions) == {"caller", "stranger"}
    assert [c.id for c in Plan("m", ("srv",), {"caller": {}}, plan.calls[2:4]).one_of_each().calls] == \
        ["spawn-bad", "list"]
