"""compliance.json and compliance.md: every requirement, the failing step's evidence, scores."""

from __future__ import annotations

import json
import stat
from dataclasses import replace

from harness.contract.baseline import parse_baseline
from harness.contract.compliance import judge
from harness.contract.manifest import Manifest, Selection, manifest
from harness.contract.report import write_reports
from harness.contract.verdicts import Vote

REQUEST = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
           "params": {"name": "send_message", "arguments": {"target": "bob", "message": "é" * 5000}}}
RESPONSE = {"jsonrpc": "2.0", "id": 7, "result": {"content": [], "structuredContent": {"kind": "task"}}}


def _write(tmp_path, votes, baseline="", requirements=None):
    compliance = judge(requirements or manifest(), votes, Selection(), parse_baseline(baseline), [])
    return compliance, write_reports(tmp_path / "report", compliance, target={"server_cmd": ["srv"], "provisioner": "p:P"},
                                     tests={"passed": 1, "failed": 1})


def test_reports_list_every_requirement_with_its_result(tmp_path):
    votes = [Vote("wire:ping", True, "ping works", item="t1"),
             Vote("send:receipt:admitted", False, "kind equals \"information\"", item="t2", case="information/x",
                  step="send", detail='found "task"', request=REQUEST, response=RESPONSE)]
    compliance, (json_path, md_path) = _write(tmp_path, votes)
    document = json.loads(json_path.read_text("utf-8"))
    results = {r["id"]: r for r in document["requirements"]}
    assert set(results) == {r.id for r in manifest()}
    assert results["wire:ping"]["result"] == "pass"
    assert results["wire:json:parse-error"]["result"] == "not tested"
    failure = results["send:receipt:admitted"]
    assert failure["result"] == "fail" and failure["level"] == "MUST"
    assert failure["failures"][0]["request"]["params"]["name"] == "send_message"
    assert failure["failures"][0]["response"] == RESPONSE
    assert "more characters" in failure["failures"][0]["request"]["params"]["arguments"]["message"]
    ran = document["verdict"].pop("ran")
    assert document["verdict"] == {"compliant": False, "state": "not compliant", "interrupted_by": None,
                                   "exit_status": 1, "problems": list(compliance.problems), "warnings": []}
    assert ran["MUST"]["ran"] == 2 and ran["MUST"]["of"] > 2, "two MUSTs voted on, of the whole profile's"
    must = document["scores"]["MUST"]
    assert must["pass"] == 1 and must["fail"] == 1 and must["not_tested"] == must["total"] - 2
    assert stat.S_IMODE((tmp_path / "report").stat().st_mode) == 0o700

    markdown = md_path.read_text("utf-8")
    assert "**not compliant**" in markdown
    assert "### `send:receipt:admitted` (MUST): fail" in markdown
    assert "step `send`" in markdown and '"send_message"' in markdown and 'found "task"' in markdown
    assert "| `wire:json:parse-error` | MUST | not tested |" in markdown


def test_reports_show_deferred_baselined_and_stale_requirements(tmp_path):
    votes = [Vote("wire:ping", True, "ping works", item="t1"),
             Vote("send:receipt:admitted", False, "x", item="t2", case="information/x")]
    # The shipped manifest defers nothing today; the report must still show a deferral.
    shipped = manifest()
    held_back = replace(shipped["collab:interrupt:previous-status"], verified_by=None, deferred="needs a live child")
    requirements = Manifest(tuple(held_back if r.id == held_back.id else r for r in shipped))
    _, (json_path, md_path) = _write(tmp_path, votes, "wire:ping  # was broken\nsend:receipt:admitted  # known\n",
                                     requirements)
    results = {r["id"]: r for r in json.loads(json_path.read_text("utf-8"))["requirements"]}
    assert results["wire:ping"]["stale"] is True
    assert results["send:receipt:admitted"]["result"] == "expected failure"
    assert results["send:receipt:admitted"]["baselined"] == "known"
    deferred = results["collab:interrupt:previous-status"]
    assert "deferred" in deferred and deferred["result"] == "not tested" and not deferred["selected"]
    verified = results["envelope:format"]
    assert "verified_by" in verified and verified["result"] == "verified by the reference only"
    assert not verified["selected"]
    markdown = md_path.read_text("utf-8")
    assert "STALE baseline entry" in markdown and "deferred: " in markdown
    apart = markdown.split("## Verified by the reference only", 1)[1].split("\n## ", 1)[0]
    assert "| `envelope:format` | MUST | tests/codex/test_adapter_live.py" in apart


def test_reports_score_each_profile_and_name_one_left_out(tmp_path):
    votes = [Vote("send:receipt:admitted", True, "a receipt", item="t1")]
    compliance = judge(manifest(), votes, Selection(profiles=("messaging",)), parse_baseline(""), [])
    json_path, md_path = write_reports(tmp_path / "report", compliance, tests={},
                                       target={"server_cmd": ["srv"], "collab_server_cmd": None, "provisioner": "p:P"})
    document = json.loads(json_path.read_text("utf-8"))
    collab = document["profile_scores"]["collab"]
    assert collab["selected"] is False and collab["MUST"]["pass"] == 0
    assert collab["MUST"]["not_tested"] == collab["MUST"]["total"] > 0, "a profile left out is not tested"
    assert document["profile_scores"]["messaging"]["MUST"]["pass"] == 1
    # The headline is over the selected profile alone, without what only the reference can verify.
    messaging_musts = [r for r in manifest() if r.profile == "messaging" and r.level.name == "MUST"
                       and not r.verified_by]
    assert document["scored_profiles"] == ["messaging"]
    assert document["scores"]["MUST"]["total"] == document["profile_scores"]["messaging"]["MUST"]["total"] \
        == len(messaging_musts)
    assert set(document["reference_only"]) == {r.id for r in manifest() if r.verified_by}
    results = {r["id"]: r for r in document["requirements"]}
    spawn = results["collab:spawn:task-name"]
    assert spawn["profile"] == "collab" and not spawn["selected"]
    markdown = md_path.read_text("utf-8")
    folded = markdown[markdown.index("<details>"):]
    assert "none (the collab profile is not offered)" in markdown and "### Profiles not selected" in folded
    assert "| collab | MUST |" in folded and "| collab | MUST |" not in markdown[:markdown.index("<details>")]


def test_compliance_md_opens_with_the_verdict_and_why_and_folds_what_the_run_did_not_judge(tmp_path):
    votes = [Vote("wire:ping", True, "ping works", item="t1"),
             Vote("send:receipt:admitted", False, "kind equals \"information\"", item="t2", case="information/x")]
    compliance = judge(manifest(), votes, Selection(patterns=("wire:ping", "send:receipt:admitted")),
                       parse_baseline(""), [])
    _, md_path = write_reports(tmp_path / "report", compliance, target={"server_cmd": ["srv"], "provisioner": "p:P"},
                               tests={})
    markdown = md_path.read_text("utf-8")
    headings = [line for line in markdown.splitlines() if line.startswith("## ")]
    assert headings[0] == "## Why the run fails", headings
    assert markdown.index("- Verdict: ") < markdown.index("## Why the run fails") < markdown.index("## Scores")
    folded = markdown[markdown.index("<details>"):markdown.index("</details>")]
    reference_only = [r.id for r in manifest() if r.verified_by]
    assert reference_only and all(f"`{rid}`" in folded for rid in reference_only)
    assert "| `wire:json:parse-error` |" in folded, "an unselected row is folded"
    assert "| `wire:ping` |" not in folded and "| `wire:ping` |" in markdown


def test_a_teardown_error_counts_against_the_requirement_in_the_report(tmp_path):
    """A provisioner whose stop() fails: the test passed, but its teardown did not, and compliance.md says so."""
    import shlex

    from harness.contract.layout import REFERENCE_SERVER_CMD

    from .conftest import run_contract

    (tmp_path / "leaky_provisioner.py").write_text(
        "from harness.contract.reference import ReferenceProvisioner\n"
        "class LeakyProvisioner(ReferenceProvisioner):\n"
        "    def stop(self):\n"
        "        super().stop()\n"
        "        raise RuntimeError('the home is still locked after stop')\n", "utf-8")
    run = run_contract(tmp_path, "--server-cmd", shlex.join(REFERENCE_SERVER_CMD), "--provisioner",
                       "leaky_provisioner:LeakyProvisioner", "--profiles", "messaging",
                       "--requirement", "send:receipt:admitted")
    assert run.returncode == 1, run.output[-3000:]
    result = run.result("send:receipt:admitted")
    assert result["result"] == "fail"
    (failure,) = result["failures"]
    assert failure["step"] == "teardown" and "the home is still locked after stop" in failure["detail"]
    assert "the test's teardown completes" in run.markdown
    assert run.compliance["tests"].get("teardown error") == 1
