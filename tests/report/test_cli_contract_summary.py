"""``peerwire-harness report PATH`` reads a contract run's report as well as an acceptance run's."""

from __future__ import annotations

import io
import json

import pytest

from harness.contract.baseline import parse_baseline
from harness.contract.compliance import judge
from harness.contract.manifest import Selection, manifest
from harness.contract.report import write_reports
from harness.contract.verdicts import Vote
from harness.report import cli


@pytest.mark.parametrize("which", ["folder", "file"])
def test_a_contract_report_is_summarized_with_its_verdict_and_failures(tmp_path, which):
    votes = [Vote("wire:ping", True, "ping works", item="t1"),
             Vote("wire:method:unknown", False, "error -32601", item="t2", detail="got -32602")]
    compliance = judge(manifest(), votes, Selection(patterns=("wire:ping", "wire:method:unknown")),
                       parse_baseline(""), [])
    json_path, _ = write_reports(tmp_path / "report", compliance, target={"server_cmd": ["srv"]}, tests={})
    out = io.StringIO()
    status = cli.main([str(tmp_path / "report" if which == "folder" else json_path)], out=out)
    text = out.getvalue()
    assert status == json.loads(json_path.read_text("utf-8"))["verdict"]["exit_status"] == 1
    assert "contract run of srv: not compliant (exit status 1)" in text
    assert "FAIL MUST wire:method:unknown: expected error -32601; found got -32602" in text
