"""The suite catches bugs: each mutant of the reference fails exactly where it should.

Each mutant (``mutant_server.py``) breaks one rule of the contract. The runner
is run against it, selecting the requirements the mutation breaks and a control
requirement it leaves alone: the run's verdict follows the broken
requirements' level (a MUST fails the run, a SHOULD does not), the report names
each broken requirement as failed with the failing step's request and response,
and the control still passes, so the failure is specific and not the wrapper
breaking everything. The bug classes the suite closes (claims under
concurrency, bounds, byte-exact texts, the official clients) each have a mutant
that only their requirement catches.
"""

from __future__ import annotations

import shlex
import sys

import pytest

from harness.contract.layout import REFERENCE_COLLAB_SERVER_CMD
from harness.contract.manifest import Level, manifest

from .conftest import MUTANT_SERVER, mutant_target, run_contract
from .mutant_server import MUTATIONS

# mutation -> (the requirements it breaks, a requirement it must leave passing)
EXPECTED: dict[str, tuple[tuple[str, ...], str]] = {
    "unicode": (("send:unicode:byte-exact",), "send:receipt:admitted"),
    "task-twice": (("task:new-work:once",), "task:receipt:request-id"),
    "work-listed-once": (("task:new-work:until-acknowledged",), "task:receipt:request-id"),
    "claim-renamed": (("task:new-work:once",), "task:body:byte-exact"),
    "sender-honoured": (("identity:sender-argument:rejected",), "identity:sender:attributed"),
    "no-iserror": (("tools:error:is-error",), "tools:result:structured"),
    "notification-answered": (("wire:notification:no-response",), "send:receipt:admitted"),
    "stdout-log": (("wire:stdout:json-rpc-only",), "wire:ping"),
    "limit-ignored": (("receive:limit:honoured",), "receive:order:admission"),
    "ack-ignored": (("receive:ack:acknowledges",), "receive:unacked:reoffered"),
    "error-branch-dropped": (("tools:error:output-schema", "interop:typescript-sdk:every-tool",
                              "interop:inspector-cli:every-tool", "collab:error:output-schema",
                              "collab:interop:typescript-sdk"), "interop:python-sdk:every-tool"),
    "racy-claim": (("task:claim:race",), "task:new-work:once"),
    "has-more-at-limit": (("receive:paging:edges",), "receive:limit:honoured"),
    "max-length-exclusive": (("bounds:input:edges",), "target:unknown"),
    "nul-dropped": (("text:bodies:every-path",), "task:body:byte-exact"),
    "names-trimmed": (("text:names:every-path",), "list-agents:fields"),
    "cursor-snapshot": (("receive:cursor:position",), "receive:cursor:replay-identical"),
    "text-mirror-dropped": (("tools:result:text-mirror",), "tools:result:structured"),
    "surrogate-exit": (("wire:unicode:lone-surrogate",), "wire:ping"),
    "deep-silent": (("wire:nesting:deep", "wire:hostile:answered"), "wire:ping"),
    "nan-echo": (("wire:json:non-finite",), "wire:ping"),
    "batch-refused": (("wire:batch:2025-03-26",), "wire:ping"),
    "discover-silent": (("wire:revision:discover",), "wire:initialize:handshake"),
    "cancel-answered": (("wire:cancel:no-answer",), "wire:ping"),
    "cancel-ignored": (("wire:cancel:no-answer",), "task:receipt:request-id"),
    "id-reused": (("wire:id:in-flight",), "wire:ping"),
    "stdin-held": (("wire:stdin-close:cancels",), "wire:ping"),
    "odd-id-unanswered": (("wire:fuzz:messages", "wire:response:exactly-one"), "wire:ping"),
    "float-internal": (("wire:fuzz:tool-arguments",), "tools:result:structured"),
    "serial-calls": (("concurrency:waits:cheap-call-prompt",), "wire:ping"),
    "fraction-truncated": (("collab:wait:timeout-whole",), "collab:wait:timeout-maximum"),
    "strict-ignored": (("target:not-sendable:fallback",), "target:disabled:refused"),
    "oversize-closes": (("bounds:line:oversize",), "wire:ping"),
    "answers-buffered": (("wire:backpressure:bounded",), "wire:ping"),
    "hung-unbounded": (("call:app-hung:bounded",), "wire:ping"),
    "check-then-subscribe": (("wait:wake:admission-window",), "wait:wakes-on-activity"),
    "empty-wait-cancels": (("wait:empty:untouched",), "wait:empty:cancels-nothing"),
}


# Mutants whose bug shows only as a silence: the suite sees it when a bound runs out (the start-up bound, a call's,
# the hung-app bound, the flood's), so each costs its bound in waiting. They share the one path that turns a silence
# into a failure naming the request left unanswered; ``make test`` runs the cheapest of them, SILENCE_PATH, on every
# change, and ``make full`` the rest (docs/testing.md).
SILENT = {"discover-silent", "deep-silent", "odd-id-unanswered", "hung-unbounded", "answers-buffered", "stdin-held"}
SILENCE_PATH = "stdin-held"


def test_every_mutation_has_an_expectation():
    assert sorted(EXPECTED) == MUTATIONS
    assert SILENT <= set(EXPECTED) and SILENCE_PATH in SILENT


def _collab_mutant(mutation: str) -> list[str]:
    """Options that put the collab profile behind the same mutation (only where a broken requirement is collab's)."""
    broken, _ = EXPECTED[mutation]
    if not any(r.startswith("collab:") for r in broken):
        return []
    argv = [sys.executable, str(MUTANT_SERVER), mutation, "--", *REFERENCE_COLLAB_SERVER_CMD]
    return ["--collab-server-cmd", shlex.join(argv)]


def _mutation(mutation: str):
    full = mutation in SILENT and mutation != SILENCE_PATH
    return pytest.param(mutation, id=mutation, marks=(pytest.mark.full,) if full else ())


@pytest.mark.slow
@pytest.mark.parametrize("mutation", [_mutation(m) for m in sorted(EXPECTED)])
def test_mutant_fails_its_requirement(tmp_path, mutation):
    broken, control = EXPECTED[mutation]
    selected = [arg for requirement_id in (*broken, control) for arg in ("--requirement", requirement_id)]
    run = run_contract(tmp_path, *mutant_target(mutation), *_collab_mutant(mutation), *selected)
    fatal = any(manifest()[r].level is Level.MUST for r in broken)
    assert run.returncode == (1 if fatal else 0), f"exit {run.returncode}:\n{run.output[-3000:]}"
    for requirement_id in broken:
        failed = run.result(requirement_id)
        assert failed["result"] == "fail", f"{requirement_id}: {failed['result']}\n{run.output[-3000:]}"
        assert failed["failures"] and all("request" in f or f.get("detail") for f in failed["failures"])
        level = manifest()[requirement_id].level.name
        assert f"### `{requirement_id}` ({level}): fail" in run.markdown
        if level == "MUST":
            assert any(requirement_id in p for p in run.compliance["verdict"]["problems"])
    assert run.result(control)["result"] == "pass", f"{control} should pass:\n{run.output[-3000:]}"
    if mutation == "unicode":
        # "e\u0301" and "\u00e9" print alike; the report must show them apart.
        assert "U+0065 U+0301" in run.markdown and "U+00E9" in run.markdown, run.markdown[-3000:]


@pytest.mark.slow
def test_a_baselined_mutant_failure_is_expected_and_the_run_passes(tmp_path):
    baseline = tmp_path / "expected-failures.txt"
    baseline.write_text("# our server's known gaps\nreceive:limit:honoured   # limit is not implemented yet\n")
    run = run_contract(tmp_path, *mutant_target("limit-ignored"),
                       "--requirement", "receive:limit:honoured", "--baseline", str(baseline))
    assert run.returncode == 0, run.output[-3000:]
    entry = run.result("receive:limit:honoured")
    assert entry["result"] == "expected failure" and entry["baselined"] == "limit is not implemented yet"


@pytest.mark.slow
@pytest.mark.parametrize("stale", [False, True], ids=["baseline-holds", "stale-entry"])
def test_a_requirement_blocked_by_a_baselined_failure_is_left_out_of_the_exit_status(tmp_path, stale):
    # The fuzz of whole lines stops at the mutant's exit, before it judges wire:fuzz:never-internal.
    baseline = tmp_path / "expected-failures.txt"
    baseline.write_text("wire:fuzz:messages  # our transport exits on a lone surrogate\n"
                        + ("wire:ping  # used to fail\n" if stale else ""))
    run = run_contract(tmp_path, *mutant_target("surrogate-exit"), "--baseline", str(baseline),
                       *(arg for r in ("wire:fuzz:messages", "wire:fuzz:never-internal", "wire:ping")
                         for arg in ("--requirement", r)))
    assert run.returncode == (1 if stale else 0), run.output[-3000:]
    assert run.result("wire:fuzz:messages")["result"] == "expected failure"
    blocked = run.result("wire:fuzz:never-internal")
    assert blocked["result"] == "blocked by baselined prerequisites", run.output[-3000:]
    assert blocked["blocked_by"] == ["wire:fuzz:messages"]
    assert "1 blocked by baselined prerequisites" in run.output
    assert any("stale" in p and "wire:ping" in p for p in run.compliance["verdict"]["problems"]) is stale
