"""The GitHub Actions workflow: valid YAML, the suite's two tiers (``make test`` through ``.ci/run`` on every
change, ``make full`` beyond pull requests), a matrix over every shard once, and make targets that run the
sharded commands the shard-and-merge test proves (``tests/report/test_shard_merge.py``)."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from tests.patience import WAIT_S

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW_PATH = ROOT / ".github" / "workflows" / "acceptance.yml"


@pytest.fixture(scope="module")
def workflow() -> dict:
    document = yaml.safe_load(WORKFLOW_PATH.read_text(encoding="utf-8"))
    assert isinstance(document, dict), "the workflow is not a YAML mapping"
    # YAML 1.1 reads the bare key `on` as true; GitHub reads it as the trigger list.
    assert document.get(True) or document.get("on"), "the workflow has no trigger"
    return document


def runs(job: dict) -> list[str]:
    return [step["run"] for step in job["steps"] if "run" in step]


def make_commands(job: dict) -> list[str]:
    return [line.strip() for script in runs(job) for line in script.splitlines() if line.strip().startswith("make ")]


def dry_run(command: str, program: str = "runner.py") -> list[list[str]]:
    """What ``make`` would run for ``command`` (its own recipe lines that run ``program``, not the set-up's)."""
    target_args = shlex.split(command)[1:]
    out = subprocess.run(["make", "-n", "-o", "setup", *target_args], cwd=ROOT,
                         capture_output=True, text=True, timeout=WAIT_S, check=True).stdout
    return [shlex.split(line) for line in out.replace("\\\n", " ").splitlines() if program in line]


def test_every_change_runs_make_test_and_the_exhaustive_tier_runs_beyond_pull_requests(workflow):
    jobs = workflow["jobs"]
    assert runs(jobs["test"]) == [runs(jobs["test"])[0], ".ci/run"] and "if" not in jobs["test"]
    assert (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()[-1] == "make test"
    assert "make full" in make_commands(jobs["full"])
    assert jobs["full"]["if"] == "${{ github.event_name != 'pull_request' }}"
    triggers = workflow.get(True) or workflow["on"]
    assert {"push", "pull_request", "schedule", "workflow_dispatch"} <= set(triggers)


def test_make_test_leaves_out_the_full_tier_that_make_full_and_make_personas_run():
    def selection(command: str) -> str | None:
        (argv,) = dry_run(command, "pytest")
        options = argv[argv.index("pytest") + 1:]
        return options[options.index("-m") + 1] if "-m" in options else None

    assert selection("make test") == "not full"
    assert selection("make full") is None, "make full runs every tier"
    assert selection("make personas") == "personas"


def test_the_matrix_covers_every_shard_of_the_count_once(workflow):
    shard_job = workflow["jobs"]["shard"]
    count = int(workflow["env"]["SHARD_COUNT"])
    assert shard_job["strategy"]["matrix"]["shard"] == list(range(1, count + 1))
    assert shard_job["strategy"].get("fail-fast") is False, "one failing shard must not cancel the others"
    shard_steps = make_commands(shard_job)
    assert "make accept SHARD=${{ matrix.shard }}/${{ env.SHARD_COUNT }} REPORT_DIR=out" in shard_steps
    assert "make contract SHARD=${{ matrix.shard }}/${{ env.SHARD_COUNT }} REPORT_DIR=out" in shard_steps


def test_every_shard_uploads_what_the_merge_job_downloads_and_merges(workflow):
    shard_job, merge_job = workflow["jobs"]["shard"], workflow["jobs"]["merge"]
    upload = next(s for s in shard_job["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact"))
    assert upload["with"]["path"].rstrip("/") == "out" and upload.get("if") == "${{ !cancelled() }}"
    assert upload["with"]["name"] == "shard-${{ matrix.shard }}"
    assert merge_job["needs"] == "shard" and merge_job.get("if") == "${{ !cancelled() }}"
    download = next(s for s in merge_job["steps"] if str(s.get("uses", "")).startswith("actions/download-artifact"))
    assert re.fullmatch(download["with"]["pattern"].replace("*", r"\d+"), "shard-3")
    assert f"make merge SHARDS={download['with']['path']} OUT=merged" in make_commands(merge_job)


def test_every_make_target_the_workflow_runs_exists():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    workflow_text = WORKFLOW_PATH.read_text(encoding="utf-8")
    targets = set(re.findall(r"\bmake ([\w-]+)", workflow_text))
    assert targets == {"setup", "accept", "accept-pairs", "contract", "merge", "test", "full"}
    assert targets <= set(re.findall(r"^([a-z-]+):", makefile, re.M))


def test_the_make_targets_run_the_sharded_commands():
    accept = dry_run("make accept SHARD=2/4 REPORT_DIR=out")
    assert accept == [[".venv/bin/python", "runner.py", *ACCEPT_AGENTS, "--shard", "2/4", "--report-dir",
                       "out/acceptance", "--junit", "out/acceptance-junit.xml"]]
    contract = dry_run("make contract SHARD=2/4 REPORT_DIR=out")
    assert contract == [[".venv/bin/python", "runner.py", "contract", "--shard", "2/4", "--report-dir", "out/contract"]]
    assert dry_run("make merge SHARDS=shards OUT=merged") == [
        [".venv/bin/python", "runner.py", "report", "merge", "shards", "--out", "merged"]]
    assert dry_run("make accept") == [[".venv/bin/python", "runner.py", *ACCEPT_AGENTS]], "unsharded by default"


ACCEPT_AGENTS = ["--agents", "codex,codex", "--agents", "codex,opencode@task-reply-auto"]
"""make accept: every scenario with two Codex agents, and one mixed pair."""


def test_the_mixed_pairs_run_in_a_job_of_their_own_with_a_report_of_their_own(workflow):
    pairs = workflow["jobs"]["pairs"]
    assert "make accept-pairs REPORT_DIR=out" in make_commands(pairs)
    assert dry_run("make accept-pairs REPORT_DIR=out") == [[
        ".venv/bin/python", "runner.py", "--agents", "codex,opencode", "--agents", "opencode,codex",
        "--agents", "opencode,opencode", "--report-dir", "out/pairs", "--junit", "out/pairs-junit.xml"]]
    # Not a shard: the merge job merges the shards' reports only (pairs has no shard plan of theirs).
    assert workflow["jobs"]["merge"]["needs"] == "shard"
    upload = next(s for s in pairs["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact"))
    assert upload["with"]["path"].rstrip("/") == "out" and not upload["with"]["name"].startswith("shard-")
