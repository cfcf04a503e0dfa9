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
from typing import Any

from harness.evidence.binding import bind_records
from harness.evidence.core import CoreEvidence
from harness.evidence.delivery_paths import delivery
from harness.evidence.layout import EXPORT_FILE, MODEL_REQUESTS
from harness.evidence.scenario import ScenarioEvidence
from harness.model.probe import STATEMENT as PROBE_STATEMENT

from .excerpts import ArtifactLines
from harness.evidence.identity import RunIdentity
from .sequence import SequenceDiagram
from .transcript import transcripts



def measure(text: str | None) -> dict[str, int]:
    """Character (code point) and word (whitespace-separated) counts. Not tokens."""
    text = text or ""
    return {"characters": len(text), "words": len(text.split())}


def scenario_section(scenario: Mapping[str, Any], artifacts: ScenarioEvidence, *, artifacts_dir: str,
                     codex_version: str | None, provider: Any = None) -> dict[str, Any]:
    """The report section of one scenario run (see ``contracts/report.schema.json``).

    ``provider`` is the run's, for a scenario entry that names none.
    """
    loaded = artifacts
    identity = RunIdentity.of(scenario, provider=provider)
    agents_in = dict(scenario.get("agents") or {})
    thread_agents = dict(loaded.thread_agents)
    for name, agent in agents_in.items():
        # The runner knows each thread's agent; a rollout's folder only names the Codex home
        # that held it (a collaboration child's thread lies in its root's).
        for thread_id in agent.get("thread_ids") or []:
            thread_agents[thread_id] = name
    problems = list(loaded.problems)
    bindings = bind_records(loaded.core, loaded.rollouts, thread_agents=thread_agents) if loaded.core else []
    order = list(agents_in) or loaded.model_log.agents()
    diagram = SequenceDiagram.build(loaded.core, agents=order, index=loaded.rollouts, thread_agents=thread_agents)
    agents = _agents(agents_in, loaded, thread_agents, codex_version, problems)
    lines = ArtifactLines(loaded.root)
    checks = [_check(check, loaded, lines) for check in scenario.get("checks") or []]
    runner_calls = list(scenario.get("runner_tool_calls") or [])
    section = {
        "name": scenario["name"],
        "identity": identity.to_json(),
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
        "final_messages": _final_messages(loaded, thread_agents) + _acp_finals(loaded, agents),
        "tool_schemas": [seen.to_json() for seen in loaded.model_log.tool_schemas()],
        "requests_without_peerwire_tools": loaded.model_log.requests_without(),
        "records": _records(loaded.core),
        "checks": checks,
        "runner_tool_calls": runner_calls,
        "bindings": [_origin(b.to_json(), runner_calls) for b in bindings],
        "binding_summary": {"bound": sum(b.bound for b in bindings), "unbound": sum(not b.bound for b in bindings)},
        "model_requests": loaded.model_log.summary(),
        # Every run keeps one: the scripted model's, or the recording proxy's in front of a real provider.
        "model_log": MODEL_REQUESTS if (loaded.root / MODEL_REQUESTS).is_file() else f"{MODEL_REQUESTS} missing",
        "transcripts": transcripts(loaded.rollouts, loaded.model_log, thread_agents, model_log_name=MODEL_REQUESTS),
        "sequence": diagram.to_json(),
        "sequence_participants": list(diagram.participants),
        "sequence_diagram": diagram.mermaid(),
        "problems": problems,
    }
    if scenario.get("usage") is not None:
        section["usage"] = scenario["usage"]
    if scenario.get("probe") is not None:
        section["probe"] = {**scenario["probe"], "statement": PROBE_STATEMENT}
    return section


def _origin(binding: dict[str, Any], runner_calls: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Who made the record, and for an unbound one why nothing in a rollout can bind it.

    ``model``: a model's tool call (bound through its receipt); ``peerwire``: the core
    published it from a turn's outcome; ``runner``: one of the runner's own ``tool``
    steps, which call the core directly, so no model and no Codex call exist for it.
    """
    made_by = next((call for call in runner_calls if isinstance(call.get("result"), Mapping)
                    and call["result"].get("interaction_id") == binding["interaction_id"]), None)
    if made_by is not None:
        origin = "runner"
        explanation = (f"made by the runner's own tool step {made_by.get('step')} ({made_by.get('tool')} as "
                       f"{made_by.get('agent')}), not by a model: the runner calls the core directly, so there is "
                       "no Codex call to bind it to")
    elif binding["source"] == "tool_call":
        origin, explanation = "model", f"made by {binding['agent']}'s model through {binding['tool']}"
    elif binding["source"] == "provider_binding" or binding["sender"] == "peerwire":
        origin, explanation = "peerwire", "published by peerwire from the bound turn's outcome"
    else:
        origin = "unknown"
        explanation = ("admitted without a Codex call: not made by a model's tool call, and no runner step "
                       "claims it")
    return {**binding, "origin": origin, "explanation": explanation}


def _agents(agents_in: Mapping[str, Any], loaded: ScenarioEvidence, thread_agents: Mapping[str, str],
            codex_version: str | None, problems: list[str]) -> dict[str, Any]:
    names = list(dict.fromkeys([*agents_in, *thread_agents.values()]))
    out: dict[str, Any] = {}
    for name in names:
        given = agents_in.get(name) or {}
        if loaded.acp_transcript(name):
            out[name] = _acp_agent(name, given, loaded)
            continue
        threads = [t for t, owner in thread_agents.items() if owner == name]
        turns = [turn for thread in threads for turn in loaded.rollouts.thread_turns(thread)
                 if turn.status != "context_only"]
        versions = sorted({v for t in threads if t in loaded.rollouts.threads
                           and (v := loaded.rollouts.threads[t].cli_version)})
        if codex_version and versions and versions != [codex_version]:
            problems.append(f"{name}: rollouts were written by Codex {versions}, the run reports {codex_version}")
        out[name] = {
            "agent_id": given.get("agent_id"),
            **({"kind": given["kind"]} if given.get("kind") else {}),
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


def _acp_agent(name: str, given: Mapping[str, Any], loaded: ScenarioEvidence) -> dict[str, Any]:
    """An ACP agent's entry: its sessions and its prompts (turns) as its ACP transcript shows them; its model
    and effort are what it asked its model for (an ACP transcript names neither)."""
    history = loaded.acp_history(name)
    requested = loaded.model_log.reasoning(name)
    models = sorted({str(r.get("model")) for r in requested if r.get("model")}) or ["unverified"]
    return {
        "agent_id": given.get("agent_id"),
        "kind": given.get("kind") or "acp",
        "thread_ids": list(dict.fromkeys([*(given.get("thread_ids") or []), *history.sessions])),
        "generations": list(given.get("generations") or []),
        "codex_versions": [],
        "models": models,
        "efforts": ["unverified"],
        "requested": requested,
        "turns": [{"thread_id": turn.session_id, "turn_id": turn.turn_id, "model": models[0], "effort": "unverified",
                   "status": turn.status, "trigger": None, "started": turn.prompt.ref,
                   "ended": turn.answer.ref if turn.answer else None} for turn in history.turns],
    }


def _acp_finals(loaded: ScenarioEvidence, agents: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each ACP turn's final message (the last agent message with no tool call after it, of an end_turn)."""
    out = []
    for name in agents:
        for line in loaded.acp_history(name).lines:
            if line.payload.get("type") == "task_complete" and line.payload.get("last_agent_message"):
                text = line.payload["last_agent_message"]
                turn = loaded.acp_history(name).turn(line.turn_id or "")
                out.append({"agent": name, "thread_id": line.thread_id, "turn_id": line.turn_id,
                            "status": turn.status if turn else "completed", "text": text, **measure(text),
                            "rollout": str(line.at)})
    return out


def _texts(by_agent: Mapping[str, Any], loaded: ScenarioEvidence, thread_agents: Mapping[str, str], *,
           roles: tuple[str, ...]) -> list[dict[str, Any]]:
    out = []
    for agent, texts in by_agent.items():
        threads = [t for t, owner in thread_agents.items() if owner == agent]
        for number, text in enumerate(texts if isinstance(texts, list) else [texts]):
            found = [str(m.at) for m in loaded.rollouts.messages
                     if m.thread_id in threads and m.role in roles and text and m.text == text]
            out.append({"agent": agent, "index": number, "text": text, **measure(text), "rollout": found})
    return out


def _final_messages(loaded: ScenarioEvidence, thread_agents: Mapping[str, str]) -> list[dict[str, Any]]:
    out = []
    for turn, text in loaded.rollouts.final_messages():
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
                    "created_at": row.get("created_at"), "delivery": delivery(core, row),
                    "body": row.get("body") or "", **measure(row.get("body"))})
    return out


def _check(check: Mapping[str, Any], loaded: ScenarioEvidence, lines: ArtifactLines) -> dict[str, Any]:
    evidence = dict(check.get("evidence") or {})
    out = {"id": check["id"], "verdict": check["verdict"], "summary": check.get("summary", ""),
           "evidence": {k: list(v) for k, v in evidence.items()},
           "evidence_problems": _evidence_problems(evidence, loaded, lines)}
    if check.get("content") is not None:
        out["content"] = dict(check["content"])
    if check.get("skipped") is not None:
        out["skipped"] = dict(check["skipped"])
    return out


def _evidence_problems(evidence: Mapping[str, Any], loaded: ScenarioEvidence, lines: ArtifactLines) -> list[str]:
    """Cited evidence that the artifacts do not contain: a check must point at real lines.

    Records and model requests are looked up by id; every other kind of evidence
    (rollout, appserver, or any a check adds, e.g. a terminal capture) is a
    ``<file>:<line>`` inside the scenario's artifacts folder.
    """
    problems = []
    record_ids = {r["record_id"] for r in loaded.core.records} if loaded.core else set()
    request_ids = {r["request_id"] for r in loaded.core.requests} if loaded.core else set()
    for record in evidence.get("records") or []:
        if record not in record_ids and record not in request_ids:
            problems.append(f"record {record} is not in {EXPORT_FILE}")
    seqs = {r.seq for r in loaded.model_log.requests}
    for seq in evidence.get("model_requests") or []:
        if seq not in seqs:
            problems.append(f"model request {seq} is not in {MODEL_REQUESTS}")
    for key in [k for k in evidence if k not in ("records", "model_requests")]:
        for ref in evidence.get(key) or []:
            problem = lines.excerpt("", str(ref)).problem
            if problem:
                problems.append(f"{ref}: {problem}")
    return problems


def _loc(at: Any) -> str | None:
    return str(at) if at is not None else None
