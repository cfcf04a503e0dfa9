"""No process outlives ``python runner.py``: on a normal exit, a failing step, SIGINT and SIGTERM.

Each test runs the real runner on the smoke scenario (or a copy made to fail)
with its run homes under ``tmp_path``, then looks for any process whose
command line or working directory is inside ``tmp_path``: the core app (its
``--home``), the Codex app-servers and their MCP servers (working in the
fixture workspaces).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest
from tests.patience import RUN_S, WAIT_S

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "smoke.toml"
RUN_TIMEOUT_S = RUN_S
READY_TIMEOUT_S = WAIT_S  # the probe and two agents' start-up come first

pytestmark = [pytest.mark.codex, pytest.mark.heavy, pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")]


def start_runner(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(ROOT / "runner.py"), "--runs-root", str(tmp_path / "runs"),
         "--report-dir", str(tmp_path / "reports"), *args],
        cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def home_with_dotfiles(folder: Path, sourced: Path) -> dict[str, str]:
    """An environment whose ``HOME`` is ``folder``, holding the dotfiles a shell reads; each notes in ``sourced``
    that it was read."""
    folder.mkdir()
    for dotfile in (".bashrc", ".profile", ".bash_profile", ".bash_login"):
        (folder / dotfile).write_text(f'echo "{dotfile} $$" >> "{sourced}"\n', encoding="utf-8")
    return {**os.environ, "HOME": str(folder)}


def leftovers(tmp_path: Path) -> list[str]:
    marker = str(tmp_path)
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "cwd"]):
        try:
            cmdline = " ".join(proc.info["cmdline"] or [])
            if marker in cmdline or (proc.info["cwd"] or "").startswith(marker):
                found.append(f"{proc.info['pid']}: {cmdline[:120]}")
        except (psutil.Error, TypeError):
            continue
    return found


def wait_for_line(stream, needle: str, timeout: float) -> threading.Thread:
    """Read ``stream`` until a line contains ``needle``; fail after ``timeout`` seconds.

    Returns the reader thread, which drains the rest of the stream until EOF.
    """
    lines: queue.Queue[bytes] = queue.Queue()
    seen: list[str] = []

    def pump() -> None:
        for line in iter(stream.readline, b""):
            lines.put(line)
        lines.put(b"")

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    while True:
        try:
            line = lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line with {needle!r} within {timeout} s: {seen[-10:]}") from None
        if not line:
            raise AssertionError(f"the runner ended before {needle!r}: {seen[-10:]}")
        seen.append(line.decode(errors="replace").rstrip())
        if needle in seen[-1]:
            return reader


def _reap(runner, reader: threading.Thread | None) -> None:
    """Whatever a test did to it, the runner ends and its stderr reader with it (a bounded join)."""
    if runner.poll() is None:
        runner.kill()
        runner.wait()
    if reader is not None:
        reader.join(timeout=READY_TIMEOUT_S)
    runner.stderr.close()


def _signal_once_shown(runner, line: str, signum: int, before=None) -> None:
    """Send ``signum`` to the runner once its stderr shows ``line`` (``before`` checked first), and wait for it
    to end; a runner still running after the bound is killed, and its stderr reader joined, either way."""
    reader = None
    try:
        reader = wait_for_line(runner.stderr, line, READY_TIMEOUT_S)
        if before is not None:
            before()
        os.kill(runner.pid, signum)
        runner.wait(timeout=RUN_TIMEOUT_S)
    finally:
        _reap(runner, reader)


def test_a_passing_run_leaves_nothing_running_and_no_home(tmp_path: Path) -> None:
    # The user's dotfiles never reach the agents: Codex's shell snapshot sources ~/.bashrc and the login profile
    # of whatever HOME it is given, and the run gives each agent (and the probe) an empty one of its own.
    sourced = tmp_path / "dotfiles-read.txt"
    runner = start_runner(tmp_path, "--scenario", "smoke", env=home_with_dotfiles(tmp_path / "user-home", sourced))
    _, err = runner.communicate(timeout=RUN_TIMEOUT_S)
    assert runner.returncode == 0, err.decode(errors="replace")[-3000:]
    assert b"report: " in err
    assert not sourced.exists(), f"an agent's shell read the user's dotfiles: {sourced.read_text()}"
    assert leftovers(tmp_path) == []
    assert not any((tmp_path / "runs").iterdir()), "a passing run's home is removed"
    # The report's secret scan looked for the session token of every agent the run registered.
    (report,) = (tmp_path / "reports").glob("*/report.json")
    scanned = json.loads(report.read_text(encoding="utf-8"))["secret_scan"]["scanned"]
    assert {"peerwire session token of smoke.attached/A", "peerwire session token of smoke.attached/B"} <= set(scanned)


def test_a_failing_step_ends_the_run_with_everything_torn_down(tmp_path: Path) -> None:
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    # The hold's rule never fires: the step times out after the agents started.
    text = SCENARIO.read_text(encoding="utf-8").replace(
        '[[steps]]\ndo = "prompt"\nagent = "A"\n',
        '[[steps]]\ndo = "await_hold"\nhold = "never"\ntimeout_s = 1\n\n[[steps]]\ndo = "prompt"\nagent = "A"\n', 1)
    text += '\n[[rules.A]]\nid = "unreachable"\nhold = "never"\nwhen = [{ user_text = { contains = "no prompt says this" } }]\n' \
            'emit = [{ message = { phase = "final_answer", text = "never" } }]\n'
    (scenarios / "smoke.toml").write_text(text, encoding="utf-8")

    runner = start_runner(tmp_path, "--scenarios-dir", str(scenarios))
    _, err = runner.communicate(timeout=RUN_TIMEOUT_S)

    assert runner.returncode == 1, err.decode(errors="replace")[-3000:]
    assert b"no request reached hold 'never'" in err
    assert leftovers(tmp_path) == []
    kept = [p for p in (tmp_path / "runs").iterdir()]
    assert len(kept) == 1 and (kept[0] / "scenarios" / "smoke.attached").is_dir(), "a failed run's home is kept"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_tears_everything_down_and_reports_the_run_interrupted(tmp_path: Path, signum: int) -> None:
    """Mid-run (the agents attached, a second scenario run not yet finished): every process ends, and the report
    says which runs finished and which did not."""
    runner = start_runner(tmp_path, "--scenario", "modes", "--scenario", "smoke", "--mode", "attached",
                          "--workers", "1")
    _signal_once_shown(runner, "agents attached", signum,
                       before=lambda: leftovers(tmp_path) or pytest.fail("the agents run before the signal"))
    assert runner.returncode == 128 + signum
    assert leftovers(tmp_path) == []
    (report,) = (tmp_path / "reports").glob("*/report.json")
    run = json.loads(report.read_text(encoding="utf-8"))["run"]
    assert run["passed"] is False and run["interrupted"]["signal"] == signal.Signals(signum).name
    assert run["interrupted"]["unfinished"], "the run was stopped before every scenario run finished"
    assert len(run["interrupted"]["finished"]) + len(run["interrupted"]["unfinished"]) == 2
    markdown = report.with_name("report.md").read_text(encoding="utf-8")
    assert f"INTERRUPTED by {signal.Signals(signum).name}" in markdown


def test_a_signal_during_start_up_reports_every_run_unfinished(tmp_path: Path) -> None:
    """While the capability probe and the first scenario run start up, nothing has finished."""
    runner = start_runner(tmp_path, "--scenario", "smoke", "--mode", "attached")
    _signal_once_shown(runner, "probing Codex", signal.SIGTERM)
    assert runner.returncode == 128 + signal.SIGTERM
    assert leftovers(tmp_path) == []
    (report,) = (tmp_path / "reports").glob("*/report.json")
    run = json.loads(report.read_text(encoding="utf-8"))["run"]
    assert run["interrupted"] == {"signal": "SIGTERM", "finished": [], "unfinished": ["smoke.attached"]}


def test_a_killed_runner_takes_everything_with_it_and_the_next_run_cleans_up(tmp_path: Path) -> None:
    """SIGKILL gives the runner no chance to tear anything down: its workers must notice on their own."""
    runner = start_runner(tmp_path, "--scenario", "modes", "--mode", "attached")
    reader = None
    try:
        reader = wait_for_line(runner.stderr, "agents attached", READY_TIMEOUT_S)
        started = []
        for line in leftovers(tmp_path):
            try:
                started.append(psutil.Process(int(line.split(":", 1)[0])))
            except psutil.NoSuchProcess:
                pass  # a short-lived child (git, a codex helper) ended between the listing and here
        assert started, "the agents run before the kill"
        os.kill(runner.pid, signal.SIGKILL)
        assert runner.wait(timeout=RUN_TIMEOUT_S) == -signal.SIGKILL
    finally:
        _reap(runner, reader)
    # The worker, the app, the app-servers and their MCP servers all end, without finishing the scenario.
    _, alive = psutil.wait_procs(started, timeout=RUN_TIMEOUT_S)
    assert alive == [], [p.pid for p in alive]
    assert leftovers(tmp_path) == []
    (stale,) = (tmp_path / "runs").iterdir()
    assert not list(stale.glob("tasks/*.result.json")), "an orphaned worker carried on and finished its scenario"
    assert not list((tmp_path / "reports").glob("*/report.json")), "the killed run wrote no report"

    again = start_runner(tmp_path, "--scenario", "smoke")
    _, err = again.communicate(timeout=RUN_TIMEOUT_S)
    assert again.returncode == 0, err.decode(errors="replace")[-3000:]
    said = [line for line in err.decode().splitlines() if "stale" in line]
    assert len(said) == 1 and stale.name in said[0] and f"pid {runner.pid}" in said[0], said
    assert not stale.exists()
    assert leftovers(tmp_path) == []
