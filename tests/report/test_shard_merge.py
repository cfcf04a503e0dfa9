"""A sharded run, merged, judges exactly as the same run unsharded.

Real processes as CI starts them: ``runner.py --shard K/2`` and ``runner.py
contract --shard K/2`` next to an unsharded run of the same selection, then
``runner.py report merge`` over the shard folders. Kept affordable: three
acceptance scenario runs of one-agent scenarios (one failing by design, one
scenario in two modes, so the two modes may land in different shards) and
five of the contract suite's wire requirements (:data:`CONTRACT`; the whole
wire area fuzzes for a minute); at most :data:`AT_ONCE` of the six runs go at
a time, so the test's load stays what one more test worker's would be.
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.patience import RUN_S

pytestmark = [pytest.mark.codex, pytest.mark.slow, pytest.mark.heavy]

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "runner.py"
SHARDS = 2
AT_ONCE = 2
"""Runs that go at a time: each starts Codex agents, app-servers and MCP servers of its own."""
CONTRACT = ["wire:initialize:*", "wire:ping", "wire:method:unknown", "wire:params:invalid"]
"""Requirements whose tests the contract runs split: five tests, a few seconds each run."""


def scenarios(folder: Path) -> Path:
    """``negative`` in two modes (attached and background) and ``negative-misjudged``: negative's run with a
    check that expects the wrong error code, so it fails however the run goes."""
    folder.mkdir()
    text = (ROOT / "scenarios" / "negative.toml").read_text(encoding="utf-8")
    both = text.replace('name = "negative"\n', 'name = "negative"\nmodes = ["attached", "background"]\n', 1)
    misjudged = text.replace('name = "negative"', 'name = "negative-misjudged"', 1).replace(
        'target = "Zed"\ncode = "unknown_target"', 'target = "Zed"\ncode = "ambiguous_target"', 1)
    assert "background" in both and 'target = "Zed"\ncode = "ambiguous_target"' in misjudged
    assert misjudged.count("negative-misjudged") == 1
    (folder / "negative.toml").write_text(both, encoding="utf-8")
    (folder / "negative-misjudged.toml").write_text(misjudged, encoding="utf-8")
    return folder


def run(*argv: str) -> tuple[int, str]:
    try:
        done = subprocess.run([sys.executable, str(RUNNER), *argv], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=RUN_S)
    except subprocess.TimeoutExpired as expired:
        output = expired.output.decode(errors="replace") if isinstance(expired.output, bytes) else expired.output
        pytest.fail(f"runner.py {' '.join(argv)} did not finish within {RUN_S:.0f}s:\n{(output or '')[-3000:]}")
    return done.returncode, done.stdout


def acceptance_verdicts(folder: Path) -> dict[tuple[str, str], str]:
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    return {(s["identity"]["label"], c["id"]): c["verdict"] for s in report["scenarios"] for c in s["checks"]}


def contract_verdicts(folder: Path) -> tuple[bool, dict[str, str], dict]:
    document = json.loads((folder / "compliance.json").read_text(encoding="utf-8"))
    return (document["verdict"]["compliant"], {r["id"]: r["result"] for r in document["requirements"]},
            document["scores"])


def junit_cases(path: Path) -> list[tuple[str | None, str | None, bool]]:
    return sorted((c.get("classname"), c.get("name"), c.find("failure") is not None)
                  for c in ET.parse(path).getroot().iter("testcase"))


def test_merged_shards_give_the_verdicts_of_the_unsharded_run(tmp_path):
    folder = scenarios(tmp_path / "scenarios")
    acceptance = ["--scenarios-dir", str(folder), "--runs-root", str(tmp_path / "runs"), "--workers", "1"]
    contract = ["contract", *[f"--requirement={name}" for name in CONTRACT], "-n", "0"]
    runs = {
        "whole": [*acceptance, "--report-dir", str(tmp_path / "whole" / "acceptance")],
        "contract whole": [*contract, "--report-dir", str(tmp_path / "whole" / "contract")],
    }
    for k in range(1, SHARDS + 1):
        shard = f"{k}/{SHARDS}"
        out = tmp_path / "shards" / f"shard-{k}"
        runs[f"shard {shard}"] = [*acceptance, "--shard", shard, "--report-dir", str(out / "acceptance"),
                                  "--junit", str(out / "acceptance-junit.xml")]
        runs[f"contract shard {shard}"] = [*contract, "--shard", shard, "--report-dir", str(out / "contract")]
    with ThreadPoolExecutor(AT_ONCE) as pool:
        results = dict(zip(runs, pool.map(lambda argv: run(*argv), runs.values())))
    assert results["whole"][0] == 1, results["whole"][1][-3000:]  # negative-misjudged fails, by design
    assert results["contract whole"][0] == 0, results["contract whole"][1][-3000:]
    shard_lines = [line for name, (_, out) in results.items() if name.startswith("shard") for line in out.splitlines()
                   if line.startswith("runner: shard ")]
    assert len(shard_lines) == SHARDS and all("of 3 scenario runs" in line for line in shard_lines)

    status, output = run("report", "merge", str(tmp_path / "shards"), "--out", str(tmp_path / "merged"))
    assert status == 1, output  # the failing check, nothing else
    (whole,) = (tmp_path / "whole" / "acceptance").iterdir()
    merged = tmp_path / "merged" / "acceptance"
    expected = acceptance_verdicts(whole)
    assert acceptance_verdicts(merged) == expected
    assert {key for key, verdict in expected.items() if verdict == "fail"} == {
        ("negative-misjudged · attached · scripted", "model-sees-unknown-target")}
    report = json.loads((merged / "report.json").read_text(encoding="utf-8"))
    assert report["run"]["problems"] == [] and len(report["run"]["merged_from"]) == SHARDS
    assert junit_cases(merged / "junit.xml") == junit_cases(whole / "junit.xml")
    assert (merged / "report.html").is_file() and (merged / "report.md").is_file()

    assert contract_verdicts(tmp_path / "merged" / "contract") == contract_verdicts(tmp_path / "whole" / "contract")
    merged_junit = {(c, n) for c, n, _ in junit_cases(tmp_path / "merged" / "contract" / "junit.xml")}
    assert merged_junit == {(c, n) for c, n, _ in junit_cases(tmp_path / "whole" / "contract" / "junit.xml")}
    durations = json.loads((tmp_path / "merged" / "durations.json").read_text(encoding="utf-8"))
    assert sorted(durations["acceptance"]) == sorted({s["identity"]["slug"] for s in report["scenarios"]})
    assert len(durations["contract"]) == len(merged_junit)

    # Leave a shard out: the merge says which, and fails.
    status, output = run("report", "merge", str(tmp_path / "shards" / "shard-1"), "--out", str(tmp_path / "partial"))
    assert status == 1
    assert f"shard 2 of {SHARDS} missing" in output and f"contract shard 2 of {SHARDS} missing" in output
