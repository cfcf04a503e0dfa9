"""Each phase of a scenario run alone (harness/acceptance/execution.py): what it leaves for the next.

The live runs (tests/acceptance/test_scenarios.py) prove the phases together with real Codex; here each
phase is given the smallest real input that exercises its rule: a real Job and a real sleeping process for
the teardown, a real artifacts folder for the checks, the report's own schema for the result shape.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path

import pytest

from harness.acceptance.execution import Driven, PhaseClock, RunSettings, ScenarioRun, drive, judge_run, stop
from harness.acceptance.observations import RunnerView
from harness.acceptance.progress import Progress
from harness.acceptance.checks import Evidence, Verdict
from harness.acceptance.result import scenario_result, unfinished_result
from harness.acceptance.scenario import SCENARIOS_DIR, load_scenario
from harness.codex.install import CodexInstallation
from harness.process.jobs import Job

SMOKE = load_scenario(SCENARIOS_DIR / "smoke.toml")


def a_run(tmp_path: Path) -> ScenarioRun:
    codex = CodexInstallation(executable=Path(sys.executable), version="0.0.0", source="test")
    settings = RunSettings(codex=codex, homes_root=tmp_path / "homes", artifacts_root=tmp_path / "artifacts")
    return ScenarioRun(SMOKE, "attached", settings, None, Progress("smoke", quiet=True))


class LabThatCannotStart:
    """A lab whose start fails, as a core that will not come up does; it records that it was stopped."""

    agents: dict = {}
    attachments: list = []
    tui = None
    capabilities_awaited_s = 0.0

    def __init__(self) -> None:
        self.stopped = False

    def start(self) -> None:
        raise RuntimeError("the core did not come up")

    def stop(self) -> None:
        self.stopped = True


def test_drive_keeps_a_failed_start_and_still_stops_the_lab_and_the_job(tmp_path: Path) -> None:
    lab, clock = LabThatCannotStart(), PhaseClock()
    with Job("phase test") as job:
        driven = drive(a_run(tmp_path), lab, job, budget=contextlib.nullcontext(), clock=clock)
    assert driven.failure == "RuntimeError: the core did not come up"
    assert lab.stopped
    assert [p["name"] for p in clock.phases] == ["start", "stop"]
    assert driven.prompts == {} and driven.tool_calls == []


def test_stop_closes_the_job_even_on_a_child_that_ignores_sigterm(tmp_path: Path) -> None:
    class Quiet:
        def stop(self) -> None:
            pass

    job = Job("survivor test", grace=0.5)
    # A child that ignores SIGTERM: the job's grace runs out and SIGKILL ends it, so nothing survives.
    sleeper = job.spawn([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                         "signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"],
                        name="sleeper", stdout=subprocess.PIPE)
    assert sleeper.popen.stdout.readline().strip() == b"ready"
    sleeper.popen.stdout.close()
    said = stop(Quiet(), job)
    assert sleeper.popen.poll() == -9
    assert said is None


def test_judge_run_without_evidence_fails_evidence_collected_and_keeps_the_step_failure(tmp_path: Path) -> None:
    run = a_run(tmp_path)
    run.destination.mkdir(parents=True)
    judged = judge_run(run, Driven(RunnerView(), {}, [], "RuntimeError: boom"), budget=None)
    verdicts = {v.id: v for v in judged.verdicts}
    assert list(verdicts) == ["steps-completed", "evidence-collected"]
    assert not verdicts["steps-completed"].passed and verdicts["steps-completed"].summary == "RuntimeError: boom"
    assert verdicts["evidence-collected"].summary == "the core left no evidence export"
    assert judged.observations is None and not judged.passed


@pytest.mark.parametrize("why", ["the worker exited with status 1", "not started: the run was stopped"])
def test_an_unfinished_run_has_the_shape_of_a_judged_one(why: str) -> None:
    unfinished = unfinished_result(name="smoke", mode="attached", persona=None, provider="scripted", trial=None,
                                   description="d", key="smoke.attached", why=why, wall_s=1.23456)
    judged = scenario_result(name="smoke", mode="attached", persona=None, provider="scripted", trial=None,
                             description="d", key="smoke.attached", wall_s=2.0, verdicts=[
                                 Verdict("steps-completed", True, "all steps completed", Evidence())])
    assert set(unfinished) == set(judged) - {"probe", "home"}
    assert unfinished["checks"] == [{"id": "steps-completed", "verdict": "fail", "summary": why, "evidence": {
        "records": [], "rollout": [], "model_requests": [], "appserver": []}}]
    assert unfinished["passed"] is False and judged["passed"] is True and unfinished["wall_s"] == 1.235
