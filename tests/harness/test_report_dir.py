"""An unwritable ``--report-dir``: both runners say so in one line with the path, exit 2, and start nothing.

Real runner processes; the check comes before any run home, server or agent.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.private import unwritable
from tests.patience import WAIT_S

RUNNER = Path(__file__).resolve().parents[2] / "runner.py"


def _file_on_the_way(tmp_path: Path) -> Path:
    (tmp_path / "blocker").write_text("a file where a folder must be", encoding="utf-8")
    return tmp_path / "blocker" / "reports"


def _the_path_is_a_file(tmp_path: Path) -> Path:
    (tmp_path / "reports").write_text("a file where a folder must be", encoding="utf-8")
    return tmp_path / "reports"


def _folder_without_write_permission(tmp_path: Path) -> Path:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    return locked / "reports"


UNWRITABLE = [_file_on_the_way, _the_path_is_a_file,
              pytest.param(_folder_without_write_permission, marks=pytest.mark.skipif(
                  os.geteuid() == 0, reason="permission bits do not stop root"))]


@pytest.mark.parametrize("make", UNWRITABLE)
@pytest.mark.parametrize("command", ["contract", "accept"])
def test_an_unwritable_report_dir_is_one_line_with_its_path_and_status_2(tmp_path, make, command):
    report_dir = make(tmp_path)
    runs_root = tmp_path / "runs"
    runs_root.mkdir()
    options = ["--runs-root", str(runs_root), "--scenario", "smoke"] if command == "accept" else ["-n", "0"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PEERWIRE_"))}
    done = subprocess.run([sys.executable, str(RUNNER), command, "--report-dir", str(report_dir), *options],
                          cwd=tmp_path, env={**env, "HOME": str(tmp_path), "TMPDIR": str(tmp_path)},
                          capture_output=True, text=True, timeout=WAIT_S)
    said = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(said) == 1 and "--report-dir" in said[0] and str(report_dir) in said[0], done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert list(runs_root.iterdir()) == []  # no run home
    assert {p.name for p in tmp_path.iterdir()} <= {"runs", "blocker", "reports", "locked"}  # nothing beside

def test_a_writable_report_dir_is_probed_without_a_trace(tmp_path):
    assert unwritable(tmp_path / "new" / "reports") is None
    assert unwritable(tmp_path) is None
    assert list(tmp_path.iterdir()) == []  # nothing created, nothing left
