"""A short command that hangs ends at its bound with everything it started: real process trees, psutil.

The Codex CLI's ``--version`` probe is the case that left a ``sleep 3600`` behind.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from harness.codex.install import CodexVersionError, read_codex_version
from harness.process.bounded import run_bounded
from tests.patience import WAIT_S

HANG_S = 0.5  # the bound under test: how long the hung command is given

# Starts a child in its own group, and one that leaves the group (a session of its own), notes every pid,
# prints a line, then hangs -- or, given "exit", returns at once and leaves its children running.
STUB = r"""#!{python}
import os, subprocess, sys
stay = subprocess.Popen(["sleep", "3600"])
leave = subprocess.Popen(["sleep", "3600"], start_new_session=True, stdout=subprocess.DEVNULL)
with open({pids!r}, "w") as pids:
    pids.write(f"{{os.getpid()}} {{stay.pid}} {{leave.pid}}\n")
print("codex-cli 0.0.1", flush=True)
if sys.argv[-1] != "exit":
    stay.wait()
"""


@pytest.fixture
def stub(tmp_path: Path) -> Path:
    path = tmp_path / "codex"
    path.write_text(STUB.format(python=sys.executable, pids=str(tmp_path / "pids")), encoding="utf-8")
    path.chmod(0o755)
    return path


def _gone(tmp_path: Path) -> None:
    pids = [int(pid) for pid in (tmp_path / "pids").read_text().split()]
    assert len(pids) == 3
    survivors = [p for p in map(_process, pids) if p is not None]
    _, alive = psutil.wait_procs(survivors, timeout=WAIT_S)
    alive = [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"still running: {alive}"


def _process(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except psutil.NoSuchProcess:
        return None


def test_a_hung_command_ends_at_its_bound_with_its_whole_tree(tmp_path, stub):
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_bounded([str(stub)], timeout=HANG_S, capture_output=True, text=True)
    assert time.monotonic() - started < WAIT_S  # not held by the pipes the children kept
    _gone(tmp_path)


def test_a_command_that_returns_leaves_nothing_of_its_group(tmp_path, stub):
    done = run_bounded([str(stub), "exit"], timeout=WAIT_S, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                       text=True)
    assert (done.returncode, done.stdout) == (0, "codex-cli 0.0.1\n")
    pids = [int(pid) for pid in (tmp_path / "pids").read_text().split()]
    stayed = _process(pids[1])
    if stayed is not None:
        _, alive = psutil.wait_procs([stayed], timeout=WAIT_S)
        assert all(p.status() == psutil.STATUS_ZOMBIE for p in alive)
    left = _process(pids[2])  # it left the group before the command ended: not this runner's to find
    if left is not None:
        left.kill()


def test_a_hung_codex_version_probe_is_a_clear_error_and_leaves_no_process(tmp_path, stub):
    with pytest.raises(CodexVersionError, match="did not finish within"):
        read_codex_version(stub, timeout=HANG_S)
    _gone(tmp_path)
