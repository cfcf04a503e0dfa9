"""A report of a real smoke exchange: the real pinned Codex, the scripted model, the reference core."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import pytest

from harness.lab.reference import ReferenceLab
from harness.evidence import stored
from harness.report import SecretScan, load_report, write_report

pytestmark = pytest.mark.codex

SMOKE = Path(__file__).resolve().parents[2] / "scenarios" / "smoke.toml"


def stage(lab: ReferenceLab, dest: Path) -> None:
    """The scenario artifacts layout the runner produces (core export, model log, transcripts, rollouts)."""
    dest.mkdir(parents=True)
    (dest / "core-export.json").write_text(json.dumps(lab.export(), ensure_ascii=False), encoding="utf-8")
    shutil.copy(lab.root / "artifacts" / "model-requests.jsonl", dest)
    shutil.copy(lab.root / "artifacts" / "model-requests.bodies.jsonl", dest)  # its stored bodies
    (dest / "appserver").mkdir()
    for name in lab.agents:
        shutil.copy(lab.transcript(name), dest / "appserver")
        (dest / "rollouts" / name).mkdir(parents=True)
        for rollout in lab.rollouts(name):
            shutil.copy(rollout, dest / "rollouts" / name)


def test_a_smoke_exchange_is_reported_with_bound_evidence_and_no_session_token(tmp_path):
    prompts = tomllib.loads(SMOKE.read_text(encoding="utf-8"))["prompts"]
    with ReferenceLab(tmp_path / "lab", SMOKE) as lab:
        turns = {}
        for name in ("A", "B"):
            turns[name] = lab.prompt(name, prompts[name][0])
            assert lab.await_turn(name, turns[name])["status"] == "completed"
        tokens = {f"peerwire session token of {n}": a.token for n, a in lab.agents.items()}
        agents = {n: {"agent_id": a.agent_id, "thread_ids": [a.owner["thread_id"]], "generations": [a.owner["generation"]]}
                  for n, a in lab.agents.items()}
    artifacts = tmp_path / "artifacts"
    stage(lab, artifacts / "smoke")
    # A token that leaked into an artifact must be caught: plant one where a log could carry it.
    with (artifacts / "smoke" / "appserver" / "A.g1.appserver.jsonl").open("a", encoding="utf-8") as log:
        log.write(json.dumps({"leak": tokens["peerwire session token of A"]}) + "\n")
    run = {"run_id": "live-smoke", "started_at": None, "finished_at": None, "codex_version": lab.codex.version,
           "provider": "scripted",
           "scenarios": [{"name": "smoke", "mode": "attached", "description": "live", "passed": True, "wall_s": None,
                          "phases": [], "agents": agents, "inputs": {"prompts": prompts}, "outputs": {},
                          "checks": [], "artifacts_dir": "smoke/"}]}
    folder = write_report(tmp_path / "reports", run, artifacts, secrets=SecretScan.collect({}, extra=tokens))
    report = load_report(folder)
    (scenario,) = report["scenarios"]
    (info,) = scenario["bindings"]
    assert info["kind"] == "information" and info["source"] == "tool_call" and info["unbound"] is None
    assert (info["agent"], info["turn_id"]) == ("A", turns["A"])
    assert info["call"].startswith("rollouts/A/rollout-") and info["output"].startswith("rollouts/A/rollout-")
    call_file, call_line = info["call"].rsplit(":", 1)
    call = json.loads(stored.read_bytes(folder / scenario["artifacts_dir"] / call_file).decode().splitlines()[
        int(call_line) - 1])
    assert call["payload"]["type"] == "function_call" and call["payload"]["call_id"] == info["call_id"]
    assert info["delivered"] and all(d.startswith("rollouts/B/") for d in info["delivered"])
    assert scenario["agents"]["A"]["codex_versions"] == [lab.codex.version]
    assert scenario["agents"]["A"]["efforts"] == ["low"]  # the projection configures low effort
    assert {s["agent"] for s in scenario["tool_schemas"]} == {"A", "B"}
    assert all("send_message" in s["tool_names"] for s in scenario["tool_schemas"])
    assert [i["rollout"] != [] for i in scenario["inputs"]] == [True, True]
    assert "send_message to B" in scenario["sequence_diagram"]
    everything = b"".join(stored.read_bytes(p) for p in folder.rglob("*") if p.is_file())
    assert not any(token.encode() in everything for token in tokens.values())
    assert {(f["name"], f["location"]) for f in report["secret_scan"]["findings"]} == {
        ("peerwire session token of A", "artifacts/smoke/appserver/A.g1.appserver.jsonl")}
