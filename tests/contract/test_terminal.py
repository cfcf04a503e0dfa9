"""The runner's terminal: a progress line, one line per failing requirement, the verdict; nothing of the suite's
insides unless asked for (``-v``)."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest

from harness.contract.terminal import json_excerpt, scrub

from .conftest import run_contract

STALLING_SERVER = Path(__file__).resolve().parent / "stalling_server.py"
WRONG = shlex.join([sys.executable, str(STALLING_SERVER), "wrong", "."])
SELECTION = ("--requirement", "wire:method:unknown", "--requirement", "wire:ping")
INSIDES = ("Traceback", "site-packages", " at 0x", "rootdir:", "FAILED ", "short test summary", "def test_",
           "AssertionError")


def test_a_failing_run_prints_a_line_per_failing_requirement_and_nothing_of_the_suite(tmp_path):
    run = run_contract(tmp_path, "--server-cmd", WRONG, *SELECTION)
    assert run.returncode == 1, run.output[-3000:]
    assert not [word for word in INSIDES if word in run.output], run.output
    (line,) = [ln for ln in run.output.splitlines() if ln.startswith("FAIL ")]
    assert line.startswith("FAIL MUST wire:method:unknown (") and "-32601" in line, line
    got = line.split("; got ", 1)[1]
    assert re.search(r'"code": ?-32602', got), got
    whole = got.removesuffix("…")
    assert whole[-1] in '"}]0123456789el' and whole.replace('\\"', "").count('"') % 2 == 0, \
        "the excerpt ends after a whole value: " + got
    assert "FAILS RUN: MUST wire:method:unknown" not in run.output, "the failure is said once"
    verdicts = [ln for ln in run.output.splitlines() if ln.startswith("verdict: ")]
    assert verdicts == [verdicts[0]] and verdicts[0].startswith("verdict: NOT compliant over what ran: ") \
        and verdicts[0].endswith(" (exit status 1)"), run.output[-500:]
    assert len(run.output.splitlines()) <= 30, run.output


@pytest.mark.parametrize("option", ["-v", "--tb=short"])
def test_verbose_or_a_traceback_style_gives_pytests_output_back(tmp_path, option):
    run = run_contract(tmp_path, "--server-cmd", WRONG, *SELECTION, option)
    assert run.returncode == 1 and "test session starts" in run.output and "AssertionError" in run.output


@pytest.mark.parametrize("value", [
    {"jsonrpc": "2.0", "id": 9, "error": {"code": -32600, "message": "m" * 500, "data": list(range(300))}},
    ["a\"b\\c" * 80, {"k": "é" * 200}], "x" * 1000, list(range(1000)),
])
@pytest.mark.parametrize("limit", [20, 60, 160])
def test_an_excerpt_is_cut_only_at_value_boundaries(value, limit):
    text = json_excerpt(value, limit)
    assert len(text) <= limit + 8
    # Removing every marker leaves JSON: nothing was cut inside a number, key or escape.
    json.loads(re.sub(r',?…(?=[\]}])', "", text).replace('…"', '"'))


def test_scrub_drops_addresses_and_installation_paths():
    text = scrub("a <bound method X.y of <Z object at 0x7fab01>> in /srv/.venv/lib/python3.11/site-packages/harness/x.py")
    assert "0x" not in text and "site-packages" not in text and "harness/x.py" in text


def test_write_baseline_writes_the_failures_and_a_run_with_it_passes(tmp_path):
    baseline = tmp_path / "known-failures.txt"
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    first = run_contract(tmp_path / "first", "--server-cmd", WRONG, *SELECTION, "--write-baseline", str(baseline))
    assert first.returncode == 1, first.output[-3000:]
    entries = [line for line in baseline.read_text("utf-8").splitlines() if line and not line.startswith("#")]
    assert len(entries) == 1 and entries[0].startswith("wire:method:unknown  # "), entries
    second = run_contract(tmp_path / "second", "--server-cmd", WRONG, *SELECTION, "--baseline", str(baseline))
    assert second.returncode == 0, second.output[-3000:]
    assert second.result("wire:method:unknown")["result"] == "expected failure"


def test_a_silence_from_a_running_server_names_the_likely_cause(tmp_path):
    from harness.contract.stdio import NoResponse, StdioServer
    from harness.contract.wire import since

    server = StdioServer([sys.executable, "-c", "import sys\nfor _ in sys.stdin: pass"], {}, stderr=tmp_path / "err")
    try:
        with pytest.raises(NoResponse, match="its transport may have dropped the line"):
            server.call("ping", timeout=0.5)
        assert "its transport may have dropped the line" in since(server, 0)
    finally:
        server.close(grace=1.0)


@pytest.mark.parametrize("code, said", [("import sys; sys.stderr.write('boom\\n'); sys.exit(3)", "it exited with status 3"),
                                        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
                                         "it was killed by SIGKILL")])
def test_a_crashed_server_is_reported_with_its_exit_status_or_signal(tmp_path, code, said):
    from harness.contract.stdio import ServerExited, StdioServer

    server = StdioServer([sys.executable, "-c", code], {}, stderr=tmp_path / "err")
    try:
        with pytest.raises(ServerExited, match=said):
            server.call("ping", timeout=10)
    finally:
        server.close(grace=1.0)
