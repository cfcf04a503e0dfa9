"""A check skipped for an agent's kind: a verdict of its own, never a pass, never a failure, always named.

A run passes when no check failed and one passed at least; its totals, JUnit
and pages count skips apart from passes.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.acceptance.checks.kernel import CheckSpec, Evidence, Verdict, judge
from harness.acceptance.observations import Skipped
from harness.acceptance.result import scenario_result
from harness.capabilities import agent_kind
from harness.report import SecretScan, load_report, write_report
from tests.evidence.exchange import run_description, task_exchange


class Kinds:
    """What a judgement asks of the observations to decide a skip (the real ``Observations.require`` rule)."""

    def __init__(self, kinds: dict[str, str]):
        self.kinds = kinds

    def require(self, agent: str, capability: str) -> None:
        kind = agent_kind(self.kinds.get(agent, "codex"))
        if not kind.can(capability):
            raise Skipped(agent, kind.name, capability, kind.cell(capability).how)


def needs_call_meta(obs, params, ev):
    ev.cite("ix_1")
    obs.require(params["agent"], "call_meta")
    return "bound"


REGISTRY = {"needs_call_meta": needs_call_meta}


def test_a_check_needing_what_a_kind_lacks_is_a_skip_naming_agent_kind_and_capability():
    spec = CheckSpec("receipt-binds-the-call", "needs_call_meta", {"agent": "A"})
    skipped = judge(spec, Kinds({"A": "opencode"}), REGISTRY)
    assert (skipped.passed, skipped.failed, skipped.verdict) == (False, False, "skip")
    assert skipped.skipped == {"agent": "A", "kind": "opencode", "capability": "call_meta"}
    assert skipped.summary.startswith("skipped: A is opencode, which lacks call_meta: its tools/call carries no _meta")
    assert skipped.as_dict()["skipped"] == skipped.skipped and skipped.as_dict()["evidence"]["records"] == ["ix_1"]
    judged = judge(spec, Kinds({"A": "codex"}), REGISTRY)
    assert (judged.verdict, judged.summary, judged.skipped) == ("pass", "bound", None)


@pytest.mark.parametrize("verdicts, passed", [
    (["pass", "skip"], True), (["skip"], False), (["pass", "fail", "skip"], False), (["pass"], True), ([], False),
])
def test_a_run_passes_on_its_passes_alone(verdicts, passed):
    made = [Verdict(f"c{i}", v == "pass", v, Evidence(),
                    {"agent": "B", "kind": "opencode", "capability": "inject"} if v == "skip" else None)
            for i, v in enumerate(verdicts)]
    result = scenario_result(name="s", mode="attached", persona=None, provider="scripted", trial=None,
                             description="d", key="s.attached", verdicts=made, wall_s=1.0, pair="codex,opencode")
    assert result["passed"] is passed and result["pair"] == "codex,opencode"
    assert [c["verdict"] for c in result["checks"]] == verdicts


def test_a_report_counts_skips_apart_and_shows_whom_they_were_for(tmp_path: Path):
    task_exchange(effort_a="low", effort_b=None).write(tmp_path / "artifacts" / "task")
    run = run_description(checks=[
        {"id": "passes", "verdict": "pass", "summary": "ok", "evidence": {}},
        {"id": "receipt-binds-the-call", "verdict": "skip", "summary": "skipped: A is opencode, which lacks call_meta",
         "evidence": {}, "skipped": {"agent": "A", "kind": "opencode", "capability": "call_meta"}}])
    run["scenarios"][0]["pair"] = "opencode,codex"
    run["agent_kinds"] = [agent_kind("codex").to_json(), agent_kind("opencode").to_json()]
    folder = write_report(tmp_path / "reports", run, tmp_path / "artifacts", secrets=SecretScan({}))
    report = load_report(folder)
    assert report["run"]["totals"] | {} == {"scenarios": 1, "scenarios_failed": 0, "checks": 2, "checks_failed": 0,
                                            "checks_skipped": 1}
    assert report["scenarios"][0]["identity"]["label"] == "task · attached · scripted · opencode→codex"
    assert [row["kind"] for row in report["run"]["agent_kinds"]] == ["codex", "opencode"]
    suite = ET.fromstring((folder / "junit.xml").read_text("utf-8")).find("testsuite")
    assert (suite.get("failures"), suite.get("skipped")) == ("0", "1")
    (case,) = [c for c in suite.iter("testcase") if c.get("name") == "receipt-binds-the-call"]
    assert case.find("skipped") is not None and case.find("failure") is None
    markdown = (folder / "report.md").read_text("utf-8")
    assert "| `receipt-binds-the-call` | skip (A opencode lacks call_meta) |" in markdown
    assert "12 checks" not in markdown and "(0 failed, 1 skipped)" in markdown
    assert "| `opencode` | **no** | **no** | yes |" in markdown
    page = (folder / "report.html").read_text("utf-8")
    assert "skip (A opencode lacks call_meta)" in page and 'id="capabilities"' in page
    assert json.loads((folder / "report.json").read_text("utf-8"))["run"]["passed"] is True
