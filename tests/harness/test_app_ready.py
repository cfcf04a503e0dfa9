"""Starting the core app: one ready-line reader, whoever spawns the process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.process.app import AppNotReady, AppProcess
from harness.process.jobs import Job, spawn_through
from peerwire.control import ControlClient
from peerwire.home import Home


def impostor(program: str):
    """A spawn that starts ``program`` instead of the app."""
    def spawn(argv, env, stderr):
        return subprocess.Popen([sys.executable, "-c", program], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=stderr, env=env, start_new_session=True)
    return spawn


@pytest.mark.parametrize(("program", "timeout", "shown"), [
    ("print('hello')", 10.0, "first line b'hello'"),
    ("print('{\"event\": \"starting\"}')", 10.0, "starting"),
    ("import sys; sys.exit(3)", 10.0, "first line b''"),
    ("import time; time.sleep(30)", 0.3, "first line b''"),
], ids=["not-json", "not-ready", "exits", "silent"])
def test_anything_but_a_ready_line_is_refused_and_the_process_killed(tmp_path: Path, program: str, timeout: float,
                                                                      shown: str) -> None:
    home = Home(tmp_path / "home")
    with pytest.raises(AppNotReady, match="was not ready") as refused:
        AppProcess.start(home, timeout=timeout, spawn=impostor(program))
    assert shown in str(refused.value) and "app-stderr.log" in str(refused.value)


def test_the_app_started_through_a_job_ends_with_the_job(tmp_path: Path) -> None:
    home = Home(tmp_path / "home")
    with Job("app-test", grace=5.0) as job:
        app = AppProcess.start(home, spawn=spawn_through(job))
        assert app.ready["event"] == "ready"
        assert ControlClient(home).call("status")["ok"] is True
    try:
        assert app.process.poll() is not None
    finally:
        app.kill()  # closes the stdout pipe of the (already ended) process
