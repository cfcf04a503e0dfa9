"""Any design may pass: the suite against a core with no app, written from ``contracts/`` alone.

``appless/`` is a second, independent implementation of the messaging
contract: no app and no daemon; each MCP session is a process that opens the
shared SQLite store itself, and waits poll it for other processes' commits.
It imports nothing of peerwire's. Its provisioner has nothing to make
unavailable (so the ``app:unavailable`` requirements are reported not selected,
naming the capability) and crashes it by killing the server processes, which
are what write. A selection of the messaging profile covering every class of
bug that only showed against such a design passes; then each bug planted in
it (``appless/store.py``'s ``MUTANTS``) fails exactly its requirement while a
control requirement still passes.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from harness.contract.manifest import Level, manifest

from .conftest import run_contract

HERE = Path(__file__).resolve().parent
SERVER = [sys.executable, str(HERE / "appless" / "server.py")]
PROVISIONER = "appless.provisioner:AppLessProvisioner"
ENV = {"PYTHONPATH": str(HERE)}
SELECTION = ("target", "send:receipt:admitted", "receive:order", "receive:cursor:continue", "receive:timeout",
             "wait:wakes-on-activity", "wait:timeout-zero:immediate", "wait:wake:admission-window",
             "receive:isolation:names-alike", "wait:empty:untouched", "interrupt", "list-agents:fields",
             "receipt:durable", "task:receipt:request-id", "identity", "tools:list:names", "app:unavailable",
             "wire:ping", "wire:initialize:handshake", "wire:stdout:tool-call")
"""What this small core implements: targets, admission, ordering, waits, interrupts, crashes (and a few wire
rules); the rest of the contract (replies' rules, bounds, retries) is the reference's to prove."""

# mutant -> (the requirements it breaks, a requirement it must leave passing)
MUTANTS: dict[str, tuple[tuple[str, ...], str]] = {
    "seq-outside-transaction": (("receive:order:concurrent-admissions",), "receive:order:admission"),
    "ack-before-commit": (("receipt:durable:crash-mid-write",), "send:receipt:admitted"),
    "snapshot-wait": (("receive:timeout:wakes", "wait:wakes-on-activity"), "receive:timeout:expires"),
    "case-insensitive-targets": (("target:name:case-exact",), "target:name:exact"),
    "interrupt-succeeds": (("interrupt:idle:not-active",), "interrupt:manual:unsupported"),
    # The three classes an outsider's planted bugs slipped past: only their own requirements catch them.
    "check-then-subscribe": (("wait:wake:admission-window",), "wait:wakes-on-activity"),
    "prefix-routing": (("receive:isolation:names-alike",), "receive:order:admission"),
    "empty-wait-cancels": (("wait:empty:untouched",), "wait:empty:cancels-nothing"),
}


def _run(tmp_path: Path, requirements, mutant: str | None = None):
    command = [*SERVER, *(["--mutant", mutant] if mutant else [])]
    args = [arg for rid in requirements for arg in ("--requirement", rid)]
    return run_contract(tmp_path, "--server-cmd", shlex.join(command), "--provisioner", PROVISIONER, "-n", "2",
                        *args, env=ENV)


def test_every_planted_bug_has_an_expectation():
    sys.path.insert(0, str(HERE / "appless"))
    from store import MUTANTS as PLANTED

    assert sorted(MUTANTS) == sorted(PLANTED)


@pytest.mark.slow
def test_a_core_with_no_app_passes_the_messaging_profile(tmp_path):
    run = _run(tmp_path, SELECTION)
    assert run.returncode == 0, run.output[-3000:]
    selected = [r for r in run.compliance["requirements"] if r["selected"]]
    assert selected and all(r["result"] in ("pass", "not applicable") for r in selected), \
        [(r["id"], r["result"]) for r in selected if r["result"] != "pass"]
    for rid in ("receive:order:concurrent-admissions", "receipt:durable:crash-mid-write", "target:name:case-exact",
                "interrupt:idle:not-active", "receive:timeout:wakes"):
        assert run.result(rid)["result"] == "pass", rid
    unavailable = run.result("app:unavailable")
    assert not unavailable["selected"] and unavailable["lacks"] == ["unavailable"], unavailable
    for rid, capability in (("target:disabled:refused", "agent-states"), ("target:not-sendable:fallback", "agent-states")):
        lacking = run.result(rid)
        assert not lacking["selected"] and lacking["lacks"] == [capability], lacking
    assert run.compliance["target"]["offers"] == ["tool-calls"]


@pytest.mark.slow
@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_each_planted_bug_fails_its_requirement(tmp_path, mutant):
    broken, control = MUTANTS[mutant]
    run = _run(tmp_path, (*broken, control), mutant)
    fatal = any(manifest()[r].level is Level.MUST for r in broken)
    assert run.returncode == (1 if fatal else 0), run.output[-3000:]
    for rid in broken:
        failed = run.result(rid)
        assert failed["result"] == "fail", f"{rid}: {failed['result']}\n{run.output[-3000:]}"
        assert all(f.get("detail") for f in failed["failures"]), failed["failures"]
    assert run.result(control)["result"] == "pass", f"{control} should pass:\n{run.output[-3000:]}"
