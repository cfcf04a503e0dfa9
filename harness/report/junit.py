"""JUnit XML of an acceptance report, so CI systems show its verdicts natively.

One ``<testsuite>`` per scenario run and one ``<testcase>`` per check:
``classname`` is the run's identity label (scenario · mode · provider [· persona]
[· A→B kinds] [· trial]), ``name`` the check id. A failed check is a ``<failure>`` whose message
is its summary, a skipped one (an agent's kind lacks what it needs) a ``<skipped>`` saying so; the evidence it cites (and evidence the artifacts lack) is in
the case's ``<system-out>``. Written from ``report.json`` alone, so a merged
report gets the same file as a run.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from harness.evidence.identity import RunIdentity

SUITES_NAME = "peerwire acceptance"


def junit_xml(report: dict[str, Any]) -> str:
    """The JUnit XML document of a report (see the module docs)."""
    run = report["run"]
    scenarios = report["scenarios"]
    root = ET.Element("testsuites", name=SUITES_NAME, tests=str(sum(len(s["checks"]) for s in scenarios)),
                      failures=str(sum(c["verdict"] == "fail" for s in scenarios for c in s["checks"])),
                      skipped=str(sum(c["verdict"] == "skip" for s in scenarios for c in s["checks"])),
                      errors="0", time=_seconds(sum(s.get("wall_s") or 0 for s in scenarios)))
    for scenario in scenarios:
        identity = RunIdentity.of(scenario, provider=run.get("provider"))
        label = identity.label()
        checks = scenario["checks"]
        suite = ET.SubElement(root, "testsuite", name=label, tests=str(len(checks)),
                              failures=str(sum(c["verdict"] == "fail" for c in checks)), errors="0",
                              skipped=str(sum(c["verdict"] == "skip" for c in checks)),
                              time=_seconds(scenario.get("wall_s") or 0),
                              timestamp=str(run.get("started_at") or ""))
        properties = ET.SubElement(suite, "properties")
        for name, value in (("run_id", run["run_id"]), ("codex_version", run.get("codex_version")),
                            ("artifacts_dir", scenario["artifacts_dir"]), *identity.to_json().items()):
            ET.SubElement(properties, "property", name=str(name), value="" if value is None else str(value))
        for check in checks:
            case = ET.SubElement(suite, "testcase", classname=label, name=check["id"], time="0")
            if check["verdict"] == "skip":
                ET.SubElement(case, "skipped", message=check["summary"])
            elif check["verdict"] != "pass":
                failure = ET.SubElement(case, "failure", message=check["summary"], type="check failed")
                failure.text = check["summary"]
            evidence = _evidence_text(check)
            if evidence:
                ET.SubElement(case, "system-out").text = evidence
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(path: str | os.PathLike[str], report: dict[str, Any]) -> Path:
    """Write :func:`junit_xml` of ``report`` to ``path`` (parents created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(junit_xml(report), encoding="utf-8")
    return path


def _evidence_text(check: dict[str, Any]) -> str:
    lines = [f"{kind}: {', '.join(map(str, refs))}" for kind, refs in check["evidence"].items() if refs]
    lines += [f"missing evidence: {problem}" for problem in check.get("evidence_problems") or []]
    return "\n".join(lines)


def _seconds(value: float) -> str:
    return f"{float(value):.3f}"
