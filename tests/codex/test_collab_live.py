"""The collaboration profile live: a parent spawns a child through real Codex threads.

One exchange (``scenarios/collab.toml``) runs once per test process; each test
then checks one requirement against what it left behind. The probe is computed
from the model request log only, so a leg counts only if it reached an actual
model input.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from harness.codex.install import project_root
from harness.contract.manifest import requirement
from harness.acceptance.reference import ReferenceLab
from harness.model.log import ModelRequestLog
from harness.model.probe import ProbeExpectation, collab_probe, route_requests

pytestmark = pytest.mark.codex

SCENARIO = project_root() / "scenarios" / "collab.toml"


def expectation() -> tuple[str, ProbeExpectation]:
    doc = tomllib.loads(SCENARIO.read_text("utf-8"))
    probe = doc["probe"]
    return doc["prompts"]["root"][0], ProbeExpectation(
        child="/root/worker", question=probe["question"], reply=probe["reply"],
        child_final=probe["child_final"], final=probe["final"])


def _input_texts(request: dict[str, Any]) -> list[str]:
    """The text parts of a model request's input items."""
    return [part.get("text", "") for item in request["input"] if isinstance(item, dict)
            for part in item.get("content") or [] if isinstance(part, dict)]


@pytest.fixture(scope="module")
def exchange(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The root's prompt run to completion: the tree, the owners, the probe and the model requests."""
    tmp_path = tmp_path_factory.mktemp("collab-live")
    prompt, expect = expectation()
    with ReferenceLab(tmp_path, SCENARIO, agents=("root",), profile="collab") as lab:
        turn = lab.prompt("root", prompt)
        status = lab.await_turn("root", turn, 60)["status"]
        agents = {a["path"]: a for a in lab.control().call("agents")["agents"] if a.get("path")}
        owners = {o["name"]: o for o in lab.control().call("owners")["owners"]}
        log = ModelRequestLog.load(tmp_path / "artifacts" / "model-requests.jsonl")
    requests = route_requests(log, "root")
    return {"status": status, "agents": agents, "owners": owners, "requests": requests,
            "summary": collab_probe(requests, expect), "expect": expect}


@requirement("collab:child:starts")
def test_the_child_runs_as_a_thread_of_its_own(exchange):
    assert exchange["status"] == "completed"
    agents, owners = exchange["agents"], exchange["owners"]
    # the child is a real Codex thread in the root's app-server, one level below /root
    assert set(agents) == {"/root", "/root/worker"}
    child = agents["/root/worker"]
    assert child["provider_session_id"] and child["provider_session_id"] != agents["/root"]["provider_session_id"]
    assert owners["/root/worker"]["pid"] == owners["root"]["pid"]
    child_inputs = [r for r in exchange["requests"]
                     if any(t.startswith("Message Type: NEW_TASK\nTask name: /root/worker\n") for t in _input_texts(r))]
    assert child_inputs, "no model request was made in the child's conversation"


@requirement("collab:envelope:delivered")
def test_mail_reaches_each_model_in_the_collaboration_envelope(exchange):
    summary = exchange["summary"]
    # each leg is an exact envelope (type, task name, sender, payload) found in a model input
    assert summary["childQuestionObserved"] and summary["parentReplyObserved"], summary
    assert summary["nativeMessageOccurrences"] >= 4 and summary["requests"] >= 8, summary


@requirement("collab:sender:session")
def test_the_childs_message_is_sent_as_the_child(exchange):
    expect = exchange["expect"]
    # The child called send_message through the root's MCP server and credential; the parent's model
    # sees the child's path as Sender, never /root.
    assert exchange["owners"]["/root/worker"]["pid"] == exchange["owners"]["root"]["pid"]
    assert exchange["summary"]["childQuestionObserved"], exchange["summary"]
    wrong = f"Task name: {expect.parent}\nSender: {expect.parent}\nPayload:\n{expect.question}"
    assert not any(wrong in t for r in exchange["requests"] for t in _input_texts(r))


@requirement("collab:child:notifies-parent")
def test_the_childs_final_answer_reaches_its_parent(exchange):
    summary = exchange["summary"]
    assert summary["childFinalObserved"] and summary["finalExact"], summary
    assert summary["success"], summary


def test_probe_fails_when_a_leg_is_missing():
    _, expect = expectation()
    parent_only = [{"input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
                    "emitted": [{"type": "message", "phase": "final_answer",
                                 "content": [{"type": "output_text", "text": expect.final}]}]}]
    summary = collab_probe(parent_only, expect)
    # the right final text alone is not success
    assert summary["finalExact"] is True and summary["success"] is False
    assert not (summary["childQuestionObserved"] or summary["parentReplyObserved"] or summary["childFinalObserved"])


def _interrupt_script() -> dict[str, Any]:
    """A child that spawns a grandchild and then holds its own turn; the root asks again after."""
    def task(path: str, **extra: Any) -> dict:
        return {"envelope": {"type": "NEW_TASK", "contains": f"Task name: {path}\n", **extra}}

    def call(name: str, **arguments: Any) -> dict:
        return {"function_call": {"namespace": "mcp__collaboration", "name": name, "arguments": arguments}}

    final = lambda text: {"message": {"phase": "final_answer", "text": text}}  # noqa: E731
    return {"scenario": {"name": "collab-interrupt"}, "rules": {"root": [
        # the grandchild /root/slow/deep: holds until released
        {"id": "deep-holds", "when": [task("/root/slow/deep")], "hold": "deep", "emit": [final("deep done")]},
        # the child /root/slow
        {"id": "slow-again", "when": [task("/root/slow", last=True, matches=r"\[again\]")], "emit": [final("slow is back")]},
        {"id": "slow-holds", "when": [task("/root/slow"), {"tool_output": {"tool": "spawn_agent"}}], "hold": "slow",
         "emit": [final("never sent: this turn is interrupted")]},
        {"id": "slow-spawns", "when": [task("/root/slow", last=True)],
         "emit": [call("spawn_agent", task_name="deep", message="deep work", fork_turns="none")]},
        # the root
        {"id": "root-done", "when": [{"envelope": {"type": "FINAL_ANSWER", "contains": "slow is back"}}],
         "emit": [final("the helper is available again")]},
        {"id": "root-asks-again", "when": [{"envelope": {"type": "FINAL_ANSWER", "contains": "was interrupted"}}],
         "unless": [{"tool_call": {"tool": "followup_task"}}],
         "emit": [call("followup_task", target="/root/slow", message="[again] are you there?")]},
        {"id": "root-waits-again", "when": [{"tool_output": {"tool": "followup_task", "last": True}}],
         "emit": [call("wait_agent", timeout_ms=60000)]},
        {"id": "root-waits", "when": [{"tool_output": {"tool": "spawn_agent", "last": True}}],
         "emit": [call("wait_agent", timeout_ms=60000)]},
        {"id": "root-spawns", "when": [{"user_text": {"last": True, "contains": "slow helper"}}],
         "emit": [call("spawn_agent", task_name="slow", message="take your time", fork_turns="none")]},
    ]}}


@requirement("collab:interrupt:previous-status")
def test_interrupting_a_child_ends_exactly_its_turn_and_it_takes_a_later_task(tmp_path: Path):
    from harness.model.rules import script_from_document
    from peerwire.control import ControlClient

    script = script_from_document(_interrupt_script(), source="collab-interrupt")
    with ReferenceLab(tmp_path, script, agents=("root",), profile="collab") as lab:
        root_turn = lab.prompt("root", "Start a slow helper and check on it.")
        lab.model.wait_for_hold("slow", timeout=60)
        lab.model.wait_for_hold("deep", timeout=60)
        owners = {o["name"]: o for o in lab.control().call("owners")["owners"]}
        slow_turn, deep_turn = owners["/root/slow"]["active_turn"], owners["/root/slow/deep"]["active_turn"]
        assert slow_turn and deep_turn
        # what the root's MCP server does for its model: the call, as the root's session
        result = ControlClient(lab.home, lab.agents["root"].token).call(
            "collab.interrupt_agent", {"target": "/root/slow"})
        assert result == {"previous_status": "active"}
        assert lab.await_turn("root", root_turn, 60)["status"] == "completed"
        owners = {o["name"]: o for o in lab.control().call("owners")["owners"]}
        turns = {t["turn_id"]: t["status"] for t in owners["/root/slow"]["completed_turns"]}
        # exactly the child's turn ended interrupted; the grandchild's turn is still running
        assert turns[slow_turn] == "interrupted"
        assert owners["/root/slow/deep"]["active_turn"] == deep_turn
        assert list(turns.values()).count("completed") == 1  # the later task, answered
        lab.model.release("deep")
        log = ModelRequestLog.load(tmp_path / "artifacts" / "model-requests.jsonl")
    finals = [item for r in route_requests(log, "root") for item in r["emitted"]
              if item.get("phase") == "final_answer"]
    assert any("the helper is available again" in json_text(item) for item in finals)


def json_text(item: dict) -> str:
    return "".join(part.get("text", "") for part in item.get("content") or [])
