"""The suite catches bugs: each mutant of the reference fails exactly where it should.

Each mutant (``mutant_server.py``) breaks one rule of the contract. The runner
is run against it, selecting the requirement the mutation breaks and a control
requirement it leaves alone: the run must fail (exit 1), the report must name
the broken requirement as failed with the failing step's request and response,
and the control must still pass, so the failure is specific and not the wrapper
breaking everything.
"""

from __future__ import annotations

import pytest

from .conftest import mutant_command, run_contract
from .mutant_server import MUTATIONS

# mutation -> (the requirement it breaks, a requirement it must leave passing)
EXPECTED = {
    "unicode": ("send:unicode:byte-exact", "send:receipt:admitted"),
    "task-twice": ("task:new-work:once", "task:receipt:request-id"),
    "sender-honoured": ("identity:sender-argument:rejected", "identity:sender:attributed"),
    "no-iserror": ("tools:error:is-error", "tools:result:structured"),
    "notification-answered": ("wire:notification:no-response", "send:receipt:admitted"),
    "stdout-log": ("wire:stdout:json-rpc-only", "wire:ping"),
    "limit-ignored": ("receive:limit:honoured", "receive:order:admission"),
    "ack-ignored": ("receive:ack:acknowledges", "receive:unacked:reoffered"),
}


def test_every_mutation_has_an_expectation():
    assert sorted(EXPECTED) == MUTATIONS


@pytest.mark.slow
@pytest.mark.parametrize("mutation", sorted(EXPECTED))
def test_mutant_fails_its_requirement(tmp_path, mutation):
    broken, control = EXPECTED[mutation]
    run = run_contract(tmp_path, "--server-cmd", mutant_command(mutation),
                       "--requirement", broken, "--requirement", control)
    assert run.returncode == 1, f"the run should fail; exit {run.returncode}:\n{run.output[-3000:]}"
    failed = run.result(broken)
    assert failed["result"] == "fail", f"{broken}: {failed['result']}\n{run.output[-3000:]}"
    assert failed["failures"] and all("request" in f or f.get("detail") for f in failed["failures"])
    assert run.result(control)["result"] == "pass", f"{control} should pass:\n{run.output[-3000:]}"
    assert any(broken in p for p in run.compliance["verdict"]["problems"])
    assert f"### `{broken}` (MUST): fail" in run.markdown


@pytest.mark.slow
def test_a_baselined_mutant_failure_is_expected_and_the_run_passes(tmp_path):
    baseline = tmp_path / "expected-failures.txt"
    baseline.write_text("# our server's known gaps\nreceive:limit:honoured   # limit is not implemented yet\n")
    run = run_contract(tmp_path, "--server-cmd", mutant_command("limit-ignored"),
                       "--requirement", "receive:limit:honoured", "--baseline", str(baseline))
    assert run.returncode == 0, run.output[-3000:]
    entry = run.result("receive:limit:honoured")
    assert entry["result"] == "expected failure" and entry["baselined"] == "limit is not implemented yet"
