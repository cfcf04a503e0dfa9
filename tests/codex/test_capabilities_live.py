"""Capabilities of real Codex releases: detection, the live probe, and the adapter's gate.

Two real Codex CLIs: the pinned one, and an older release from npm
(``older_codex``, installed into the release cache on first use) that has no
``thread/inject_items``. A capability a version lacks must never be attempted:
the app-server transcripts are the evidence.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.acceptance.run import main as run_acceptance
from harness.codex.capability_probe import REPORT_NAME, CapabilityReport, establish
from harness.codex.install import locate_codex
from harness.lab.reference import ReferenceLab
from harness.lab.recorded import routes
from peerwire.codex.capabilities import DECLARATIONS, Capability
from peerwire.errors import Code, PeerwireError
from tests.conftest import OLDER_RELEASE
from tests.patience import WAIT_S

pytestmark = pytest.mark.codex


def sent_methods(transcript: Path) -> list[str]:
    lines = [json.loads(line) for line in transcript.read_text(encoding="utf-8").splitlines()]
    return [line["message"].get("method") for line in lines if line["dir"] == "sent" and "message" in line]


def test_the_pinned_codex_proves_every_declared_capability(tmp_path: Path) -> None:
    report = establish(locate_codex(), tmp_path / "evidence")

    assert set(report.enabled()) == {c for c, d in DECLARATIONS.items() if d.since is not None}
    assert report.checks and all(check.passed for check in report.checks), report.checks
    assert {check.capability for check in report.checks} >= set(report.enabled())
    # The pinned schema has no field to carry routing metadata apart from the text of a steer.
    assert report.why_not(Capability.STEER_CONTEXT) == "the app-server schema lacks turn/steer params.additionalContext"
    assert report.tool_surface == "namespace mcp__peerwire"  # what the scripted scenarios' tool calls address
    saved = CapabilityReport.from_json(json.loads((tmp_path / "evidence" / REPORT_NAME).read_text()))
    assert saved.to_json() == report.to_json()
    methods = sent_methods(tmp_path / "evidence" / "probe.g1.appserver.jsonl")
    assert {"initialize", "thread/start", "thread/inject_items", "turn/start", "turn/steer", "turn/interrupt",
            "thread/read", "thread/fork"} <= set(methods)
    assert sent_methods(tmp_path / "evidence" / "probe.g2.appserver.jsonl")[-1] == "thread/resume"


def test_an_older_release_lacking_inject_never_attempts_it(older_codex, tmp_path: Path) -> None:
    report = establish(older_codex, tmp_path / "evidence")

    assert report.version == OLDER_RELEASE
    assert Capability.INJECT not in report.enabled()
    assert "thread/inject_items" in (report.why_not(Capability.INJECT) or "")
    assert {Capability.IDLE_START, Capability.STEER, Capability.INTERRUPT, Capability.RESUME} <= set(report.enabled())
    assert not [check for check in report.checks if check.capability == Capability.INJECT]
    assert report.tool_surface == "functions mcp__peerwire__*"  # MCP tools were flat functions then
    assert all(check.passed for check in report.checks), report.checks
    assert "thread/inject_items" not in sent_methods(tmp_path / "evidence" / "probe.g1.appserver.jsonl")


def agent_row(lab: ReferenceLab, name: str) -> dict:
    return next(a for a in lab.control().call("agents")["agents"] if a["name"] == name)


def test_the_adapter_gives_an_older_release_only_what_it_supports(older_codex, tmp_path: Path) -> None:
    script = routes.model_script()
    with ReferenceLab(tmp_path, script, agents=("A", "B"), codex=older_codex, attach=False) as lab:
        owner = lab.attach("B")
        assert owner["codex_version"] == OLDER_RELEASE and "inject" not in owner["capabilities"]
        receipt = lab.as_agent("A").call("send_message", {"target": "B", "message": "FYI ✓"})
        lab.await_core(lambda: "does not support inject" in (agent_row(lab, "B")["last_error"] or ""), WAIT_S,
                       "the refusal to inject")
        # What it supports still works: a task starts a turn and its final answer is the reply.
        out = routes.idle_start(lab)
        assert out["reply"]["body"] == "Answer: 42 — “quoted”\nsecond line"
        # The information was never sent to Codex, and is still B's to receive.
        assert lab.trace(receipt["interaction_id"])["interactions"][0]["state"] == "admitted"
        assert "thread/inject_items" not in sent_methods(lab.transcript("B"))
        page = lab.as_agent("B").call("receive_messages", {})
        assert [r["body"] for r in page["records"] if r["record_id"] == receipt["interaction_id"]] == ["FYI ✓"]


def test_capabilities_not_enabled_by_the_probe_are_refused_as_unsupported(tmp_path: Path) -> None:
    script = routes.model_script()
    with ReferenceLab(tmp_path, script, agents=("A", "B"), attach=False, capabilities=["idle_start"]) as lab:
        owner = lab.attach("B")
        assert owner["capabilities"] == ["idle_start"]
        held = lab.as_agent("A").call("followup_task", {"target": "B", "message": "[hold] keep me busy"})
        turn_id = routes.await_active(lab, "B")
        with pytest.raises(PeerwireError) as refused:
            lab.as_agent("A").call("interrupt_agent", {"target": "B"})
        assert refused.value.code == Code.UNSUPPORTED
        assert "interrupt" in refused.value.message and "not enabled" in refused.value.message
        # A second task while B is busy is not steered: it waits for the turn to end, then starts its own.
        second = lab.as_agent("A").call("followup_task", {"target": "B", "message": "[idle] after the held one"})
        lab.await_core(lambda: "does not support steer" in (agent_row(lab, "B")["last_error"] or ""), WAIT_S,
                       "the refusal to steer")
        lab.model.release("busy")
        routes.await_reply(lab, held["request_id"])
        routes.await_reply(lab, second["request_id"])
        methods = sent_methods(lab.transcript("B"))
        assert "turn/steer" not in methods and "turn/interrupt" not in methods
        bindings = lab.trace(second["request_id"])["bindings"]
        assert len(bindings) == 1 and bindings[0]["turn_id"] != turn_id


@pytest.mark.heavy
def test_the_runner_skips_a_scenario_naming_the_capability_the_codex_lacks(older_codex, tmp_path: Path,
                                                                            capsys) -> None:
    import io

    err = io.StringIO()
    status = run_acceptance(["--scenario", "smoke", "--codex", str(older_codex.executable),
                             "--expected-version", OLDER_RELEASE, "--runs-root", str(tmp_path / "runs"),
                             "--report-dir", str(tmp_path / "reports")], stderr=err)
    output = err.getvalue()
    assert status == 2, output
    assert "skipped smoke.attached: needs capability inject (the app-server schema lacks thread/inject_items)" \
        in output
    assert f"Codex {OLDER_RELEASE} capabilities: idle_start ✓" in output
    kept = list((tmp_path / "runs").glob("*/artifacts/capabilities/" + REPORT_NAME))
    assert len(kept) == 1, "the probe's evidence is kept"


@pytest.mark.heavy
def test_the_run_report_names_the_capabilities_and_keeps_the_probe_evidence(tmp_path: Path) -> None:
    import io

    err = io.StringIO()
    status = run_acceptance(["--scenario", "negative", "--runs-root", str(tmp_path / "runs"),
                             "--report-dir", str(tmp_path / "reports")], stderr=err)
    assert status == 0, err.getvalue()
    (folder,) = (tmp_path / "reports").iterdir()
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    capabilities = report["run"]["codex_capabilities"]
    assert set(capabilities["enabled"]) == {c.value for c, d in DECLARATIONS.items() if d.since is not None}
    assert capabilities["not_enabled"] == {
        "steer_context": "the app-server schema lacks turn/steer params.additionalContext",
        "encrypted_call_args": DECLARATIONS[Capability.ENCRYPTED_CALL_ARGS].unknown}
    listed = {artifact["path"] for artifact in report["artifacts"]}
    # kept whole, stored compressed like all text evidence of a report
    assert {"artifacts/capabilities/capabilities.json.gz", "artifacts/capabilities/probe.g1.appserver.jsonl.gz"} <= listed
    assert "Codex capabilities (live probe, artifacts/capabilities/): idle_start, steer, inject" in \
        (folder / "report.md").read_text(encoding="utf-8")
