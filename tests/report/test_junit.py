"""junit.xml: one test case per check, named by the scenario run's identity."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from harness.report import SecretScan, load_report, write_report
from harness.report.junit import junit_xml
from tests.evidence.exchange import ROLLOUT_B, TASK_ID, run_description, task_exchange


def test_every_check_is_a_test_case_of_its_scenario_run(tmp_path: Path) -> None:
    for mode in ("attached", "background"):
        task_exchange().write(tmp_path / "artifacts" / f"task.{mode}")
    run = run_description()
    base = run["scenarios"][0]
    failing = {"id": "reply-consumed", "verdict": "fail", "summary": "A answered before the reply <arrived>",
               "evidence": {"records": [TASK_ID], "rollout": [f"rollouts/B/{ROLLOUT_B}:5"]}}
    run["scenarios"] = [{**base, "mode": "attached", "artifacts_dir": "task.attached/", "passed": False,
                         "checks": [*base["checks"], failing]},
                        {**base, "mode": "background", "artifacts_dir": "task.background/", "persona": "terse",
                         "trial": 2}]
    folder = write_report(tmp_path / "reports", run, tmp_path / "artifacts", secrets=SecretScan({}))
    root = ET.fromstring((folder / "junit.xml").read_bytes())
    assert (folder / "junit.xml").read_text(encoding="utf-8") == junit_xml(load_report(folder))
    assert root.tag == "testsuites" and (root.get("tests"), root.get("failures")) == ("3", "1")
    suites = {suite.get("name"): suite for suite in root}
    assert list(suites) == ["task · attached · scripted", "task · background · scripted · persona terse · trial 2"]
    cases = [(case.get("classname"), case.get("name")) for case in root.iter("testcase")]
    assert cases == [("task · attached · scripted", "task-reply-correlated"),
                     ("task · attached · scripted", "reply-consumed"),
                     ("task · background · scripted · persona terse · trial 2", "task-reply-correlated")]
    (failure,) = root.iter("failure")
    assert failure.get("message") == "A answered before the reply <arrived>"
    failed_case = next(c for c in root.iter("testcase") if c.find("failure") is not None)
    assert f"rollout: rollouts/B/{ROLLOUT_B}:5" in failed_case.find("system-out").text
    properties = {p.get("name"): p.get("value") for p in suites["task · attached · scripted"].iter("property")}
    assert properties["mode"] == "attached" and properties["artifacts_dir"] == "artifacts/task.attached/"
