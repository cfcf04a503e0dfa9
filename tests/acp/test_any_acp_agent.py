"""Any ACP agent (``--acp-agent NAME=COMMAND``): checks that need what it cannot give are skipped by name.

Offline, a recorded run of two OpenCode agents (``fixtures/acp/runs/``) is
judged twice with the checks of its scenario: once as the run was (both
``opencode``: their model requests are in the run's log), once with B as
``acp:mine``, an agent on its own provider. Everything judged from the core's
records and B's ACP transcript is judged the same way; what needs B's model
requests is skipped, naming B, its kind and ``model_log``; and nothing that
was skipped counts as passed. Live (marker ``opencode``), OpenCode itself runs
as "any ACP agent": started by the user's command, with its own provider (a
scripted model the run knows nothing of), so the run's log holds none of its
requests.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from harness.acceptance.checks import SCRIPTED_ONLY, UNIVERSAL, judge
from harness.acceptance.execution import RunSettings, run_scenario
from harness.acceptance.observations import Observations, RunnerView
from harness.acceptance.scenario import SCENARIOS_DIR, load_scenario
from harness.codex.install import locate_codex
from harness.evidence.layout import ACP_DIR, EXPORT_FILE
from harness.model.rules import load_script
from harness.model.server import ScriptedModel
from peerwire.acp.opencode import prepare_home
from tests.acp.lab import opencode_or_skip
from tests.acp.recorded_runs import RUNS_DIR
from tests.patience import TEST_S

SMOKE = RUNS_DIR / "smoke.opencode-opencode"


def view_of(run: Path, kinds: dict[str, str]) -> RunnerView:
    """What the runner saw of a recorded run: who is who, each agent's session, its first prompt as turn 1."""
    export = json.loads((run / EXPORT_FILE).read_text("utf-8"))
    view = RunnerView(agents={row["name"]: row["agent_id"] for row in export["agents"]}, kinds=dict(kinds))
    for name in kinds:
        lines = [json.loads(line)["message"] for line in (run / ACP_DIR / f"{name}.g1.acp.jsonl").read_text(
            "utf-8").splitlines()]
        prompt = next(m for m in lines if m.get("method") == "session/prompt")
        view.turns[f"{name}1"] = {"agent": name, "turn_id": prompt["params"]["messageId"], "status": "completed"}
        view.attachments.append({"agent": name, "generation": 1, "thread_id": prompt["params"]["sessionId"],
                                 "pid": 0, "resume": False})
    return view


def verdicts(run: Path, scenario: str, kinds: dict[str, str]) -> dict[str, object]:
    loaded = load_scenario(SCENARIOS_DIR / f"{scenario}.toml")
    observations = Observations.load(run, view_of(run, kinds))
    specs = [*loaded.checks, *UNIVERSAL, *SCRIPTED_ONLY]
    return {spec.id: judge(spec, observations) for spec in specs}


def test_the_recorded_run_passes_as_it_ran_with_the_one_skip_opencode_declares():
    judged = verdicts(SMOKE, "smoke", {"A": "opencode", "B": "opencode"})
    failed = {vid: v.summary for vid, v in judged.items() if v.failed}
    assert not failed, failed
    skipped = {vid: v.skipped for vid, v in judged.items() if v.skipped}
    assert skipped == {"receipt-binds-the-call": {"agent": "A", "kind": "opencode", "capability": "call_meta"}}
    # Without inject, idle B got the information in its next prompt, and the check says so.
    assert "in its next prompt" in judged["injected-without-a-turn"].summary
    assert "(next prompt)" in judged["received-exactly"].summary or "receive_messages" in \
        judged["received-exactly"].summary


def test_checks_needing_a_missing_trace_are_skipped_by_name():
    judged = verdicts(SMOKE, "smoke", {"A": "opencode", "B": "acp:mine"})
    skipped = {vid: v.skipped for vid, v in judged.items() if v.skipped}
    assert skipped == {"receipt-binds-the-call": {"agent": "A", "kind": "opencode", "capability": "call_meta"},
                       "in-b-model-input": {"agent": "B", "kind": "acp:mine", "capability": "model_log"}}
    assert judged["in-b-model-input"].summary.startswith("skipped: B is acp:mine, which lacks model_log: it talks "
                                                         "to its own, real provider")
    assert not any(v.passed for v in judged.values() if v.skipped)
    # What B's ACP transcript and the core's records show is judged for any ACP agent alike.
    for vid in ("injected-without-a-turn", "received-exactly", "delivered-at-most-once", "turns-accounted-for"):
        assert judged[vid].passed, (vid, judged[vid].summary)
    # The universal check over the log says whose requests it could not judge.
    assert judged["model-requests-matched-rules"].passed
    assert "not judged: the requests of B (acp:mine)" in judged["model-requests-matched-rules"].summary


def test_a_recorded_run_that_is_tampered_with_fails_the_check_it_breaks(tmp_path):
    """The ACP paths are judged, not waved through: the same run, with B working outside every prompt (an
    agent message no prompt asked for) and the information's prompt gone, fails those checks."""
    run = tmp_path / "run"
    import shutil
    shutil.copytree(SMOKE, run)
    path = run / ACP_DIR / "B.g1.acp.jsonl"
    lines = path.read_text("utf-8").splitlines()
    session = next(json.loads(line)["message"]["params"]["sessionId"] for line in lines
                   if json.loads(line)["message"].get("method") == "session/prompt")
    stray = {"seq": 0, "mono": 0, "wall": 0, "dir": "received", "message": {"jsonrpc": "2.0", "method": "session/update",
             "params": {"sessionId": session, "update": {"sessionUpdate": "agent_message_chunk", "messageId": "msg_x",
                                                         "content": {"type": "text", "text": "unasked"}}}}}
    path.write_text("\n".join([json.dumps(stray), *lines]) + "\n", "utf-8")
    judged = verdicts(run, "smoke", {"A": "opencode", "B": "opencode"})
    assert judged["turns-accounted-for"].failed and "worked outside every prompt" in judged["turns-accounted-for"].summary
    # A prompt that carried the information but names another turn than the evidence row: the next-turn path breaks.
    kept = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    for entry in kept:
        if entry["message"].get("method") == "session/prompt":
            entry["message"]["params"]["messageId"] = "not-the-bound-prompt"
    path.write_text("\n".join(json.dumps(e) for e in kept) + "\n", "utf-8")
    judged = verdicts(run, "smoke", {"A": "opencode", "B": "opencode"})
    assert judged["injected-without-a-turn"].failed, judged["injected-without-a-turn"].summary


# -- live: OpenCode run as any ACP agent -------------------------------------------------------------------------


def own_provider_command(root: Path, model: ScriptedModel, opencode: Path) -> list[str]:
    """A user's ACP agent: a script that starts OpenCode in a home of its own, on a provider of its own (here a
    scripted model only the test knows), whatever environment it inherits."""
    home = prepare_home(root / "mine", base_url=model.base_url("B"))
    subprocess.run(["git", "init", "-q", str(home.workspace)], check=True)
    lines = ["#!/bin/sh"]
    for name, value in sorted(home.env.items()):
        lines.append(f"unset {name}" if value is None else f"export {name}='{value}'")
    lines.append(f"exec '{opencode}' acp")
    script = root / "my-acp-agent"
    script.write_text("\n".join(lines) + "\n", "utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return [str(script)]


@pytest.mark.opencode
@pytest.mark.codex
@pytest.mark.timeout(TEST_S)
def test_opencode_as_any_acp_agent_runs_smoke_with_its_model_checks_skipped_by_name(tmp_path: Path):
    opencode = opencode_or_skip()
    smoke = load_scenario(SCENARIOS_DIR / "smoke.toml")
    # B's provider: the same rules, served by a model the run does not start and does not log.
    provider = ScriptedModel(load_script(SCENARIOS_DIR / "smoke.toml"), log_path=tmp_path / "providers-own.jsonl").start()
    try:
        settings = RunSettings(codex=locate_codex(), homes_root=tmp_path / "homes", artifacts_root=tmp_path / "artifacts",
                               acp_agents={"mine": tuple(own_provider_command(tmp_path, provider, opencode))})
        result = run_scenario(replace(smoke, pair=("codex", "acp:mine")), "attached", settings)
    finally:
        provider.stop()
    checks = {c["id"]: c for c in result["checks"]}
    assert result["passed"], {k: c["summary"] for k, c in checks.items() if c["verdict"] == "fail"}
    assert result["pair"] == "codex,acp:mine" and result["agents"]["B"]["kind"] == "acp:mine"
    assert checks["in-b-model-input"]["verdict"] == "skip"
    assert checks["in-b-model-input"]["skipped"] == {"agent": "B", "kind": "acp:mine", "capability": "model_log"}
    # B's requests went to its own provider alone; the run's log holds only A's.
    log = (tmp_path / "artifacts" / "smoke.attached.codex-acp_mine" / "model-requests.jsonl").read_text("utf-8")
    assert '"agent": "B"' not in log and '"agent": "A"' in log
    assert '"agent": "B"' in (tmp_path / "providers-own.jsonl").read_text("utf-8")
    assert os.listdir(tmp_path / "artifacts" / "smoke.attached.codex-acp_mine" / "acp")
