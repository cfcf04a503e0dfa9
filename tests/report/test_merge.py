"""``runner.py report merge`` over acceptance shard reports: what it keeps, refuses and flags."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from harness.evidence import stored
from harness.report import SecretScan, load_report, write_report
from harness.report.cli import main
from harness.report.shard_reports import MergeRefused, merge_reports
from harness.shards import Shard, plan
from tests.evidence.exchange import run_description, task_exchange

SUITE = {"name": "peerwire acceptance", "version": "0.1.0", "scenarios_sha256": "0" * 64}
RUNS = [("task", "attached"), ("task", "background"), ("other", "attached")]


def shard_reports(tmp_path: Path, count: int = 2, *, failing: tuple[str, str] | None = None,
                  codex: str = "0.171.0") -> list[Path]:
    """One report per shard of RUNS, split as ``runner.py --shard`` splits them."""
    slugs = [f"{name}.{mode}" for name, mode in RUNS]
    split = plan(slugs, count)
    folders = []
    for index in range(1, count + 1):
        run = run_description(f"shard-{index}-of-{count}")
        base = run["scenarios"][0]
        run["codex_version"] = codex
        run["suite"] = SUITE
        run["shard"] = split.describe(Shard(index, count), order=slugs)
        run["scenarios"] = []
        for (name, mode), slug in zip(RUNS, slugs):
            if split.assignment[slug] != index:
                continue
            task_exchange().write(tmp_path / f"artifacts-{index}" / slug)
            verdict = "fail" if failing == (name, mode) else "pass"
            run["scenarios"].append({**base, "name": name, "mode": mode, "artifacts_dir": f"{slug}/",
                                     "passed": verdict == "pass",
                                     "checks": [{**base["checks"][0], "verdict": verdict}]})
        folders.append(write_report(tmp_path / f"shard-{index}", run, tmp_path / f"artifacts-{index}",
                                    secrets=SecretScan({})))
    return folders


def verdicts(report: dict) -> dict:
    return {(s["identity"]["label"], c["id"]): c["verdict"] for s in report["scenarios"] for c in s["checks"]}


def merge_cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(["merge", *argv], out=out), out.getvalue()


def test_the_shards_of_a_run_merge_into_one_report_with_every_scenario_run(tmp_path):
    folders = shard_reports(tmp_path, failing=("task", "background"))
    merged = merge_reports(folders, tmp_path / "merged", secrets=SecretScan({}))
    report = merged.report
    assert merged.problems == [] and merged.folder == tmp_path / "merged"
    assert sorted(p.name for p in merged.folder.iterdir()) == ["artifacts", "junit.xml", "report.html",
                                                                "report.json", "report.md"]
    assert verdicts(report) == {("other · attached · scripted", "task-reply-correlated"): "pass",
                                ("task · attached · scripted", "task-reply-correlated"): "pass",
                                ("task · background · scripted", "task-reply-correlated"): "fail"}
    assert report["run"]["passed"] is False and report["run"]["totals"]["scenarios"] == 3
    assert [m["shard"] for m in report["run"]["merged_from"]] == [1, 2]
    # Each run's artifacts moved under its slug; the evidence it cites still resolves.
    for section in report["scenarios"]:
        assert section["artifacts_dir"] == f"artifacts/{section['identity']['slug']}/"
        assert all(check["evidence_problems"] == [] for check in section["checks"])
    on_disk = sorted(p.relative_to(merged.folder).as_posix() for p in (merged.folder / "artifacts").rglob("*")
                     if p.is_file())
    assert sorted(a["path"] for a in report["artifacts"]) == on_disk and len(on_disk) == 15
    assert "task · background · scripted" in (merged.folder / "junit.xml").read_text(encoding="utf-8")


def test_the_cli_merges_folders_found_below_the_given_ones_and_writes_durations(tmp_path):
    folders = shard_reports(tmp_path)
    downloads = tmp_path / "downloads"
    for folder in folders:
        shutil.copytree(folder.parent, downloads / folder.parent.name)
    status, text = merge_cli(str(downloads), "--out", str(tmp_path / "merged"))
    assert status == 0, text
    merged = load_report(tmp_path / "merged" / "acceptance")
    assert merged["run"]["passed"] is True and len(merged["scenarios"]) == 3
    durations = json.loads((tmp_path / "merged" / "durations.json").read_text())
    assert durations == {"acceptance": {"other.attached": 5.0, "task.attached": 5.0, "task.background": 5.0}}


def test_a_missing_shard_fails_the_merge_and_is_named(tmp_path):
    folders = shard_reports(tmp_path, count=3)
    merged = merge_reports([folders[0], folders[2]], tmp_path / "merged", secrets=SecretScan({}))
    assert merged.report["run"]["passed"] is False
    assert "shard 2 of 3 missing: their scenario runs are not in this report" in merged.problems
    assert any("is in no shard report" in p for p in merged.problems)
    assert merged.report["run"]["problems"] == merged.problems


def test_a_shard_given_twice_is_flagged_and_counted_once(tmp_path):
    folders = shard_reports(tmp_path)
    again = tmp_path / "again" / folders[0].name
    shutil.copytree(folders[0], again)
    merged = merge_reports([folders[0], again, folders[1]], tmp_path / "merged", secrets=SecretScan({}))
    assert any(p.startswith("shard 1 is given twice") for p in merged.problems)
    assert len(merged.report["scenarios"]) == 3 and merged.report["run"]["passed"] is False


def test_reports_of_different_codex_versions_are_refused_unless_forced(tmp_path):
    old = shard_reports(tmp_path / "old", codex="0.170.0")
    new = shard_reports(tmp_path / "new")
    with pytest.raises(MergeRefused, match="differ in Codex version"):
        merge_reports([old[0], new[1]], tmp_path / "merged", secrets=SecretScan({}))
    assert not (tmp_path / "merged").exists()
    status, text = merge_cli(str(old[0]), str(new[1]), "--out", str(tmp_path / "cli"))
    assert status == 2 and "Codex version" in text and "--force" in text
    merged = merge_reports([old[0], new[1]], tmp_path / "forced", force=True, secrets=SecretScan({}))
    assert merged.report["run"]["warnings"] and merged.report["run"]["passed"] is True


def test_reports_of_different_suite_versions_are_refused(tmp_path):
    folders = shard_reports(tmp_path)
    report = json.loads((folders[1] / "report.json").read_text())
    report["run"]["suite"]["scenarios_sha256"] = "1" * 64
    (folders[1] / "report.json").write_text(json.dumps(report))
    with pytest.raises(MergeRefused, match="differ in suite version"):
        merge_reports(folders, tmp_path / "merged", secrets=SecretScan({}))


def test_an_artifact_changed_after_its_shard_was_reported_is_flagged(tmp_path):
    folders = shard_reports(tmp_path)
    export = next(folders[0].rglob("core-export.json.gz"))
    export.chmod(0o600)
    export.write_bytes(stored.pack(stored.read_bytes(export).replace(b"Count", b"C0unt", 1) + b" "))
    merged = merge_reports(folders, tmp_path / "merged", secrets=SecretScan({}))
    assert any("changed after its report was written" in p for p in merged.problems)
    assert merged.report["run"]["passed"] is False
