"""``runner.py``: the dispatcher and the ``contract`` command end to end."""

from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path

import pytest

from harness.contract import cli
from harness.contract.layout import REFERENCE_COLLAB_SERVER_CMD, REFERENCE_PROVISIONER, REFERENCE_SERVER_CMD, SUITE_DIR
from harness.contract.manifest import parse_profiles
from harness.contract.target import Target, TargetError

from .conftest import RUNNER, mutant_target, run_contract


def test_contract_arguments_become_a_pytest_run_of_the_suite(tmp_path):
    args = cli.build_parser().parse_args(["--server-cmd", "srv --flag", "--level", "must", "--requirement", "wire",
                                          "--baseline", "b.txt", "--provisioner", "m:C", "-n", "3",
                                          "--collab-server-cmd", "srv --collab", "--profiles", "messaging"])
    argv = cli.pytest_arguments(args, tmp_path / "r", ["-x"])
    plugins = [value for option, value in zip(argv, argv[1:]) if option == "-p"]
    assert plugins[:3] == ["xdist.plugin", "pytest_timeout", "harness.contract.plugin"] and argv[-1] == str(SUITE_DIR)
    pairs = dict(zip(argv, argv[1:]))
    assert pairs["--server-cmd"] == "srv --flag" and pairs["--level"] == "must" and pairs["--requirement"] == "wire"
    assert pairs["--collab-server-cmd"] == "srv --collab" and pairs["--profiles"] == "messaging"
    assert pairs["--provisioner"] == "m:C" and pairs["-n"] == "3" and pairs["--maxschedchunk"] == "1" and pairs["--report-dir"] == str(tmp_path / "r")
    assert pairs["--baseline"].endswith("b.txt") and "-x" in argv


def test_auto_workers_are_twice_the_usable_cores_within_bounds(tmp_path, monkeypatch):
    args = cli.build_parser().parse_args([])
    for cores, workers in ((1, 2), (2, 4), (3, 6), (16, cli.MAX_AUTO_WORKERS)):
        monkeypatch.setattr(cli.os, "sched_getaffinity", lambda _pid, n=cores: set(range(n)), raising=False)
        argv = cli.pytest_arguments(args, tmp_path / "r")
        assert dict(zip(argv, argv[1:]))["-n"] == str(workers)


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
def test_the_callers_pytest_addopts_do_not_leak_into_the_contract_run(tmp_path):
    """A CI job that sets PYTEST_ADDOPTS=--junitxml=... for its own tests must not get the contract run's
    results there instead of in the contract report."""
    outer = tmp_path / "outer-junit.xml"
    run = run_contract(tmp_path, "--requirement", "wire:ping", env={"PYTEST_ADDOPTS": f"--junitxml={outer}"})
    assert run.returncode == 0, run.output[-3000:]
    assert "wire:ping" in (run.report_dir / "junit.xml").read_text("utf-8")
    assert not outer.exists()
    assert "PYTEST_ADDOPTS" in run.output and "not applied to the contract suite" in run.output


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
    """``pytest -p harness.contract.plugin`` with no paths means the contract suite, nothing else."""
    run = run_contract(tmp_path, command=[
        sys.executable, "-m", "pytest", "-p", "harness.contract.plugin", "-p", "no:cacheprovider",
        "--rootdir", str(RUNNER.parent), "-c", str(RUNNER.parent / "pyproject.toml"),
        "--requirement", "wire:method:unknown", "--report-dir", str(tmp_path / "report")])
    assert run.returncode == 0, run.output[-3000:]
    assert "1 passed" in run.output and run.result("wire:method:unknown")["result"] == "pass"


@pytest.mark.parametrize("server_cmd", ["my-server mcp serve", shlex.join([*REFERENCE_SERVER_CMD, "--verbose"])])
def test_another_server_never_gets_the_references_provisioner(server_cmd):
    assert Target.from_options(server_cmd, None).provisioner is None
    assert Target.from_options(server_cmd, REFERENCE_PROVISIONER).server_cmd == tuple(shlex.split(server_cmd))
    assert Target.from_options(shlex.join(REFERENCE_SERVER_CMD), None).provisioner == REFERENCE_PROVISIONER


@pytest.mark.slow
def test_another_server_without_its_provisioner_gets_the_protocol_profile_alone(tmp_path):
    """``pytest -p harness.contract.plugin --server-cmd X`` must not fall back to the reference's app: without a
    provisioner the target offers the protocol profile only, and asking for the messaging one says why not."""
    target = Target.from_options("my-server mcp serve", None)
    assert target.provisioner is None and target.profiles == ("protocol",)
    assert target.select_profiles(None) == ("protocol",)
    with pytest.raises(TargetError, match="needs the implementation's provisioner"):
        target.select_profiles(("messaging",))
    run = run_contract(tmp_path, command=[
        sys.executable, "-m", "pytest", "-p", "harness.contract.plugin", "-p", "no:cacheprovider",
        "--rootdir", str(RUNNER.parent), "-c", str(RUNNER.parent / "pyproject.toml"),
        "--server-cmd", "my-server mcp serve", "--profiles", "messaging", "--report-dir", str(tmp_path / "report")])
    assert run.returncode == 4, run.output[-3000:]
    assert "--provisioner module:Class" in run.output
    assert not (tmp_path / "report" / "compliance.json").exists()


def test_consent_to_call_a_foreign_servers_tools_is_explicit():
    bare = Target.from_options("my-server", None)
    assert not bare.consent.granted and bare.consented_calls() == () and "tool-calls" not in bare.offers()
    told = Target.from_options("my-server", None, tool_calls=['echo {"message": "hi"}'], call_tools="read-only")
    assert [(c.name, c.arguments) for c in told.consented_calls()] == [("echo", {"message": "hi"})]
    assert told.consent.read_only and "tool-calls" in told.offers()
    with pytest.raises(TargetError, match="not JSON"):
        Target.from_options("my-server", None, tool_calls=["echo {nope"])


@pytest.mark.parametrize("name, complaint", [
    ("no_colon", "use module:Class"),
    ("no.such.module:Thing", "cannot import"),
    ("harness.contract.reference:NoSuchClass", "has no NoSuchClass"),
])
def test_bad_provisioner_names_are_refused(name, complaint):
    with pytest.raises(TargetError, match=complaint):
        Target.from_options(None, name)


def test_server_commands_are_split_like_a_shell():
    target = Target.from_options("'my server' mcp serve --flag='a b'", REFERENCE_PROVISIONER)
    assert target.server_cmd == ("my server", "mcp", "serve", "--flag=a b")
    with pytest.raises(TargetError):
        Target.from_options("   ", REFERENCE_PROVISIONER)


def test_the_reference_offers_both_profiles():
    target = Target.from_options(None, None)
    assert target.profiles == ("protocol", "messaging", "collab")
    assert target.server_cmd_for("collab") == REFERENCE_COLLAB_SERVER_CMD
    assert REFERENCE_COLLAB_SERVER_CMD == (*REFERENCE_SERVER_CMD, "--profile", "collab")
    assert target.select_profiles(None) == ("protocol", "messaging", "collab")
    assert target.select_profiles(("messaging",)) == ("messaging",)


def test_another_server_offers_collab_only_with_its_own_collab_command():
    foreign = Target.from_options("my-server mcp", REFERENCE_PROVISIONER)
    assert foreign.profiles == ("protocol", "messaging") and foreign.describe()["collab_server_cmd"] is None
    assert foreign.select_profiles(None) == ("protocol", "messaging")
    with pytest.raises(TargetError, match="--collab-server-cmd"):
        foreign.select_profiles(("messaging", "collab"))
    with pytest.raises(TargetError):
        foreign.server_cmd_for("collab")
    both = Target.from_options("my-server mcp", REFERENCE_PROVISIONER, "my-server mcp --tree")
    assert both.profiles == ("protocol", "messaging", "collab") and both.server_cmd_for("collab") == ("my-server", "mcp", "--tree")


class MessagingOnlyProvisioner:
    def __init__(self, root):
        self.root = root

    def register(self, name, *, provider="manual", aliases=()):
        raise NotImplementedError


def test_a_provisioner_without_collab_roots_cannot_select_the_collab_profile():
    target = Target.from_options(None, f"{__name__}:MessagingOnlyProvisioner")
    assert not target.registers_collab_roots()
    with pytest.raises(TargetError, match="--profiles messaging"):
        target.select_profiles(None)
    assert target.select_profiles(("messaging",)) == ("messaging",)


@pytest.mark.parametrize("text, profiles", [
    (None, None), ("messaging", ("messaging",)), ("collab, messaging", ("messaging", "collab")),
])
def test_profile_lists_parse(text, profiles):
    assert parse_profiles(text) == profiles


@pytest.mark.parametrize("text", ["", "tree", "messaging,tree"])
def test_unknown_profiles_are_refused(text):
    with pytest.raises(ValueError, match="messaging, collab"):
        parse_profiles(text)


@pytest.mark.slow
def test_a_server_without_the_collab_profile_runs_messaging_and_reports_collab_not_tested(tmp_path):
    """Another --server-cmd (here the reference, spelled differently) without --collab-server-cmd."""
    server = shlex.join([*REFERENCE_SERVER_CMD, "--profile", "messaging"])
    run = run_contract(tmp_path, "--server-cmd", server, "--provisioner", REFERENCE_PROVISIONER,
                       "--requirement", "wire:ping", "--requirement", "collab:spawn:task-name")
    assert run.returncode == 0, run.output[-3000:]
    document = run.compliance
    assert document["selection"]["profiles"] == ["protocol", "messaging"] and document["target"]["collab_server_cmd"] is None
    assert run.result("wire:ping")["result"] == "pass"
    skipped = run.result("collab:spawn:task-name")
    assert skipped["result"] == "not tested" and skipped["selected"] is False
    collab = document["profile_scores"]["collab"]
    assert collab["selected"] is False and collab["MUST"]["pass"] == 0 and collab["MUST"]["not_tested"] > 0
    assert "collab profile (not selected)" in run.output


@pytest.mark.slow
def test_the_collab_profile_runs_against_the_reference(tmp_path):
    run = run_contract(tmp_path, "--profiles", "collab", "--requirement", "collab:spawn:task-name",
                       "--requirement", "collab:tools:list", "--requirement", "wire:ping")
    assert run.returncode == 0, run.output[-3000:]
    assert run.result("collab:spawn:task-name")["result"] == "pass"
    assert run.result("collab:tools:list")["result"] == "pass"
    assert run.result("wire:ping")["result"] == "not tested", "messaging was left out"


@pytest.mark.slow
@pytest.mark.parametrize("route", ["runner", "plugin"])
def test_verdict_report_and_exit_status_agree_with_syrupy_installed(tmp_path, route):
    """A failing SHOULD: compliant, exit 0, in the summary, in compliance.md and in the status.

    syrupy (a test dependency, so installed here) ORs pytest's own status back into the
    session after other plugins' sessionfinish hooks; the verdict must still be what counts.
    """
    import syrupy  # noqa: F401  (the point is that it is installed and loaded)

    target = [*mutant_target("text-mirror-dropped"), "--requirement", "tools:result:text-mirror",
              "--requirement", "wire:ping"]
    if route == "runner":
        # By name: the runner loads no plugin by itself; -v shows pytest's header, which lists the plugins.
        run = run_contract(tmp_path, *target, "-v", "--", "-p", "syrupy")
    else:
        run = run_contract(tmp_path, command=[
            sys.executable, "-m", "pytest", "-p", "harness.contract.plugin",
            "--rootdir", str(RUNNER.parent), "-c", str(RUNNER.parent / "pyproject.toml"),
            *target, "--report-dir", str(tmp_path / "report")])
    assert "syrupy" in run.output, "syrupy should be loaded (pytest lists its plugins)"
    assert run.result("tools:result:text-mirror")["result"] == "fail"
    # Narrowed to a MUST and a SHOULD: the verdict says how much of the selected profiles ran.
    assert re.search(r"verdict: compliant over what ran: 1 of \d+ MUSTs, 1 of \d+ SHOULDs, .*\(exit status 0\)",
                     run.output), run.output[-3000:]
    assert run.compliance["verdict"] == {**run.compliance["verdict"], "compliant": True, "exit_status": 0}
    assert "- Verdict: **compliant** (exit status 0)" in run.markdown
    assert run.returncode == 0, run.output[-3000:]


PASSING_PLUGIN = """\
import os

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"  # every test passes, whatever happened
    with open(os.environ["PASSING_PLUGIN_LOADED"], "a") as marker:
        marker.write(f"{os.getpid()}\\n")
"""


def _installed_plugin(site: Path) -> Path:
    """A pytest plugin installed as any package installs one (an entry point in ``pytest11``), in ``site``."""
    meta = site / "passing_plugin-1.0.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: passing-plugin\nVersion: 1.0\n")
    (meta / "entry_points.txt").write_text("[pytest11]\npassing = passing_plugin\n")
    (site / "passing_plugin.py").write_text(PASSING_PLUGIN)
    return site


@pytest.mark.slow
def test_a_pytest_plugin_installed_beside_the_suite_changes_no_verdict(tmp_path):
    """The environment's pytest plugins do not load in a contract run, its workers included: one that marks every
    test passed leaves a planted bug failing. Named after ``--`` it loads (so it was there to be found)."""
    site = _installed_plugin(tmp_path / "site")
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    selected = [*mutant_target("limit-ignored"), "--requirement", "receive:limit:honoured"]
    loaded = tmp_path / "loaded.txt"
    (tmp_path / "beside").mkdir()
    (tmp_path / "named").mkdir()
    run = run_contract(tmp_path / "beside", *selected, "-n", "2",
                       env={"PYTHONPATH": path, "PASSING_PLUGIN_LOADED": str(loaded)})
    assert not loaded.exists(), f"the installed plugin was loaded by {loaded.read_text()}"
    assert run.returncode == 1 and run.result("receive:limit:honoured")["result"] == "fail", run.output[-3000:]
    named = run_contract(tmp_path / "named", *selected, "--", "-p", "passing_plugin",
                         env={"PYTHONPATH": path, "PASSING_PLUGIN_LOADED": str(loaded)})
    assert loaded.exists(), named.output[-3000:]


@pytest.mark.slow
def test_the_suite_leaves_nothing_in_the_directory_it_runs_from(tmp_path):
    """Run from an empty directory, by the runner and as a plugin: only the report directory appears."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    selected = ["--requirement", "fuzz:valid:declared-outcome", "--requirement", "text:bodies:every-path"]
    report = tmp_path / "report"
    run = run_contract(tmp_path, *selected, "--report-dir", str(scratch / "out"), cwd=scratch)
    assert run.returncode == 0, run.output[-3000:]
    assert sorted(p.name for p in scratch.iterdir()) == ["out"], "the runner wrote into its working directory"
    assert sorted(p.name for p in (scratch / "out").iterdir()) == [
        "compliance.json", "compliance.md", "durations.json", "junit.xml"]
    plugin = run_contract(tmp_path, command=[
        sys.executable, "-m", "pytest", "-p", "harness.contract.plugin",
        "--rootdir", str(scratch), *selected, "--report-dir", str(report)], cwd=scratch)
    assert plugin.returncode == 0, plugin.output[-3000:]
    assert sorted(p.name for p in scratch.iterdir()) == ["out"], "the plugin wrote into its working directory"
