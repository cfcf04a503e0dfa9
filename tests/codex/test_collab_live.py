"""The collaboration profile live: a parent spawns a child through real Codex threads.

The probe is computed from the model request log only, so the exchange counts
only if each leg reached an actual model input.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from harness.codex_install import project_root
from harness.lab import CodexLab
from harness.probe import ProbeExpectation, collab_probe, requests_from_log

pytestmark = pytest.mark.codex

SCENARIO = project_root() / "scenarios" / "collab.toml"


def expectation() -> tuple[str, ProbeExpectation]:
    doc = tomllib.loads(SCENARIO.read_text("utf-8"))
    probe = doc["probe"]
    return doc["prompts"]["root"][0], ProbeExpectation(
        child="/root/worker", question=probe["question"], reply=probe["reply"],
        child_final=probe["child_final"], final=probe["final"])


def test_parent_child_exchange(tmp_path: Path):
    prompt, expect = expectation()
    with CodexLab(tmp_path, SCENARIO, agents=("root",), profile="collab") as lab:
        turn = lab.prompt("root", prompt)
        assert lab.await_turn("root", turn, 60)["status"] == "completed"
        agents = {a["path"]: a for a in lab.control().call("agents")["agents"] if a.get("path")}
        owners = {o["name"]: o for o in lab.control().call("owners")["owners"]}
        log = (tmp_path / "artifacts" / "model-requests.jsonl").read_text("utf-8").splitlines()
    # the child is a real Codex thread in the root's app-server, one level below /root
    assert set(agents) == {"/root", "/root/worker"}
    child = agents["/root/worker"]
    assert child["provider_session_id"] and child["provider_session_id"] != agents["/root"]["provider_session_id"]
    assert owners["/root/worker"]["pid"] == owners["root"]["pid"]
    summary = collab_probe(requests_from_log(log, "root"), expect)
    assert summary["success"], summary
    assert summary["nativeMessageOccurrences"] >= 4 and summary["requests"] >= 8


def test_probe_fails_when_a_leg_is_missing():
    _, expect = expectation()
    parent_only = [{"input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
                    "emitted": [{"type": "message", "phase": "final_answer",
                                 "content": [{"type": "output_text", "text": expect.final}]}]}]
    summary = collab_probe(parent_only, expect)
    # the right final text alone is not success
    assert summary["finalExact"] is True and summary["success"] is False
    assert not (summary["childQuestionObserved"] or summary["parentReplyObserved"] or summary["childFinalObserved"])
