"""One scenario's section of a report, built from the runner's result and its artifacts.

The artifacts folder of a scenario holds ``core-export.json`` (the core's evidence export),
``model-requests.jsonl`` (the scripted model's log), ``appserver/*.jsonl`` (the
adapter's app-server transcripts) and ``rollouts/<agent>/*.jsonl``. Every file is
optional: what is missing is listed under ``problems`` and the rest is still
reported. Rollout locations are ``rollouts/<agent>/<file>:<line>``, relative to the
scenario's artifacts folder, the form checks cite them in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.evidence.binding import bind_records
from harness.evidence.core import EXPORT_FILE, CoreEvidence, ExportError, violations
from harness.evidence.rollouts import RolloutIndex
from harness.model.log import ModelRequestLog
from harness.model.probe import STATEMENT as PROBE_STATEMENT

from .sequence import SequenceDiagram

MODEL_LOG = "model-requests.jsonl"
ROLLOUTS = "rollouts"
APPSERVER = "appserver"


def measure(text: str | None) -> dict[str, int]:
    """Character (code point) and word (whitespace-separated) counts. Not tokens."""
    text = text or ""
    return {"characters": len(text), "words": len(text.split())}


@dataclass
class ScenarioArtifacts:
    """The evidence files of one scenario, loaded."""

    root: Path
    core: CoreEvidence | None
    """The core's evidence export; ``None`` when it is missing or unreadable (see ``problems``)."""
    index: RolloutIndex
    model_log: ModelRequestLog
    thread_agents: dict[str, str]
    problems: list[str]

    @classmethod
    def load(cls, root: Path) -> "ScenarioArtifacts":
        """Load from ``root``; missing or unreadable files become ``problems``."""
        problems: list[str] = []
        core: CoreEvidence | None = None
        try:
            core = CoreEvidence.load(root / EXPORT_FILE, strict=False)
        except FileNotFoundError:
            problems.append(f"{EXPORT_FILE}: missing")
        except (ExportError, KeyError, TypeError) as exc:
            problems.append(f"{EXPORT_FILE}: unreadable ({exc})")
        if core is not None:
            problems.extend(f"{EXPORT_FILE}: {problem}" for problem in violations(core.document))
        rollout_files = sorted((root / ROLLOUTS).rglob("*.jsonl")) if (root / ROLLOUTS).is_dir() else []
        if not rollout_files:
            problems.append(f"{ROLLOUTS}/: no rollout files")
        index = RolloutIndex.load(rollout_files, root=root)
        problems.extend(index.problems)
        thread_agents: dict[str, str] = {}
        for thread in index.threads.values():
            # rollouts/<agent>/...: the folder names the agent whose Codex home held the file
            owners = {Path(f).parts[1] for f in thread.files if len(Path(f).parts) > 2}
            if len(owners) == 1:
                thread_agents[thread.thread_id] = owners.pop()
            else:
                problems.append(f"thread {thread.thread_id} is in the rollouts of {sorted(owners)}")
        model_log = ModelRequestLog.load(root / MODEL_LOG)
        problems.extend(model_log.problems)
        return cls(root, core, index, model_log, thread_agents, problems)


def scenario_section(scenario: Mapping[str, Any], artifacts: ScenarioArtifacts, *, artifacts_dir: str,
                     codex_version: str | None) -> dict[str, Any]:
    """The report section of one scenario (see ``contracts/report.schema.json``)."""
    loaded = artifacts
    agents_in = dict(scenario.get("agents") or {})
    thread_agents = dict(loaded.thread_agents)
    for name, agent in agents_in.items():
        # The runner knows each thread's agent; a rollout's folder only names the Codex home
        # that held it (a collaboration child's thread lies in its root's).
        for thread_id in agent.get("thread_ids") or []:
            thread_agents[thread_id] = name
    problems = list(loaded.problems)
    bindings = bind_records(loaded.core, loaded.index, thread_agents=thread_agents) if loaded.core else []
    order = list(agents_in) or loaded.model_log.agents()
    diagram = SequenceDiagram.build(loaded.core, agents=order, index=loaded.index, thread_agents=thread_agents)
    agents = _agents(agents_in, loaded, thread_agents, codex_version, problems)
    checks = [_check(check, loaded) for check in scenario.get("checks") or []]
    section = {
        "name": scenario["name"],
        "mode": scenario.get("mode"),
        "description": scenario.get("description"),
        "passed": bool(scenario.get("passed")),
        "wall_s": scenario.get("wall_s"),
        "phases": list(scenario.get("phases") or []),
        "artifacts_dir": artifacts_dir,
        "agents": agents,
        "inputs": _texts((scenario.get("inputs") or {}).get("prompts") or {}, loaded, thread_agents,
                         roles=("user",)),
        "outputs": _texts(scenario.get("outputs") or {}, loaded, thread_agents, roles=("assistant",)),
        "final_messages": _final_messages(loaded, thread_agents),
        "tool_schemas": [seen.to_json() for seen in loaded.model_log.tool_schemas()],
        "requests_without_peerwire_tools": loaded.model_log.requests_without(),
        "records": _records(loaded.core),
        "checks": checks,
        "bindings": [b.to_json() for b in bindings],
        "binding_summary": {"bound": sum(b.bound for b in bindings), "unbound": sum(not b.bound for b in bindings)},
        "model_requests": loaded.model_log.summary(),
        "sequence": diagram.to_json(),
        "sequence_diagram": diagram.mermaid(),
        "problems": problems,
    }
    if scenario.get("probe") is not None:
        section["probe"] = {**scenario["probe"], "statement": PROBE_STATEMENT}
    return section


def _agents(agents_in: Mapping[str, Any], loaded: ScenarioArtifacts, thread_agents: Mapping[str, str],
            codex_version: str | None, problems: list[str]) -> dict[str, Any]:
    names = list(dict.fromkeys([*agents_in, *thread_agents.values()]))
    out: dict[str, Any] = {}
    for name in names:
        given = agents_in.get(name) or {}
        threads = [t for t, owner in thread_agents.items() if owner == name]
        turns = [turn for thread in threads for turn in loaded.index.thread_turns(thread)
                 if turn.status != "context_only"]
        versions = sorted({v for t in threads if t in loaded.index.threads
                           and (v := loaded.index.threads[t].cli_version)})
        if codex_version and versions and versions != [codex_version]:
            problems.append(f"{name}: rollouts were written by Codex {versions}, the run reports {codex_version}")
        out[name] = {
            "agent_id": given.get("agent_id"),
            "thread_ids": list(dict.fromkeys([*(given.get("thread_ids") or []), *threads])),
            "generations": list(given.get("generations") or []),
            "codex_versions": versions,
            "models": sorted({t.model for t in turns}),
            "efforts": sorted({t.effort for t in turns}),
            "requested": loaded.model_log.reasoning(name),
            "turns": [{"thread_id": t.thread_id, "turn_id": t.turn_id, "model": t.model, "effort": t.effort,
                       "status": t.status, "trigger": t.trigger, "started": _loc(t.started),
                       "ended": _loc(t.ended)} for t in turns],
        }
    return out


def _texts(by_agent: Mapping[str, Any], loaded: ScenarioArtifacts, thread_agents: Mapping[str, str], *,
           roles: tuple[str, ...]) -> list[dict[str, Any]]:
    out = []
    for agent, texts in by_agent.items():
        threads = [t for t, owner in thread_agents.items() if owner == agent]
        for number, text in enumerate(texts if isinstance(texts, list) else [texts]):
            found = [str(m.at) for m in loaded.index.messages
                     if m.thread_id in threads and m.role in roles and text and m.text == text]
            out.append({"agent": agent, "index": number, "text": text, **measure(text), "rollout": found})
    return out


def _final_messages(loaded: ScenarioArtifacts, thread_agents: Mapping[str, str]) -> list[dict[str, Any]]:
    out = []
    for turn, text in loaded.index.final_messages():
        out.append({"agent": thread_agents.get(turn.thread_id), "thread_id": turn.thread_id, "turn_id": turn.turn_id,
                    "status": turn.status, "text": text, **measure(text), "rollout": _loc(turn.ended)})
    return out


def _records(core: CoreEvidence | None) -> list[dict[str, Any]]:
    out = []
    for row in core.records if core else []:
        receipt = row.get("tool_receipt") or {}
        out.append({"interaction_id": row["record_id"], "kind": row["kind"], "state": row.get("state"),
                    "sender": row["sender"]["name"], "recipient": row["recipient"]["name"],
                    "request_id": row.get("request_id"), "status": row.get("status"),
                    "code": row.get("code"), "call_id": receipt.get("call_id"),
                    "created_at": row.get("created_at"), "body": row.get("body") or "", **measure(row.get("body"))})
    return out


def _check(check: Mapping[str, Any], loaded: ScenarioArtifacts) -> dict[str, Any]:
    evidence = dict(check.get("evidence") or {})
    return {"id": check["id"], "verdict": check["verdict"], "summary": check.get("summary", ""),
            "evidence": {k: list(v) for k, v in evidence.items()},
            "evidence_problems": _evidence_problems(evidence, loaded)}


def _evidence_problems(evidence: Mapping[str, Any], loaded: ScenarioArtifacts) -> list[str]:
    """Cited evidence that the artifacts do not contain: a check must point at real lines."""
    problems = []
    record_ids = {r["record_id"] for r in loaded.core.records} if loaded.core else set()
    request_ids = {r["request_id"] for r in loaded.core.requests} if loaded.core else set()
    for record in evidence.get("records") or []:
        if record not in record_ids and record not in request_ids:
            problems.append(f"record {record} is not in {EXPORT_FILE}")
    seqs = {r.seq for r in loaded.model_log.requests}
    for seq in evidence.get("model_requests") or []:
        if seq not in seqs:
            problems.append(f"model request {seq} is not in {MODEL_LOG}")
    for key in ("rollout", "appserver"):
        for ref in evidence.get(key) or []:
            problem = _line_problem(loaded.root, str(ref))
            if problem:
                problems.append(problem)
    return problems


def _line_problem(root: Path, ref: str) -> str | None:
    path, sep, line = ref.rpartition(":")
    if not sep or not line.isdigit():
        return f"{ref}: not <file>:<line>"
    target = (root / path).resolve()
    if root.resolve() not in target.parents or not target.is_file():
        return f"{ref}: no such artifact"
    with target.open("rb") as handle:
        count = sum(1 for _ in handle)
    if not 1 <= int(line) <= count:
        return f"{ref}: the file has {count} lines"
    return None


def _loc(at: Any) -> str | None:
    return str(at) if at is not None else None
