"""Merging contract-suite shards: the votes of all shards judged as one run; what is refused and flagged."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.contract.baseline import Baseline
from harness.contract.compliance import Result, judge
from harness.contract.manifest import Level, Selection, manifest
from harness.contract.shard_compliance import ContractMergeRefused, merge_compliance
from harness.contract.report import write_reports
from harness.contract.verdicts import Vote
from harness.shards import Shard, plan

SELECTION = Selection(level=Level.MAY, patterns=("wire",))
ITEMS = {  # test item -> the requirement it votes for, and whether it passed
    "suite/test_wire.py::test_ping": ("wire:ping", True),
    "suite/test_wire.py::test_unknown_method": ("wire:method:unknown", True),
    "suite/test_wire.py::test_unknown_method_again": ("wire:method:unknown", False),
    "suite/test_wire.py::test_parse_error": ("wire:json:parse-error", True),
}


def votes(items) -> list[Vote]:
    return [Vote(requirement=ITEMS[i][0], passed=ITEMS[i][1], check="the answer is right", item=i,
                 detail=None if ITEMS[i][1] else "it was not") for i in items]


def shards(tmp_path: Path, count: int = 2, *, extra_cases: dict[int, list[str]] | None = None) -> list[Path]:
    """What ``runner.py contract --shard K/count`` writes for ITEMS, split as the plugin splits them."""
    split = plan(list(ITEMS), count)
    folders = []
    for index in range(1, count + 1):
        described = split.describe(Shard(index, count), order=list(ITEMS))
        described["cases"] += (extra_cases or {}).get(index, [])
        mine = described["cases"]
        compliance = judge(manifest(), votes(mine), SELECTION, Baseline(), [])
        folder = tmp_path / f"shard-{index}"
        write_reports(folder, compliance, target={"server_cmd": ["srv"]}, tests={"passed": len(mine)},
                      extra={"shard": described, "votes": [v.to_json() for v in votes(mine)]})
        cases = "".join(f'<testcase classname="wire" name="{i}"/>' for i in mine)
        (folder / "junit.xml").write_text(f'<testsuites><testsuite name="pytest" tests="{len(mine)}" failures="0" '
                                          f'errors="0" skipped="0">{cases}</testsuite></testsuites>')
        folders.append(folder)
    return folders


def test_the_merged_verdict_is_the_verdict_of_all_votes_together(tmp_path):
    merged = merge_compliance(shards(tmp_path), tmp_path / "merged")
    whole = judge(manifest(), votes(ITEMS), SELECTION, Baseline(), [])
    assert merged.problems == [] and merged.compliance.problems == whole.problems
    assert {v.requirement.id: v.result for v in merged.compliance.verdicts} == {
        v.requirement.id: v.result for v in whole.verdicts}
    assert merged.compliance.verdict("wire:method:unknown").result is Result.FAIL and not merged.compliance.ok
    document = json.loads((tmp_path / "merged" / "compliance.json").read_text())
    assert [s["index"] for s in document["merge"]["shards"]] == [1, 2]
    cases = [c.get("name") for c in ET.parse(tmp_path / "merged" / "junit.xml").getroot().iter("testcase")]
    assert sorted(cases) == sorted(ITEMS)
    assert (tmp_path / "merged" / "compliance.md").read_text().count("Merged from 2 shards") == 1


def test_a_missing_shard_leaves_its_tests_untested_and_fails_the_merge(tmp_path):
    first, _second = shards(tmp_path)
    merged = merge_compliance([first], tmp_path / "merged")
    assert "contract shard 2 of 2 missing: their tests are not in this report" in merged.problems
    assert not merged.compliance.ok


def test_a_shard_given_twice_is_flagged_and_its_votes_counted_once(tmp_path):
    first, second = shards(tmp_path)
    again = tmp_path / "shard-1-again"
    shutil.copytree(first, again)
    merged = merge_compliance([first, second, again], tmp_path / "merged")
    assert merged.problems == ["contract shard 1 is given twice: shard-1 and shard-1-again; the first is kept"]
    assert not merged.compliance.ok
    whole = judge(manifest(), votes(ITEMS), SELECTION, Baseline(), [])
    counted = [(v.requirement.id, v.passes, len(v.failures), v.items) for v in merged.compliance.verdicts]
    assert counted == [(v.requirement.id, v.passes, len(v.failures), v.items) for v in whole.verdicts]


def test_a_test_in_two_shards_is_flagged(tmp_path):
    split = plan(list(ITEMS), 2)
    stray = next(i for i in ITEMS if split.assignment[i] == 1)
    merged = merge_compliance(shards(tmp_path, extra_cases={2: [stray]}), tmp_path / "merged")
    assert f"contract test {stray} ran in shards 1 and 2; the first is kept" in merged.problems and not merged.compliance.ok


def test_shards_of_another_suite_version_are_refused_unless_forced(tmp_path):
    folders = shards(tmp_path)
    document = json.loads((folders[1] / "compliance.json").read_text())
    document["suite_version"] = "0.0.1+0000000000000000"
    (folders[1] / "compliance.json").write_text(json.dumps(document))
    with pytest.raises(ContractMergeRefused, match="differ in suite version"):
        merge_compliance(folders, tmp_path / "merged")
    merged = merge_compliance(folders, tmp_path / "forced", force=True)
    assert merged.warnings and merged.compliance.verdict("wire:ping").result is Result.PASS


def test_a_report_that_is_no_shard_cannot_be_merged(tmp_path):
    folder = tmp_path / "whole"
    write_reports(folder, judge(manifest(), votes(ITEMS), SELECTION, Baseline(), []), target={}, tests={})
    with pytest.raises(ValueError, match="not a shard report"):
        merge_compliance([folder], tmp_path / "merged")
