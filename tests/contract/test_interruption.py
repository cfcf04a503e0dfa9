"""An interrupted contract run: SIGINT, SIGTERM and SIGHUP end it alike, with its report, and leave nothing.

Each run is signalled at a point the stalling server (``stalling_server.py``) marks: a server
that never answers ``initialize`` (the pre-flight's, and a test's own), a test waiting on a call,
a server's teardown in progress. Every run must end within a few seconds, exit 128 + the
signal's number, and, once tests had begun, leave a report marked interrupted; 10 s later no
process of the run may be running.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from harness.contract import interruption
from harness.contract.compliance import Compliance, judge
from harness.contract.baseline import Baseline
from harness.contract.manifest import Selection, manifest

from .conftest import RUNNER

STALLING_SERVER = Path(__file__).resolve().parent / "stalling_server.py"
REACH_S = 180.0
"""How long the run may take to reach the point it is signalled at (a loaded 2-core machine starts slowly)."""
END_S = 15.0
"""How long it may take to end after the signal."""
LINGER_S = 10.0


@dataclass
class SignalledRun:
    returncode: int
    output: str
    report_dir: Path
    took_s: float
    """From the signal to the runner's exit."""
    survivors: list[str]

    @property
    def verdict(self) -> dict:
        return json.loads((self.report_dir / "compliance.json").read_text("utf-8"))["verdict"]


def _processes_of(tmp_path: Path, runner: int) -> list[psutil.Process]:
    """Every process whose environment is the run's: it has the run's own temporary directory."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.pid != runner and process.environ().get("TMPDIR") == str(tmp_path):
                found.append(process)
        except psutil.Error:
            continue
    return found


def _signalled_run(tmp_path: Path, mode: str, marker: str, sig: signal.Signals, *args: str, reached: int = 1,
                   to_group: bool = False) -> SignalledRun:
    """Run the contract runner against the stalling server in ``mode``; once ``reached`` files named ``marker``
    exist, send ``sig`` (to the runner, or to its whole process group as a terminal does)."""
    markers = tmp_path / "markers"
    markers.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PEERWIRE_"))}
    env.update(HOME=str(home), TMPDIR=str(tmp_path))
    server = shlex.join([sys.executable, str(STALLING_SERVER), mode, str(markers)])
    report_dir = tmp_path / "report"
    log = tmp_path / "run.log"
    with open(log, "wb") as out:
        runner = subprocess.Popen([sys.executable, str(RUNNER), "contract", "--server-cmd", server,
                                   "--report-dir", str(report_dir), *args],
                                  cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    try:
        deadline = time.monotonic() + REACH_S
        while len(list(markers.glob(f"{marker}.*"))) < reached:
            assert runner.poll() is None, f"the run ended before {marker}: {log.read_text(errors='replace')[-3000:]}"
            assert time.monotonic() < deadline, f"no {marker} within {REACH_S:g}s"
            time.sleep(0.05)
        began = time.monotonic()
        if to_group:
            os.killpg(runner.pid, sig)
        else:
            runner.send_signal(sig)
        try:
            runner.wait(END_S)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the run did not end within {END_S:g}s of {sig.name}") from None
        took = time.monotonic() - began
        linger_until = time.monotonic() + LINGER_S
        survivors = _processes_of(tmp_path, runner.pid)
        while survivors and time.monotonic() < linger_until:
            time.sleep(0.2)
            survivors = _processes_of(tmp_path, runner.pid)
        described = [" ".join(p.cmdline()[:5]) for p in survivors if p.is_running()]
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait()
        for process in _processes_of(tmp_path, runner.pid):
            process.kill()
    return SignalledRun(runner.returncode, log.read_text("utf-8", errors="replace"), report_dir, took, described)


def _assert_interrupted(run: SignalledRun, sig: signal.Signals) -> None:
    assert run.returncode == 128 + sig, run.output[-3000:]
    assert run.survivors == [], f"still running {LINGER_S:g}s after the run ended: {run.survivors}"
    verdict = run.verdict
    assert verdict["state"] == "interrupted" and verdict["interrupted_by"] == sig.name, verdict
    assert verdict["exit_status"] == 128 + sig and not verdict["compliant"]
    assert not any(p.endswith("was not tested") for p in verdict["problems"]), verdict["problems"]
    assert f"verdict: interrupted by {sig.name} (exit status {128 + sig})" in run.output
    assert "was not tested" not in run.output
    markdown = (run.report_dir / "compliance.md").read_text("utf-8")
    assert "Verdict: **interrupted**" in markdown and "not compliant" not in markdown


@pytest.mark.slow
def test_a_signal_during_the_preflight_ends_the_run_before_any_test(tmp_path):
    run = _signalled_run(tmp_path, "initialize", "initialize", signal.SIGTERM, "-n", "0")
    assert run.returncode == 128 + signal.SIGTERM, run.output[-3000:]
    assert "interrupted by SIGTERM before any test ran" in run.output and "Traceback" not in run.output
    assert run.survivors == [] and not run.report_dir.exists()


@pytest.mark.slow
@pytest.mark.parametrize("sig, workers", [(signal.SIGHUP, "0"), (signal.SIGTERM, "2")])
def test_a_signal_while_a_server_starts_leaves_an_interrupted_report(tmp_path, sig, workers):
    run = _signalled_run(tmp_path, "initialize", "initialize", sig, "--skip-preflight", "-n", workers,
                         "--startup-timeout", "120", "--requirement", "wire:ping")
    _assert_interrupted(run, sig)


@pytest.mark.slow
@pytest.mark.parametrize("sig, workers, to_group, shard", [
    (signal.SIGTERM, "0", False, None),
    (signal.SIGTERM, "2", False, None),
    (signal.SIGINT, "2", True, None),
    (signal.SIGTERM, "2", False, "1/1"),
])
def test_a_signal_mid_case_leaves_an_interrupted_report(tmp_path, sig, workers, to_group, shard):
    run = _signalled_run(tmp_path, "request", "request", sig, "-n", workers, "--requirement", "wire:*",
                         *(["--shard", shard] if shard else []), to_group=to_group)
    _assert_interrupted(run, sig)
    assert run.took_s < END_S


@pytest.mark.slow
@pytest.mark.parametrize("sig, workers", [(signal.SIGTERM, "0"), (signal.SIGINT, "2")])
def test_a_signal_during_a_teardown_leaves_an_interrupted_report(tmp_path, sig, workers):
    """The pre-flight's server closes first; the second server seen closing is a test's."""
    run = _signalled_run(tmp_path, "exit", "closing", sig, "-n", workers, "--requirement", "wire:ping",
                         "--requirement", "wire:method:unknown", reached=2, to_group=sig is signal.SIGINT)
    _assert_interrupted(run, sig)


def test_an_interrupted_verdict_names_the_signal_and_lists_what_did_not_run():
    requirements = manifest()
    selection = Selection(patterns=("wire:ping", "wire:method:unknown"), profiles=("protocol",))
    compliance: Compliance = judge(requirements, [], selection, Baseline(), [])
    assert any(p.endswith("was not tested") for p in compliance.problems)
    stopped = compliance.interrupted("SIGTERM", interruption.exit_status(signal.SIGTERM))
    assert stopped.state == "interrupted" and stopped.final_status == 143 and not stopped.ok
    assert len(stopped.problems) == 1, "what did not run is no reason of its own"
    assert "SIGTERM" in stopped.problems[0] and "0 of 2 selected requirements ran, 2 did not" in stopped.problems[0]
