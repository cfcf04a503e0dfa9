"""``runner.py``: the dispatcher and the ``contract`` command end to end."""

from __future__ import annotations

import sys

import pytest

from harness.contract import cli
from harness.contract.layout import SUITE_DIR
from harness.contract.target import Target, TargetError

from .conftest import RUNNER, run_contract


def test_contract_arguments_become_a_pytest_run_of_the_suite(tmp_path):
    args = cli.build_parser().parse_args(["--server-cmd", "srv --flag", "--level", "must", "--requirement", "wire",
                                          "--baseline", "b.txt", "--provisioner", "m:C", "-n", "3"])
    argv = cli.pytest_arguments(args, tmp_path / "r", ["-x"])
    assert argv[:2] == ["-p", "harness.contract_plugin"] and argv[-1] == str(SUITE_DIR)
    pairs = dict(zip(argv, argv[1:]))
    assert pairs["--server-cmd"] == "srv --flag" and pairs["--level"] == "must" and pairs["--requirement"] == "wire"
    assert pairs["--provisioner"] == "m:C" and pairs["-n"] == "3" and pairs["--report-dir"] == str(tmp_path / "r")
    assert pairs["--baseline"].endswith("b.txt") and "-x" in argv


@pytest.mark.slow
def test_contract_run_against_the_reference_passes_and_reports(tmp_path):
    run = run_contract(tmp_path, "--requirement", "wire:ping", "--requirement", "send:receipt:admitted")
    assert run.returncode == 0, run.output[-3000:]
    document = run.compliance
    assert document["verdict"]["compliant"] is True
    assert run.result("wire:ping")["result"] == "pass"
    assert run.result("send:receipt:admitted")["result"] == "pass"
    unselected = run.result("wire:json:parse-error")
    assert unselected["result"] == "not tested" and unselected["selected"] is False
    assert document["scores"]["MUST"]["not_tested"] > 0, "not tested counts against the score"
    junit = (run.report_dir / "junit.xml").read_text("utf-8")
    assert "contract_votes" in junit and "wire:ping" in junit
    assert "verdict: compliant" in run.output


@pytest.mark.slow
def test_a_stale_baseline_entry_fails_the_run(tmp_path):
    baseline = tmp_path / "baseline.txt"
    baseline.write_text("wire:ping   # was broken once\n")
    run = run_contract(tmp_path, "--requirement", "wire:ping", "--baseline", str(baseline))
    assert run.returncode == 1, run.output[-3000:]
    assert any("stale" in p for p in run.compliance["verdict"]["problems"])


def test_a_malformed_baseline_is_a_usage_error(tmp_path):
    baseline = tmp_path / "baseline.txt"
    baseline.write_text("wire:ping\n")
    run = run_contract(tmp_path, "--requirement", "wire:ping", "--baseline", str(baseline))
    assert run.returncode == 4 and "needs a comment" in run.output


@pytest.mark.slow
def test_the_plugin_alone_runs_the_suite(tmp_path):
    """``pytest -p harness.contract_plugin`` with no paths means the contract suite, nothing else."""
    run = run_contract(tmp_path, command=[
        sys.executable, "-m", "pytest", "-p", "harness.contract_plugin", "-p", "no:cacheprovider",
        "--rootdir", str(RUNNER.parent), "-c", str(RUNNER.parent / "pyproject.toml"),
        "--requirement", "wire:method:unknown", "--report-dir", str(tmp_path / "report")])
    assert run.returncode == 0, run.output[-3000:]
    assert "1 passed" in run.output and run.result("wire:method:unknown")["result"] == "pass"


@pytest.mark.parametrize("name, complaint", [
    ("no_colon", "use module:Class"),
    ("no.such.module:Thing", "cannot import"),
    ("harness.provisioner:NoSuchClass", "has no NoSuchClass"),
])
def test_bad_provisioner_names_are_refused(name, complaint):
    with pytest.raises(TargetError, match=complaint):
        Target.from_options(None, name)


def test_server_commands_are_split_like_a_shell():
    target = Target.from_options("'my server' mcp serve --flag='a b'", None)
    assert target.server_cmd == ("my server", "mcp", "serve", "--flag=a b")
    with pytest.raises(TargetError):
        Target.from_options("   ", None)
