"""Fixtures for the contract suite's own tests.

The suite's fixtures (:mod:`harness.contract.fixtures`) are imported so that
``test_reference_suite.py`` runs the suite against the reference core inside
``make test``. :func:`run_contract` runs ``runner.py contract`` as a child
process, isolated (own HOME and temp dir, no inherited pytest variables,
output to files, a hard timeout), for the end-to-end and mutant tests.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from harness.contract.fixtures import (  # noqa: F401
    case_app,
    case_sessions,
    contract_target,
    isolation,
    own_servers,
    protocol,
    servers,
    session_pools,
    shared_app,
    tree_servers,
    votes,
)
from harness.contract.layout import REFERENCE_PROVISIONER, REFERENCE_SERVER_CMD

RUNNER = Path(__file__).resolve().parents[2] / "runner.py"
MUTANT_SERVER = Path(__file__).resolve().parent / "mutant_server.py"
RUN_TIMEOUT_S = 240


@dataclass(frozen=True)
class ContractRun:
    """A finished ``runner.py contract`` child: exit status, output and its reports."""

    returncode: int
    output: str
    report_dir: Path

    @property
    def compliance(self) -> dict:
        return json.loads((self.report_dir / "compliance.json").read_text("utf-8"))

    @property
    def markdown(self) -> str:
        return (self.report_dir / "compliance.md").read_text("utf-8")

    def result(self, requirement_id: str) -> dict:
        for entry in self.compliance["requirements"]:
            if entry["id"] == requirement_id:
                return entry
        raise KeyError(requirement_id)


def run_contract(tmp_path: Path, *args: str, command: Sequence[str] | None = None, cwd: Path | None = None,
                 env: dict[str, str] | None = None, timeout: float = RUN_TIMEOUT_S) -> ContractRun:
    """Run the contract runner (or ``command``) in a child process with a clean environment.

    ``env`` is added to that environment; ``cwd`` is where it runs (default ``tmp_path``); ``timeout``
    bounds it.
    """
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    child_env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PEERWIRE_"))}
    child_env.update(HOME=str(home), TMPDIR=str(tmp_path), **(env or {}))
    report_dir = tmp_path / "report"
    argv = list(command) if command is not None else [
        sys.executable, str(RUNNER), "contract", "-n", "0", "--report-dir", str(report_dir), *args]
    log = tmp_path / "run.log"
    with open(log, "wb") as out:
        try:
            done = subprocess.run(argv, cwd=cwd or tmp_path, env=child_env, stdout=out, stderr=subprocess.STDOUT,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{' '.join(argv[:4])} ran over {timeout:g}s; output:\n"
                                 f"{log.read_text(errors='replace')[-3000:]}") from None
    return ContractRun(done.returncode, log.read_text("utf-8", errors="replace"), report_dir)


def mutant_command(mutation: str) -> str:
    """A --server-cmd running the reference behind the named mutation."""
    argv = [sys.executable, str(MUTANT_SERVER), mutation, "--", *REFERENCE_SERVER_CMD]
    return shlex.join(argv)


def mutant_target(mutation: str) -> list[str]:
    """The runner options that test the named mutant: its server command, on the reference's app."""
    return ["--server-cmd", mutant_command(mutation), "--provisioner", REFERENCE_PROVISIONER]
