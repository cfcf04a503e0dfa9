"""The case machinery without processes: expressions, expectations, loading, judging.

The judging tests run a real :class:`CaseRun` against a scripted endpoint, so
every way a response can be wrong is shown to produce a failed vote for the
right requirement, and the case to stop there.
"""

from __future__ import annotations

import json
from concurrent.futures import Future
from pathlib import Path

import pytest

from harness.contract.cases import CaseError, load_cases
from harness.contract.limits import limits
from harness.contract.driver import ERROR_REQUIREMENT, PROFILE_REQUIREMENTS, RESULT_REQUIREMENT, CaseRun, call_bound_s
from harness.contract.endpoints import PendingCall, ToolOutcome
from harness.contract.expectations import check, same
from harness.contract.expressions import ActorIdentity, ExpressionError, PathError, Scope, evaluate, lookup
from harness.contract.interface import Caller
from harness.contract.manifest import manifest
from harness.contract.target import Target
from harness.contract.verdicts import VoteRecorder

SCOPE = Scope(
    actors={"bob": ActorIdentity("bob-1", "id-b", ("rev-1",))},
    values={"body": {"$repeat": "ab", "times": 2}},
    results={"send": {"records": [{"seq": 1, "body": "x"}, {"seq": 2, "body": "y"}], "request_id": "rq_1"}},
    unique_name=lambda stem: f"{stem}-1",
)


@pytest.mark.parametrize("expression, value", [
    ({"$actor": "bob"}, "bob-1"),
    ({"$actor": "bob", "field": "agent_id"}, "id-b"),
    ({"$actor": "bob", "field": "alias"}, "rev-1"),
    ({"$actor": "bob", "field": "ref"}, {"agent_id": "id-b", "name": "bob-1"}),
    ({"$name": "nobody"}, "nobody-1"),
    ({"$from": "send.request_id"}, "rq_1"),
    ({"$from": "send.records.*.seq"}, [1, 2]),
    ({"$value": "body"}, "abab"),
    ({"$upper": {"$actor": "bob"}}, "BOB-1"),
    ({"$concat": ["<", {"$actor": "bob"}, ">"]}, "<bob-1>"),
    ({"nested": [{"$actor": "bob"}]}, {"nested": ["bob-1"]}),
])
def test_expressions(expression, value):
    assert evaluate(expression, SCOPE) == value


@pytest.mark.parametrize("expression", [
    {"$actor": "carol"}, {"$from": "later.x"}, {"$from": "send.nope"}, {"$value": "nothing"}, {"$bogus": 1},
])
def test_bad_expressions_raise(expression):
    with pytest.raises(ExpressionError):
        evaluate(expression, SCOPE)


def test_paths():
    doc = {"a": [{"b": 1}, {"b": 2}]}
    assert lookup(doc, "") == doc and lookup(doc, "a.1.b") == 2 and lookup(doc, "a.*.b") == [1, 2]
    for path in ("a.2.b", "a.x", "c", "a.0.b.c"):
        with pytest.raises(PathError):
            lookup(doc, path)


RESULT = {"records": [{"kind": "task", "seq": 1, "body": "hé"}, {"kind": "information", "seq": 3, "body": "x"}],
          "new_work": [], "woke": True}


@pytest.mark.parametrize("expectation, passed", [
    ({"path": "records.0.body", "equals": "hé"}, True),
    ({"path": "records.0.body", "equals": "he"}, False),
    ({"path": "woke", "equals": 1}, False),
    ({"path": "new_work", "equals": []}, True),
    ({"path": "records.0.kind", "not_equals": "task"}, False),
    ({"path": "records", "contains": {"kind": "information"}}, True),
    ({"path": "records", "contains": {"kind": "reply"}}, False),
    ({"path": "records", "lacks": {"kind": "reply"}}, True),
    ({"path": "records.0.body", "contains": "é"}, True),
    ({"path": "records.0", "matches": {"kind": "task", "seq": 1}}, True),
    ({"path": "records.0", "matches": {"kind": "task", "seq": 2}}, False),
    ({"path": "records", "length": 2}, True),
    ({"path": "records", "length": 1}, False),
    ({"path": "records.0.request_id", "absent": True}, True),
    ({"path": "records.0.seq", "absent": True}, False),
    ({"path": "records.*.seq", "increasing": True}, True),
    ({"path": "records.*.kind", "increasing": True}, False),
    ({"path": "missing", "equals": 1}, False),
    ({"excludes_text": "hé"}, False),
    ({"excludes_text": "absent text"}, True),
    ({"of": "result", "path": "content", "length": 0}, True),
    ({"of": "result", "path": "structuredContent.woke", "equals": True}, True),
    ({"of": "result", "path": "content", "length": 1}, False),
])
def test_expectations(expectation, passed):
    verdict = check(expectation, RESULT, {"structuredContent": RESULT, "content": []})
    assert verdict.passed is passed, verdict
    assert verdict.check and (passed or verdict.detail)


def test_json_equality_keeps_booleans_apart():
    assert same(1, 1.0) and not same(True, 1) and not same([True], [1]) and same({"a": [1]}, {"a": [1]})


def _write_cases(directory: Path, cases: list[dict], profile: str | None = None) -> Path:
    directory.mkdir()
    document = {"description": "bad cases", "cases": cases, **({"profile": profile} if profile else {})}
    (directory / "bad.json").write_text(json.dumps(document), "utf-8")
    return directory


def _case(steps, **extra):
    return {"name": extra.pop("name", "c"), "requirement": extra.pop("requirement", "wire:ping"),
            "description": "d", "actors": {"alice": {}}, "steps": steps, **extra}


SEND = {"id": "send", "actor": "alice", "call": "send_message", "arguments": {"target": "x", "message": "y"}}


@pytest.mark.parametrize("case, complaint", [
    (_case([SEND], requirement="no:such"), "not in the manifest"),
    (_case([SEND, dict(SEND)]), "used twice"),
    (_case([{**SEND, "actor": "zed"}]), "not one of the case's actors"),
    (_case([{**SEND, "arguments": {"target": {"$from": "later.x"}}}]), "earlier step"),
    (_case([{**SEND, "error": "no_such_code"}]), "not a contract error code"),
    (_case([{**SEND, "expect": [{"path": "a", "equals": 1, "length": 2}]}]), "steps/0/expect/0"),
    (_case([{**SEND, "background": True}]), "never awaited"),
    (_case([SEND, {"await": "send"}]), "not an earlier background step"),
    (_case([{**SEND, "arguments": {"target": {"$actor": "bob"}}}]), "not one of the case's actors"),
    (_case([{**SEND, "surprise": 1}]), "surprise"),
])
def test_case_loader_refuses_bad_cases(tmp_path, case, complaint):
    with pytest.raises(CaseError, match=complaint):
        load_cases(_write_cases(tmp_path / "cases", [case]), manifest())


SPAWN = {"id": "spawn", "actor": "alice", "call": "spawn_agent", "arguments": {"task_name": "w", "message": "y"}}


@pytest.mark.parametrize("profile, case, complaint", [
    (None, _case([SPAWN]), "spawn_agent is not a tool of the messaging profile"),
    (None, _case([SEND], actors={"alice": {"collab_root": True}}), "collab_root, but this is a messaging"),
    (None, _case([SEND], requirement="collab:send:empty-output"), "belong to another profile"),
    ("collab", _case([SPAWN]), "belong to another profile"),
    ("collab", _case([{**SEND, "call": "receive_messages", "arguments": {}}], requirement="collab:list:tree"),
     "receive_messages is not a tool of the collab profile"),
    ("collab", _case([SPAWN], requirement="collab:list:tree", actors={"alice": {"collab_root": True},
                                                                      "bob": {"collab_root": True}}),
     "one root, not 2"),
    ("collab", _case([SPAWN], requirement="collab:list:tree", actors={"alice": {"collab_root": True},
                                                                      "ghost": {"registered": False,
                                                                                "collab_root": True}}),
     "cannot have aliases or be a tree root"),
])
def test_case_loader_keeps_profiles_apart(tmp_path, profile, case, complaint):
    with pytest.raises(CaseError, match=complaint):
        load_cases(_write_cases(tmp_path / "cases", [case], profile), manifest())


def test_collab_cases_get_an_app_of_their_own(tmp_path):
    root = {"alice": {"collab_root": True}}
    (case,) = load_cases(_write_cases(tmp_path / "cases", [_case([SPAWN], requirement="collab:list:tree",
                                                                 actors=root)], "collab"), manifest())
    assert case.profile == "collab" and case.needs_own_app and case.actors["alice"].collab_root


@pytest.mark.parametrize("call, arguments, profile, seconds", [
    ("wait_agent", {}, "messaging", 60), ("wait_agent", {"timeout_ms": 0}, "messaging", 0),
    ("wait_agent", {}, "collab", 30), ("wait_agent", {"timeout_ms": 0}, "collab", 10),
    ("wait_agent", {"timeout_ms": 12_500}, "collab", 12.5), ("wait_agent", {"timeout_ms": 3_600_000}, "collab", 60),
    ("spawn_agent", {}, "collab", 0),
])
def test_call_bounds_follow_each_profiles_wait_rules(call, arguments, profile, seconds):
    assert call_bound_s(call, arguments, profile) == pytest.approx(seconds + limits().call_s)


# -- judging against a scripted endpoint ---------------------------------------------


class ScriptedProvisioner:
    def __init__(self):
        self.roots = []

    def register(self, name, *, provider="manual", aliases=(), **collab):
        if collab.get("collab_root"):
            self.roots.append(name)
        return Caller(name=name, agent_id=f"id-{name}", token="t", aliases=tuple(aliases))

    def caller_env(self, caller):
        return {}

    def stranger_env(self):
        return {}


class ScriptedEndpoint:
    def __init__(self, responses):
        self.responses = list(responses)

    def handshake(self):
        return {}

    def call_tool(self, name, arguments, *, timeout):
        future: Future = Future()
        response, elapsed = self.responses.pop(0)
        request = {"method": "tools/call", "params": {"name": name, "arguments": arguments}}
        future.set_result(ToolOutcome(name, arguments, request, response, elapsed))
        return PendingCall(name, arguments, request, future, 0.0)

    def close(self):
        pass


def _run(tmp_path, steps, responses):
    case_file = _case(steps, requirement="send:receipt:admitted")
    (case,) = load_cases(_write_cases(tmp_path / "cases", [case_file]), manifest())
    recorder = VoteRecorder(item="t", case=case.id)
    endpoint = ScriptedEndpoint(responses)

    class Run(CaseRun):
        def _open(self, key):
            return endpoint

    Run(case, Target(), ScriptedProvisioner(), tmp_path, recorder).run()
    return recorder


RECEIPT = {"interaction_id": "ix_" + "a" * 32, "kind": "information", "state": "admitted",
           "recipient": {"agent_id": "b", "name": "bob"}, "created_at": "now"}


def _ok(structured, is_error=False):
    result = {"content": [{"type": "text", "text": json.dumps(structured)}], "structuredContent": structured}
    if is_error:
        result["isError"] = True
    return {"jsonrpc": "2.0", "id": 1, "result": result}


ERROR = {"error": {"code": "unknown_target", "message": "no such agent"}}


@pytest.mark.parametrize("steps, response, failed_requirement, stage", [
    ([SEND], _ok({**RECEIPT, "kind": "task"}), RESULT_REQUIREMENT, "conforms"),
    ([SEND], _ok(ERROR, is_error=True), "send:receipt:admitted", "succeeds"),
    ([SEND], {"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "bad"}}, "send:receipt:admitted",
     "returns a result"),
    ([{**SEND, "error": "unknown_target"}], _ok(ERROR), ERROR_REQUIREMENT, "isError"),
    ([{**SEND, "error": "unknown_target"}], _ok(RECEIPT), "send:receipt:admitted", "fails with unknown_target"),
    ([{**SEND, "error": "ambiguous_target"}], _ok(ERROR, is_error=True), "send:receipt:admitted", "ambiguous"),
    ([{**SEND, "error": "unknown_target", "error_mentions": ["bound"]}], _ok(ERROR, is_error=True),
     "send:receipt:admitted", "mentions"),
    ([{**SEND, "within_ms": 100}], _ok(RECEIPT), "send:receipt:admitted", "within"),
    ([{**SEND, "expect": [{"path": "kind", "equals": "task"}]}], _ok(RECEIPT), "send:receipt:admitted", "kind"),
    ([SEND], None, "send:receipt:admitted", "responds"),
])
def test_each_kind_of_wrong_response_fails_its_requirement(tmp_path, steps, response, failed_requirement, stage):
    elapsed = 500.0 if any("within_ms" in s for s in steps) else 1.0
    recorder = _run(tmp_path, steps + [dict(SEND, id="never")], [(response, elapsed)])
    (failure,) = recorder.failures
    assert failure.requirement == failed_requirement
    assert stage in failure.check + (failure.detail or "")
    assert failure.step == "send" and failure.request is not None
    assert all(v.step != "never" for v in recorder.votes), "the case goes on after a failure"


def test_collab_cases_vote_for_the_collab_profiles_own_checks(tmp_path):
    steps = [{**SPAWN, "expect": [{"path": "task_name", "equals": "/root/w"}]},
             {**SPAWN, "id": "refused", "error": "limit_exceeded"},
             {"id": "wait", "actor": "alice", "call": "wait_agent", "arguments": {}, "not_before_ms": 29000}]
    case_file = _case(steps, requirement="collab:spawn:task-name", actors={"alice": {"collab_root": True}})
    (case,) = load_cases(_write_cases(tmp_path / "cases", [case_file], "collab"), manifest())
    recorder, provisioner = VoteRecorder(item="t", case=case.id), ScriptedProvisioner()
    refused = {"error": {"code": "limit_exceeded", "message": "4 active"}}
    endpoint = ScriptedEndpoint([(_ok({"task_name": "/root/w"}), 1.0), (_ok(refused, is_error=True), 1.0),
                                 (_ok({"message": "", "timed_out": True}), 400.0)])
    opened = []

    class Run(CaseRun):
        def _open(self, key):
            opened.append(self.server_cmd)
            return endpoint

    Run(case, Target(), provisioner, tmp_path, recorder).run()
    assert provisioner.roots and opened == [Target().collab_server_cmd]
    structure = PROFILE_REQUIREMENTS["collab"]
    assert {v.requirement for v in recorder.votes if v.passed} == {
        "collab:spawn:task-name", structure["result"], structure["error"]}
    (failure,) = recorder.failures  # the wait came back after 0.4 s, not after 29
    assert failure.step == "wait" and "no sooner than 29000 ms" in failure.check and failure.detail == "took 400 ms"


def test_a_good_response_passes_the_implicit_and_explicit_checks(tmp_path):
    steps = [{**SEND, "expect": [{"path": "kind", "equals": "information"}]},
             {**SEND, "id": "refused", "error": "unknown_target"}]
    recorder = _run(tmp_path, steps, [(_ok(RECEIPT), 1.0), (_ok(ERROR, is_error=True), 1.0)])
    assert not recorder.failures
    passed = {v.requirement for v in recorder.votes}
    assert passed == {"send:receipt:admitted", RESULT_REQUIREMENT, ERROR_REQUIREMENT}
