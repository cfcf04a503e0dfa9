"""The GitHub Actions other projects adopt peerwire with: ``action.yml`` (the contract suite) and
``accept/action.yml`` (the acceptance runner).

Read as YAML and checked for what GitHub would only find at run time: every input used and
every one used declared, step outputs that exist, no expression inside a script. Their
scripts then run as GitHub runs them (``bash --noprofile --norc -eo pipefail``) with stand-ins
for python, npm and ``peerwire-harness`` that record their arguments: the command lines they
build must parse with the real commands' parsers, and the step must keep the exit status.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from harness import npm
from harness.acceptance.options import parser as accept_parser
from harness.cli import COMMANDS
from harness.contract.cli import build_parser as contract_parser
from tests.patience import WAIT_S

ROOT = Path(__file__).resolve().parents[1]
ACTIONS = {"contract": ROOT / "action.yml", "accept": ROOT / "accept" / "action.yml"}
RUN_STEP = {"contract": "suite", "accept": "run"}
BASH = ["bash", "--noprofile", "--norc", "-eo", "pipefail"]  # what `shell: bash` runs in GitHub Actions
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


@pytest.fixture(scope="module", params=sorted(ACTIONS))
def action(request) -> tuple[str, dict]:
    document = yaml.safe_load(ACTIONS[request.param].read_text(encoding="utf-8"))
    assert isinstance(document, dict) and document["runs"]["using"] == "composite"
    return request.param, document


def steps(document: dict) -> list[dict]:
    return document["runs"]["steps"]


def step(document: dict, step_id: str) -> dict:
    return next(s for s in steps(document) if s.get("id") == step_id)


def expressions(value) -> list[str]:
    return EXPRESSION.findall(json.dumps(value))


def test_every_input_is_used_and_every_input_used_is_declared(action) -> None:
    name, document = action
    used = {m for e in expressions(document["runs"]) + expressions(document.get("outputs"))
            for m in re.findall(r"inputs\.([A-Za-z0-9_-]+)", e)}
    declared = set(document["inputs"])
    assert used == declared, f"{name}: declared but unused {declared - used}, used but undeclared {used - declared}"
    assert all(spec.get("description") for spec in document["inputs"].values())


def test_every_step_output_read_is_written_by_that_step(action) -> None:
    _, document = action
    for expression in expressions(document["runs"]) + expressions(document.get("outputs")):
        for step_id, output in re.findall(r"steps\.([a-z-]+)\.outputs\.([a-z-]+)", expression):
            assert f'echo "{output}=' in step(document, step_id)["run"], f"{step_id} never writes {output}"


def test_scripts_take_inputs_from_the_environment_only(action) -> None:
    """An expression inside a script is pasted in before bash reads it: a quote in an input would break
    the script, or run as code. Inputs reach the scripts as environment variables."""
    _, document = action
    for s in steps(document):
        if "run" in s:
            assert s["shell"] == "bash" and "${{" not in s["run"], s.get("name")
        else:
            assert re.fullmatch(r"actions/[a-z-]+@v\d+", s["uses"]), s["uses"]


def test_the_install_step_installs_this_project_with_an_extra_that_exists(action) -> None:
    name, document = action
    env = step(document, "install")["env"]
    source = env["PEERWIRE_SOURCE"].replace("${{ github.action_path }}", str(ACTIONS[name].parent))
    assert Path(source).resolve() == ROOT
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert env["PEERWIRE_EXTRA"] in extras and env["PEERWIRE_EXTRA"] in npm.GROUPS
    assert name in COMMANDS


def test_every_script_is_valid_bash(action) -> None:
    _, document = action
    for s in steps(document):
        if "run" in s:
            done = subprocess.run(["bash", "-n"], input=s["run"], capture_output=True, text=True, timeout=WAIT_S)
            assert done.returncode == 0, f"{s.get('name')}: {done.stderr}"


# -- the scripts, run with stand-ins ---------------------------------------------------------------

def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


RECORDER = """#!{python}
import json, os, sys
if sys.argv[1:2] == ["-c"] and {run_code}:  # a script it is given runs for real
    os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
with open({log!r}, "a", encoding="utf-8") as out:
    out.write(json.dumps([{name!r}, sys.argv[1:]]) + "\\n")
sys.exit({status})
"""


def recorder(path: Path, log: Path, status: int = 0, run_code: bool = False) -> Path:
    """A stand-in program that appends its name and arguments to ``log`` and exits with ``status``
    (a Python stand-in with ``run_code`` runs ``-c CODE`` for real)."""
    return executable(path, RECORDER.format(python=sys.executable, log=str(log), name=path.name, status=status,
                                            run_code=run_code))


def run_step(script: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BASH, "-c", script], env={"PATH": os.environ["PATH"], **env}, cwd=cwd,
                          capture_output=True, text=True, timeout=WAIT_S)


def outputs(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text(encoding="utf-8").splitlines())


def calls(log: Path) -> list[tuple[str, list[str]]]:
    return [tuple(json.loads(line)) for line in log.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def stand_in_venv(tmp_path: Path) -> tuple[Path, Path]:
    """A bin folder with a real python and a recording ``peerwire-harness`` that fails with status 1."""
    bin_dir, log = tmp_path / "venv" / "bin", tmp_path / "calls.jsonl"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").symlink_to(sys.executable)
    recorder(bin_dir / "peerwire-harness", log, status=1)
    return bin_dir, log


def test_the_contract_step_passes_every_input_intact_and_keeps_the_verdict(tmp_path, stand_in_venv) -> None:
    bin_dir, log = stand_in_venv
    document = yaml.safe_load(ACTIONS["contract"].read_text(encoding="utf-8"))
    github_output = tmp_path / "github_output"
    env = {"PEERWIRE_BIN": str(bin_dir), "PEERWIRE_NODE_MODULES": "/nm", "GITHUB_OUTPUT": str(github_output),
           "SERVER_CMD": "my-server --name 'two words' mcp serve", "PROVISIONER": "my.mod:Prov",
           "PROFILES": "messaging", "COLLAB_SERVER_CMD": "", "LEVEL": "must",
           "REQUIREMENTS": "wire:*\nsend:receipt:admitted", "BASELINE": "ci/baseline.txt",
           "ARGS": "--shard 1/2 -- -k 'not slow'", "REPORT_DIR": "out/contract"}
    (tmp_path / "wire:ping").touch()  # a file a shell glob would match: the pattern must reach the suite as is
    done = run_step(step(document, "suite")["run"], env, tmp_path)
    assert done.returncode == 1, done.stderr
    ((program, argv),) = calls(log)
    assert program == "peerwire-harness" and argv[0] == "contract"
    cut = argv.index("--")
    args = contract_parser().parse_args(argv[1:cut])
    assert shlex.split(args.server_cmd) == ["my-server", "--name", "two words", "mcp", "serve"]
    assert (args.provisioner, args.profiles, args.level, args.baseline, args.shard) == (
        "my.mod:Prov", "messaging", "must", "ci/baseline.txt", "1/2")
    assert args.requirement == ["wire:*", "send:receipt:admitted"] and args.collab_server_cmd is None
    assert argv[cut:] == ["--", "-k", "not slow"]
    assert outputs(github_output) == {"report-dir": str(tmp_path / "out" / "contract"), "exit-status": "1"}


def test_the_acceptance_step_passes_every_input_intact_and_keeps_the_verdict(tmp_path, stand_in_venv) -> None:
    bin_dir, log = stand_in_venv
    document = yaml.safe_load(ACTIONS["accept"].read_text(encoding="utf-8"))
    github_output = tmp_path / "github_output"
    env = {"PEERWIRE_BIN": str(bin_dir), "PEERWIRE_NODE_MODULES": "/nm", "GITHUB_OUTPUT": str(github_output),
           "DRIVER": "my.driver:Driver", "SCENARIOS": "smoke task-reply", "MODE": "attached",
           "CODEX_VERSION": "0.170.0", "ARGS": "--trials 3", "REPORT_DIR": "acceptance"}
    done = run_step(step(document, "run")["run"], env, tmp_path)
    assert done.returncode == 1, done.stderr
    ((program, argv),) = calls(log)
    assert program == "peerwire-harness" and argv[0] == "accept"
    args = accept_parser().parse_args(argv[1:])
    assert (args.driver, args.scenario, args.mode, args.expected_version, args.trials) == (
        "my.driver:Driver", ["smoke", "task-reply"], "attached", "0.170.0", 3)
    assert args.report_dir == Path("acceptance") and args.junit == Path("acceptance/junit.xml")
    assert outputs(github_output) == {"report-dir": str(tmp_path / "acceptance"), "exit-status": "1"}


STAND_IN_PYTHON = """#!/usr/bin/env bash
# `python -m venv DIR`: a virtualenv whose python records, and whose peerwire-harness is the real one.
[ "$1 $2" = "-m venv" ] || exit 9
mkdir -p "$3/bin"
cp {recorder} "$3/bin/python"
printf '#!/bin/sh\\nexec {python} -m harness.cli "$@"\\n' > "$3/bin/peerwire-harness"
chmod +x "$3/bin/python" "$3/bin/peerwire-harness"
"""


@pytest.mark.parametrize(("name", "codex_version"), [("contract", ""), ("accept", ""), ("accept", "0.170.0")])
def test_the_install_step_installs_the_extra_the_callers_packages_and_the_pins(tmp_path, name, codex_version) -> None:
    document = yaml.safe_load(ACTIONS[name].read_text(encoding="utf-8"))
    install = step(document, "install")
    log, stand_ins, runner_temp = tmp_path / "calls.jsonl", tmp_path / "stand-ins", tmp_path / "runner-temp"
    pip = recorder(tmp_path / "pip-recorder" / "python", log, run_code=True)
    recorder(stand_ins / "npm", log)
    executable(stand_ins / "python", STAND_IN_PYTHON.format(recorder=pip, python=sys.executable))
    github_output = tmp_path / "github_output"
    env = {**{k: v.replace("${{ github.action_path }}", "/action") for k, v in install["env"].items()
              if "${{ inputs." not in v},
           "INSTALL": "-e '.[extra]' other-package", "CODEX_VERSION": codex_version, "TMUX_WANTED": "false",
           "RUNNER_TEMP": str(runner_temp), "GITHUB_OUTPUT": str(github_output),
           "PATH": f"{stand_ins}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([*BASH, "-c", install["run"]], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=WAIT_S)
    assert done.returncode == 0, done.stderr
    extra = install["env"]["PEERWIRE_EXTRA"]
    pins = [f"@openai/codex@{codex_version}"] if codex_version else [npm.spec(p) for p in npm.GROUPS[extra]]
    source = install["env"]["PEERWIRE_SOURCE"].replace("${{ github.action_path }}", "/action")
    assert calls(log) == [
        ("python", ["-m", "pip", "install", "--quiet", "--disable-pip-version-check", f"{source}[{extra}]"]),
        ("python", ["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-e", ".[extra]",
                    "other-package"]),
        ("npm", ["install", "--prefix", str(runner_temp / "peerwire-node"), "--no-audit", "--no-fund",
                 "--loglevel=error", *pins]),
    ]
    venv = runner_temp / f"peerwire-{extra}"
    assert outputs(github_output) == {"bin": str(venv / "bin"),
                                      "node-modules": str(runner_temp / "peerwire-node" / "node_modules")}


def test_the_adopt_workflow_uses_both_actions_with_declared_inputs_only() -> None:
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "adopt.yml").read_text(encoding="utf-8"))
    used = {s["uses"]: s.get("with", {}) for job in workflow["jobs"].values() for s in job["steps"]
            if str(s.get("uses", "")).startswith("./")}
    assert set(used) == {"./", "./accept"}
    for uses, given in used.items():
        document = yaml.safe_load((ROOT / uses / "action.yml").read_text(encoding="utf-8"))
        required = {name for name, spec in document["inputs"].items() if spec.get("required")}
        assert required <= set(given) <= set(document["inputs"]), uses
