"""``runner.py report``: summary of one report, comparison of two."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from harness.report import SecretScan, write_report
from harness.report.cli import main
from tests.evidence.exchange import ROLLOUT_B, TASK_ID, run_description, task_exchange


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    root = tmp_path / "artifacts"
    task_exchange().write(root / "task")
    return root


def check(ident: str, verdict: str) -> dict:
    return {"id": ident, "verdict": verdict, "summary": f"{ident} summary",
            "evidence": {"records": [TASK_ID], "rollout": [f"rollouts/B/{ROLLOUT_B}:5"]}}


def report(tmp_path: Path, artifacts: Path, run_id: str, checks: list[dict]) -> Path:
    passed = all(c["verdict"] == "pass" for c in checks)
    return write_report(tmp_path / "reports", run_description(run_id, passed=passed, checks=checks), artifacts,
                        secrets=SecretScan({}))


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


def test_summary_lists_failed_checks_with_their_evidence(tmp_path, artifacts):
    folder = report(tmp_path, artifacts, "r1", [check("sent", "pass"), check("replied", "fail")])
    status, text = run(str(folder))
    assert status == 1
    assert text.splitlines() == [
        "run r1: FAILED — 1 scenarios (1 failed), 2 checks (1 failed); Codex 0.171.0",
        "  FAIL  task · attached · scripted: 1/2 checks pass; bindings 2 bound, 0 unbound",
        "        FAIL replied: replied summary",
        f"             records: {TASK_ID}",
        f"             rollout: rollouts/B/{ROLLOUT_B}:5",
    ]


def test_summary_of_a_passing_run_exits_zero(tmp_path, artifacts):
    folder = report(tmp_path, artifacts, "r1", [check("sent", "pass")])
    status, text = run(str(folder / "report.json"))
    assert status == 0 and text.startswith("run r1: PASSED")


def test_compare_lists_changed_and_one_sided_checks(tmp_path, artifacts):
    old = report(tmp_path, artifacts, "old", [check("sent", "pass"), check("replied", "fail"), check("gone", "pass")])
    new = report(tmp_path, artifacts, "new", [check("sent", "fail"), check("replied", "pass"), check("added", "pass")])
    status, text = run("--compare", str(old), str(new))
    assert status == 1
    assert text.splitlines() == [
        "compare old -> new",
        "  changed   task · attached · scripted / replied: fail -> pass",
        "  changed   task · attached · scripted / sent: pass -> fail",
        "  only old  task · attached · scripted / gone: pass",
        "  only new  task · attached · scripted / added: pass",
    ]


def test_compare_without_changes_exits_zero(tmp_path, artifacts):
    old = report(tmp_path, artifacts, "old", [check("sent", "pass")])
    new = report(tmp_path, artifacts, "new", [check("sent", "pass")])
    assert run("--compare", str(old), str(new)) == (0, "compare old -> new\n  no verdict changed\n")


def test_an_unreadable_report_exits_two(tmp_path, capsys):
    assert run(str(tmp_path / "nowhere"))[0] == 2
    assert "cannot read report" in capsys.readouterr().err


def test_path_and_compare_are_exclusive(tmp_path):
    with pytest.raises(SystemExit) as exc:
        run()
    assert exc.value.code == 2


def test_summary_shows_a_collaboration_probe(tmp_path, artifacts):
    description = run_description("r-probe", checks=[check("probe-succeeded", "pass")])
    description["scenarios"][0]["probe"] = {
        "success": False, "requests": 3, "nativeMessageOccurrences": 1, "childQuestionObserved": True,
        "parentReplyObserved": False, "childFinalObserved": False, "finalExact": False}
    folder = write_report(tmp_path / "reports", description, artifacts, secrets=SecretScan({}))
    status, text = run(str(folder))
    assert status == 0
    assert ("        probe: FAILED in 3 model requests (childQuestionObserved=true, parentReplyObserved=false, "
            "childFinalObserved=false, finalExact=false)") in text.splitlines()


def two_runs_of(tmp_path: Path, run_id: str, differ: dict, verdicts: tuple[str, str]) -> Path:
    """One report holding the task scenario twice, the runs told apart only by ``differ`` (e.g. the mode)."""
    description = run_description(run_id, passed=all(v == "pass" for v in verdicts))
    base = description["scenarios"][0]
    entries = []
    for number, (values, verdict) in enumerate(zip(differ["values"], verdicts)):
        task_exchange().write(tmp_path / f"artifacts-{run_id}" / f"run{number}")
        entries.append({**base, differ["field"]: values, "passed": verdict == "pass", "artifacts_dir": f"run{number}/",
                        "checks": [check("task-reply-correlated", verdict)]})
    description["scenarios"] = entries
    return write_report(tmp_path / "reports", description, tmp_path / f"artifacts-{run_id}", secrets=SecretScan({}))


def test_a_failure_in_modes_attached_is_not_hidden_by_the_background_pass(tmp_path):
    """The regression: checks keyed by scenario alone let modes/background's pass overwrite attached's fail."""
    modes = {"field": "mode", "values": ("attached", "background")}
    old = two_runs_of(tmp_path, "old", modes, ("pass", "pass"))
    new = two_runs_of(tmp_path, "new", modes, ("fail", "pass"))
    status, text = run("--compare", str(old), str(new))
    assert status == 1
    assert text.splitlines() == ["compare old -> new",
                                 "  changed   task · attached · scripted / task-reply-correlated: pass -> fail"]


@pytest.mark.parametrize("differ", [
    {"field": "mode", "values": ("attached", "background")},
    {"field": "persona", "values": ("explicit-reply", "paraphrase")},
    {"field": "provider", "values": ("scripted", "openai")},
    {"field": "trial", "values": (1, 2)},
], ids=lambda d: d["field"])
def test_every_part_of_a_runs_identity_keeps_its_checks_apart(tmp_path, differ):
    old = two_runs_of(tmp_path, "old", differ, ("pass", "pass"))
    new = two_runs_of(tmp_path, "new", differ, ("pass", "fail"))
    status, text = run("--compare", str(old), str(new))
    assert status == 1
    (changed,) = [line for line in text.splitlines() if "changed" in line]
    assert changed.endswith("task-reply-correlated: pass -> fail")
    summary = run(str(new))[1]
    labels = [line.split(":")[0].strip() for line in summary.splitlines()[1:3]]
    assert len(set(labels)) == 2, f"the two runs must be told apart in the summary: {labels}"
