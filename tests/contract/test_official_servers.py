"""The protocol profile against official MCP servers nobody here wrote, with their expected verdicts.

``@modelcontextprotocol/server-everything`` (the TypeScript SDK's reference
server, pinned in ``package.json``) and ``mcp-server-time`` (the Python SDK's,
pinned in the ``test`` extra) run through ``runner.py contract`` with no
provisioner, as any stranger's server would, with consent for one harmless
call each. Every verdict is expected: a change in either direction fails here,
so a suite change that starts blaming these servers for something JSON-RPC 2.0
or MCP does not say, or stops seeing what they do break, is caught. Each
failure must cite its rule: a JSON-RPC 2.0 or MCP MUST, with the spec's
sentence. ``docs/contract-suite.md`` says what the profile finds in them.

The same server behind a 12 s start-up delay gets the same verdicts: start-up
is bounded on its own and never counted against a call.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from harness.contract.manifest import PROTOCOL, manifest

from .conftest import run_contract

PROJECT_ROOT = Path(__file__).resolve().parents[2]
EVERYTHING = PROJECT_ROOT / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
TIME_SERVER = Path(sys.executable).parent / "mcp-server-time"

# What JSON-RPC 2.0 and MCP hold both official SDKs' servers to, and where they fall short:
# lines that are not JSON and values that are not Request objects go unanswered (JSON-RPC 2.0 § 5 MUST reply,
# with id null); so do requests whose params the SDK's schema refuses, hostile requests (a NaN or 3000 levels of
# nesting), and a batch after negotiating 2025-03-26, the one revision that MUST receive batches.
FAILING_IN_BOTH = {"wire:json:parse-error", "wire:request:invalid", "wire:request:answered",
                   "wire:hostile:answered", "wire:batch:2025-03-26", "wire:fuzz:messages"}
EXPECTED_FAILURES = {
    "server-everything": FAILING_IN_BOTH | {"wire:response:exactly-one"},  # the id 2^53 goes unanswered
    "mcp-server-time": FAILING_IN_BOTH,
}
SERVERS = {
    "server-everything": (["node", str(EVERYTHING), "stdio"], 'echo {"message": "hello from the contract suite"}'),
    "mcp-server-time": ([str(TIME_SERVER)], 'get_current_time {"timezone": "UTC"}'),
}
QUICK = {"PEERWIRE_FUZZ_EXAMPLES": "0.25"}


def _protocol_run(tmp_path: Path, name: str, *args: str, wrapper: list[str] | None = None):
    argv, consent = SERVERS[name]
    assert Path(argv[-1] if name == "mcp-server-time" else argv[1]).exists(), \
        f"{name} is not installed: run `make setup` (npm ci, and the test extra)"
    command = shlex.join([*(wrapper or []), *argv])
    return run_contract(tmp_path, "--server-cmd", command, "--tool-call", consent, "--call-timeout", "10", *args,
                        env=QUICK)


def _verdicts(run) -> dict[str, str]:
    return {r["id"]: r["result"] for r in run.compliance["requirements"] if r["profile"] == PROTOCOL}


# make test runs the profile against the TypeScript SDK's server; the Python SDK's server runs there behind the
# slow start below, and its whole profile in make full (docs/testing.md).
@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param(name, marks=(pytest.mark.full,) if name == "mcp-server-time" else ())
                                  for name in sorted(SERVERS)])
def test_the_protocol_profile_finds_what_the_specs_say_and_nothing_more(tmp_path, name):
    run = _protocol_run(tmp_path, name, "-n", "2")
    assert run.compliance["target"]["provisioner"] is None
    assert run.compliance["selection"]["profiles"] == [PROTOCOL], "no provisioner: the protocol profile alone"
    verdicts = _verdicts(run)
    expected = {rid: "fail" if rid in EXPECTED_FAILURES[name] else "pass"
                for rid in (r.id for r in manifest() if r.profile == PROTOCOL)}
    assert verdicts == expected, {rid: (verdicts.get(rid), want) for rid, want in expected.items()
                                  if verdicts.get(rid) != want}
    assert run.returncode == 1, run.output[-2000:]
    for entry in run.compliance["requirements"]:
        if entry["result"] != "fail":
            continue
        # No false positive: every failure is a MUST of JSON-RPC 2.0 or of MCP, citing the spec's sentence.
        assert entry["level"] == "MUST" and entry["origin"] in ("JSON-RPC 2.0", "MCP"), entry["id"]
        assert entry["quote"] in entry["citation"] and entry["keyword"] in entry["quote"], entry
        assert f"Rule: {entry['citation']}" in run.markdown
        assert all(f.get("detail") for f in entry["failures"]), entry["failures"]
    sources = run.compliance["sources"]
    assert sources["MCP 2025-11-25"]["conformant"] and not sources["JSON-RPC 2.0"]["conformant"], sources
    assert "messaging contract" not in sources, "no rule of the contract's is held against a stranger's server"
    assert run.compliance["startup"]["servers"] > 0


@pytest.mark.slow
def test_a_slow_start_changes_no_verdict(tmp_path):
    """mcp-server-time behind a wrapper that sleeps 12 s before it execs the server: start-up is its own bound,
    so a short selection (one pass, one fail, one capability check) gets the very verdicts of a quick start."""
    selection = ["wire:ping", "wire:json:parse-error", "wire:capabilities:tools"]
    wrapper = ["sh", "-c", 'sleep 12 && exec "$0" "$@"']
    args = [arg for rid in selection for arg in ("--requirement", rid)]
    slow = _protocol_run(tmp_path, "mcp-server-time", *args, "-n", "3", wrapper=wrapper)
    verdicts = {rid: v for rid, v in _verdicts(slow).items() if rid in selection}
    assert verdicts == {rid: "fail" if rid in EXPECTED_FAILURES["mcp-server-time"] else "pass"
                        for rid in selection}, slow.output[-3000:]
    startup = slow.compliance["startup"]
    assert startup["servers"] >= 3 and startup["median_ms"] >= 12_000, startup
