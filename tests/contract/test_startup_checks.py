"""The contract runner's pre-flight: a run that cannot be made ends before any test, in one line.

Each bad input a hurried user gives gets one line naming the cause and the fix, the exit
status documented for its kind (never 1, the verdict "not compliant"), no traceback, no
report folder, no home or process left behind, all within 10 s.
"""

from __future__ import annotations

import shlex
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from harness import npm
from harness.contract import startup_checks as preflight
from harness.contract.layout import REFERENCE_PROVISIONER
from harness.contract.manifest import manifest

from .conftest import run_contract

PREFLIGHT_S = 10.0


def _python(code: str, *extra: str) -> str:
    return shlex.join([sys.executable, "-c", code, *extra])


def _one_line_failure(tmp_path: Path, *args: str, status: int, env: dict[str, str] | None = None) -> str:
    began = time.monotonic()
    run = run_contract(tmp_path, *args, env=env)
    took = time.monotonic() - began
    lines = [line for line in run.output.splitlines() if line.strip()]
    assert run.returncode == status, run.output[-3000:]
    assert len(lines) == 1 and lines[0].startswith("python runner.py contract: "), run.output[-3000:]
    assert "Traceback" not in run.output and took < PREFLIGHT_S, (took, run.output)
    assert not run.report_dir.exists(), "a run that was never made writes no report"
    assert not list(tmp_path.glob("peerwire-preflight-*")), "the pre-flight's home is removed"
    assert not list(tmp_path.glob("pytest-of-*")), "no test ran, so no test's temp dir exists"
    return lines[0]


def _running(marker: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if marker in (process.info["cmdline"] or []):
            found.append(process)
    return found


def test_a_missing_program_is_named(tmp_path):
    line = _one_line_failure(tmp_path, "--server-cmd", "no-such-mcp-server --stdio", status=preflight.EXIT_TARGET)
    assert "no program 'no-such-mcp-server' on PATH" in line


def test_a_server_path_that_does_not_exist_is_named(tmp_path):
    line = _one_line_failure(tmp_path, "--server-cmd", str(tmp_path / "bin" / "server"), status=preflight.EXIT_TARGET)
    assert "does not exist" in line


def test_a_server_that_exits_at_once_is_reported_with_its_status_and_stderr(tmp_path):
    code = "import sys; sys.stderr.write('config file missing: srv.toml\\n'); sys.exit(7)"
    line = _one_line_failure(tmp_path, "--server-cmd", _python(code), status=preflight.EXIT_TARGET)
    assert "exited with status 7 before answering initialize" in line and "config file missing: srv.toml" in line


def test_a_server_killed_by_a_signal_is_reported_with_the_signal(tmp_path):
    code = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    line = _one_line_failure(tmp_path, "--server-cmd", _python(code), status=preflight.EXIT_TARGET)
    assert "was killed by SIGKILL" in line and "stderr was empty" in line


def test_a_server_that_never_answers_initialize_is_bounded_and_stopped(tmp_path):
    marker = f"never-answers-{tmp_path.name}"
    code = "import sys, time; sys.stderr.write('listening on 127.0.0.1:9\\n'); sys.stderr.flush(); time.sleep(120)"
    line = _one_line_failure(tmp_path, "--server-cmd", _python(code, marker), "--startup-timeout", "2",
                             status=preflight.EXIT_TARGET)
    assert "did not answer initialize within 2s (--startup-timeout)" in line and "listening on 127.0.0.1:9" in line
    assert _running(marker) == []


def test_a_provisioner_whose_start_raises_is_named_and_stopped(tmp_path):
    stopped = tmp_path / "stopped"
    (tmp_path / "broken_provisioner.py").write_text(
        "from pathlib import Path\n"
        "class Provisioner:\n"
        "    def __init__(self, root):\n"
        "        self.root = root\n"
        "    def start(self):\n"
        "        raise RuntimeError('the app needs /srv/mail, which does not exist')\n"
        "    def crash(self, server_pids):\n"
        "        pass\n"
        "    def stop(self):\n"
        f"        Path({str(stopped)!r}).write_text('stopped')\n")
    line = _one_line_failure(tmp_path, "--server-cmd", _python("pass"), "--provisioner",
                             "broken_provisioner:Provisioner", "--profiles", "messaging",
                             status=preflight.EXIT_TARGET)
    assert "start() raised RuntimeError: the app needs /srv/mail, which does not exist" in line
    assert stopped.read_text() == "stopped", "what a failed start began is stopped"


def test_a_provisioner_that_cannot_be_imported_is_named(tmp_path):
    (tmp_path / "bad_import.py").write_text("raise RuntimeError('no config')\n")
    line = _one_line_failure(tmp_path, "--server-cmd", _python("pass"), "--provisioner", "bad_import:Provisioner",
                             status=preflight.EXIT_TARGET)
    assert "importing it raised RuntimeError: no config" in line


def test_missing_npm_clients_name_the_install_command(tmp_path):
    empty = tmp_path / "node_modules"
    empty.mkdir()
    line = _one_line_failure(tmp_path, "--requirement", "interop:typescript-sdk:every-tool",
                             env={npm.NODE_MODULES_ENV: str(empty)}, status=preflight.EXIT_SUITE)
    assert f"npm install {npm.spec(npm.TS_SDK)}" in line and "is not installed" in line


def test_missing_node_names_node_and_the_install_command(tmp_path):
    bare = tmp_path / "bin"
    bare.mkdir()
    line = _one_line_failure(tmp_path, "--requirement", "interop:inspector-cli:every-tool",
                             env={"PATH": str(bare)}, status=preflight.EXIT_SUITE)
    assert "no `node` on PATH" in line and npm.spec(npm.INSPECTOR) in line


@pytest.mark.parametrize("options", [["--requirement", "no-such-requirement"],
                                     ["--requirement", "interop:*", "--server-cmd", "cat"]])
def test_an_empty_selection_is_a_usage_error(tmp_path, options):
    line = _one_line_failure(tmp_path, *options, status=preflight.EXIT_USAGE)
    assert line.startswith("python runner.py contract: nothing to run: --requirement ")


def test_every_requirement_an_npm_client_runs_is_checked():
    """A new interop requirement on the TypeScript clients must not start without its pre-flight."""
    clients = {r.id for r in manifest() if ("typescript-sdk" in r.id or "inspector-cli" in r.id)}
    assert clients == set(preflight.NPM_CLIENTS)


def test_the_reference_passes_its_own_preflight(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    run = preflight.plan(None, None, None, profiles=None, level="must", patterns=["wire:ping"])
    assert run.provisioner == REFERENCE_PROVISIONER and run.selected == ("wire:ping",)
    preflight.check_startup(run)
    assert list(tmp_path.iterdir()) == []


def test_a_misspelt_tool_call_lists_the_tools_the_server_offers(tmp_path):
    time_server = Path(sys.executable).parent / "mcp-server-time"
    line = _one_line_failure(tmp_path, "--server-cmd", str(time_server), "--tool-call",
                             'get_time {"timezone": "UTC"}', status=preflight.EXIT_USAGE)
    assert "--tool-call get_time: the server offers no such tool" in line and "get_current_time" in line
