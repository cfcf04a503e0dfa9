"""A small synthetic task → reply exchange in the formats Codex 0.171 and peerwire write.

The rollout lines follow real rollouts of the pinned Codex (``session_meta``,
``task_started``, ``turn_context``, ``response_item`` with the turn in
``internal_chat_message_metadata_passthrough``, ``McpToolCall`` ``item_completed``,
``task_complete``, ``turn_aborted``); the core's side is an evidence export
(``contracts/export.schema.json``). Line numbers quoted in tests are the positions written here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from peerwire import envelope
from peerwire.lifecycle import LIFECYCLES

MODEL = "peerwire-scripted"
A_ID, B_ID = "aaaaaaaa-0000-4000-8000-000000000001", "bbbbbbbb-0000-4000-8000-000000000002"
THREAD_A, THREAD_B = "01a2-thread-a", "01a2-thread-b"
TURN_A, TURN_B, TURN_B2 = "01a2-turn-a1", "01a2-turn-b1", "01a2-turn-b2"
CALL_TASK, CALL_WAIT = "call_task0001", "call_wait0001"


def ident(prefix: str, number: int) -> str:
    """An id in the core's format (``ix_``/``rq_`` and 32 hex digits) whose short form shows ``number``."""
    return f"{prefix}_{number:06x}{'0' * 26}"


TASK_ID, REPLY_ID, REQUEST_ID, BINDING_ID = ident("ix", 0xa1), ident("ix", 0xb1), ident("rq", 1), "bd_0001"
TASK2_ID, BLOCKED_ID, REQUEST2_ID = ident("ix", 0xa2), ident("ix", 0xb2), ident("rq", 2)
PROMPT_A = "Ask B: what is 6 × 7?\nAnswer “exactly”."
TASK_BODY = "What is 6 × 7? — reply with the number"
ANSWER = "42"
FINAL_A = "B says: 42"


def stamp(second: float) -> str:
    return f"2026-11-30T06:00:{second:06.3f}Z"


@dataclass
class Rollout:
    """Rollout lines of one thread, written one JSON object a line."""

    thread_id: str
    lines: list[dict[str, Any]] = field(default_factory=list)
    clock: float = 0.0

    def add(self, record_type: str, payload: dict[str, Any]) -> int:
        self.clock += 0.01
        self.lines.append({"timestamp": stamp(self.clock), "ordinal": len(self.lines), "type": record_type,
                           "payload": payload})
        return len(self.lines)

    def meta(self) -> int:
        return self.add("session_meta", {"id": self.thread_id, "session_id": self.thread_id, "cli_version": "0.171.0",
                                         "originator": "peerwire", "model_provider": "scripted"})

    def start(self, turn: str, trigger: str, *, effort: str | None, parent: str | None = None) -> int:
        line = self.add("event_msg", {"type": "task_started", "turn_id": turn, "turn_attribution": {
            "turn_id": turn, "turn_trigger": trigger, "parent_turn_id": parent}})
        context = {"turn_id": turn, "model": MODEL, "approval_policy": "never"}
        if effort is not None:
            context["effort"] = effort
        self.add("turn_context", context)
        return line

    def message(self, turn: str | None, role: str, text: str, *, phase: str | None = None,
                item_id: str | None = None) -> int:
        payload: dict[str, Any] = {"type": "message", "id": item_id or f"msg_{len(self.lines)}", "role": role,
                                   "content": [{"type": "output_text" if role == "assistant" else "input_text",
                                                "text": text}]}
        if phase:
            payload["phase"] = phase
        if turn:
            payload["internal_chat_message_metadata_passthrough"] = {"turn_id": turn}
        return self.add("response_item", payload)

    def call(self, turn: str, call_id: str, name: str, arguments: dict[str, Any], result: Any | None) -> tuple[int, int | None]:
        line = self.add("response_item", {"type": "function_call", "id": "fc_" + call_id, "name": name,
                                          "namespace": "mcp__peerwire", "call_id": call_id,
                                          "arguments": json.dumps(arguments, ensure_ascii=False),
                                          "internal_chat_message_metadata_passthrough": {"turn_id": turn}})
        if result is None:
            return line, None
        text = json.dumps(result, ensure_ascii=False)
        self.add("event_msg", {"type": "item_completed", "thread_id": self.thread_id, "turn_id": turn,
                               "item": {"type": "McpToolCall", "id": call_id, "server": "peerwire", "tool": name,
                                        "arguments": arguments, "status": "completed",
                                        "result": {"content": [{"type": "text", "text": text}]}}})
        output = self.add("response_item", {
            "type": "function_call_output", "call_id": call_id,
            "output": "Wall time: 0.0100 seconds\nOutput:\n" + json.dumps(result, ensure_ascii=False,
                                                                          separators=(",", ":")),
            "internal_chat_message_metadata_passthrough": {"turn_id": turn}})
        return line, output

    def complete(self, turn: str, last: str | None, *, error: str | None = None) -> int:
        payload: dict[str, Any] = {"type": "task_complete", "turn_id": turn, "last_agent_message": last}
        if error:
            payload["error"] = {"message": error}
        return self.add("event_msg", payload)

    def abort(self, turn: str, reason: str = "interrupted") -> int:
        return self.add("event_msg", {"type": "turn_aborted", "turn_id": turn, "reason": reason})

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in self.lines), encoding="utf-8")
        return path


def record(record_id: str, kind: str, sender: tuple[str | None, str], recipient: tuple[str, str], body: str, *,
           seq: int, state: str | None = None, request_id: str | None = None, status: str | None = None,
           code: str | None = None, tool_receipt: dict[str, Any] | None = None,
           received_at: str | None = None) -> dict[str, Any]:
    """One record as a core's export shows it."""
    row: dict[str, Any] = {"record_id": record_id, "kind": kind, "seq": seq,
                           "sender": {"agent_id": sender[0], "name": sender[1]},
                           "recipient": {"agent_id": recipient[0], "name": recipient[1]}, "body": body,
                           "created_at": stamp(0)}
    for key, value in (("request_id", request_id), ("status", status), ("code", code)):
        if value is not None:
            row[key] = value
    state = state or LIFECYCLES[kind].initial
    return {**row, "state": state, "tool_receipt": tool_receipt, "updated_at": stamp(0), "received_at": received_at}


def agent_row(agent_id: str, name: str, thread_id: str) -> dict[str, Any]:
    return {"agent_id": agent_id, "name": name, "aliases": [], "provider": "codex", "provider_session_id": thread_id,
            "generation": 1, "status": "idle", "enabled": True, "sendable": True, "source": "lab", "path": None,
            "parent_agent_id": None, "created_at": stamp(0), "updated_at": stamp(0), "last_error": None}


def export(**parts: list[dict[str, Any]]) -> dict[str, Any]:
    """An export document holding ``parts`` (records, evidence, ...; the rest empty)."""
    return {"format": "peerwire-export", "version": 1, "core": {"implementation": "synthetic", "version": "0"},
            "exported_at": stamp(9), "source": "home",
            **{key: parts.get(key, []) for key in ("agents", "records", "evidence", "requests", "claims", "bindings")}}


@dataclass
class Exchange:
    """The artifacts of one exchange and the line numbers tests refer to."""

    rollout_a: Rollout
    rollout_b: Rollout
    export: dict[str, Any]
    lines: dict[str, int]
    model_requests: list[dict[str, Any]]

    def write(self, folder: Path) -> Path:
        """``core-export.json``, ``model-requests.jsonl``, ``appserver/``, ``rollouts/<agent>/`` under ``folder``."""
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "core-export.json").write_text(json.dumps(self.export, ensure_ascii=False, indent=1),
                                                 encoding="utf-8")
        (folder / "model-requests.jsonl").write_text(
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in self.model_requests), encoding="utf-8")
        (folder / "appserver").mkdir(exist_ok=True)
        (folder / "appserver" / "B.g1.appserver.jsonl").write_text(
            json.dumps({"seq": 0, "dir": "sent", "message": {"method": "turn/start"}}) + "\n", encoding="utf-8")
        self.rollout_a.write(folder / "rollouts" / "A" / ROLLOUT_A)
        self.rollout_b.write(folder / "rollouts" / "B" / ROLLOUT_B)
        return folder


ROLLOUT_A = f"rollout-2026-11-30T06-00-00-{THREAD_A}.jsonl"
ROLLOUT_B = f"rollout-2026-11-30T06-00-00-{THREAD_B}.jsonl"

PEERWIRE_TOOLS = {"type": "namespace", "name": "mcp__peerwire", "description": "Tools in the mcp__peerwire namespace.",
                  "tools": [{"type": "function", "name": "followup_task", "description": "Assign work.", "strict": False,
                             "parameters": {"type": "object", "properties": {"target": {"type": "string"},
                                                                             "message": {"type": "string"}}}}]}


def task_exchange(*, effort_a: str | None = "low", effort_b: str | None = None,
                  interrupted_second_task: bool = False,
                  render: Callable[[dict[str, Any]], str] = envelope.render) -> Exchange:
    """A asks B a question with ``followup_task``; B's completed turn answers it.

    B's turn context omits the effort by default (``effort_b=None``), as Codex does
    when no reasoning effort is configured. With ``interrupted_second_task`` a second
    task reaches B and its turn is interrupted: peerwire publishes a blocked reply.
    ``render`` is the core's envelope renderer whose output the rollouts carry (a
    test plants a deviating one to see the judges catch it).
    """
    a, b = Rollout(THREAD_A), Rollout(THREAD_B, clock=0.005)
    lines: dict[str, int] = {}
    a.meta()
    b.meta()
    lines["a_start"] = a.start(TURN_A, "operator", effort=effort_a)
    lines["a_prompt"] = a.message(TURN_A, "user", PROMPT_A)
    receipt = {"interaction_id": TASK_ID, "kind": "task", "state": "admitted", "request_id": REQUEST_ID}
    lines["task_call"], lines["task_output"] = a.call(TURN_A, CALL_TASK, "followup_task",
                                                      {"target": "B", "message": TASK_BODY}, receipt)
    task_row = record(TASK_ID, "task", (A_ID, "A"), (B_ID, "B"), TASK_BODY, seq=1, request_id=REQUEST_ID,
                      state="replied", tool_receipt={"via": "mcp", "call_id": CALL_TASK, "thread_id": THREAD_A,
                                                     "turn_id": TURN_A, "model": MODEL})
    reply_row = record(REPLY_ID, "reply", (B_ID, "B"), (A_ID, "A"), ANSWER, seq=2, request_id=REQUEST_ID,
                       status="done", state="provider_visible", received_at=stamp(0.5))
    b.clock = a.clock
    lines["b_start"] = b.start(TURN_B, "peerwire_task", effort=effort_b, parent=TURN_A)
    lines["b_task_message"] = b.message(TURN_B, "user", render(task_row))
    lines["b_final"] = b.message(TURN_B, "assistant", ANSWER, phase="final_answer", item_id="msg_b_final")
    lines["b_complete"] = b.complete(TURN_B, ANSWER)
    a.clock = b.clock
    lines["wait_call"], lines["wait_output"] = a.call(TURN_A, CALL_WAIT, "wait_agent", {"timeout_ms": 60000},
                                                      {"woke": True, "timed_out": False,
                                                       "wake_reason": "mailbox_activity"})
    lines["a_inject"] = a.message(TURN_A, "user", render(reply_row))
    lines["a_final"] = a.message(TURN_A, "assistant", FINAL_A, phase="final_answer")
    lines["a_complete"] = a.complete(TURN_A, FINAL_A)

    def ev(n: int, ix: str, stage_name: str, detail: dict[str, Any], second: float) -> dict[str, Any]:
        return {"evidence_id": n, "record_id": ix, "stage": stage_name, "at": stamp(second), "detail": detail}

    evidence = [
        ev(1, TASK_ID, "admitted", {"tool_receipt": task_row["tool_receipt"]}, 0.055),
        ev(2, TASK_ID, "claim_by_dispatch", {"claim_id": "cl_0001"}, 0.056),
        ev(3, TASK_ID, "provider_accepted", {"binding_id": BINDING_ID, "thread_id": THREAD_B, "turn_id": TURN_B,
                                             "via": "turn/start", "generation": 1}, 0.075),
        ev(4, TASK_ID, "binding_capture", {"binding_id": BINDING_ID, "turn_id": TURN_B, "turn_status": "completed",
                                           "reply_status": "done", "final_item_id": "msg_b_final"}, 0.125),
        ev(5, REPLY_ID, "admitted", {"binding_id": BINDING_ID, "source": "turn_outcome", "turn_id": TURN_B}, 0.126),
        ev(6, TASK_ID, "binding_publish", {"binding_id": BINDING_ID, "reply_interaction_id": REPLY_ID}, 0.127),
        ev(7, REPLY_ID, "provider_visible", {"via": "thread/inject_items", "thread_id": THREAD_A}, 0.155),
    ]
    bindings = [{"binding_id": BINDING_ID, "request_id": REQUEST_ID, "claim_id": "cl_0001", "agent_id": B_ID,
                 "generation": 1, "thread_id": THREAD_B, "turn_id": TURN_B, "state": "published",
                 "outcome": {"turn_id": TURN_B, "turn_status": "completed", "reply_status": "done",
                             "final_item_id": "msg_b_final", "text": ANSWER},
                 "created_at": stamp(0.075), "updated_at": stamp(0.127)}]
    interactions = [task_row, reply_row]
    requests = [{"request_id": REQUEST_ID, "task_record_id": TASK_ID, "requester_id": A_ID,
                 "recipient_id": B_ID, "reply_record_id": REPLY_ID, "reply_source": "turn_outcome",
                 "created_at": stamp(0.055)}]
    claims = [{"claim_id": "cl_0001", "request_id": REQUEST_ID, "claimant": "dispatch", "claimed_at": stamp(0.056),
               "released_at": None, "release_reason": None}]
    if interrupted_second_task:
        second = record(TASK2_ID, "task", (A_ID, "A"), (B_ID, "B"), "Long job", seq=3, request_id=REQUEST2_ID,
                        state="replied")
        blocked = record(BLOCKED_ID, "reply", (None, "peerwire"), (A_ID, "A"), "B's turn was interrupted.", seq=4,
                         request_id=REQUEST2_ID, status="blocked", code="turn_interrupted", state="published")
        lines["b2_start"] = b.start(TURN_B2, "peerwire_task", effort=effort_b)
        lines["b2_abort"] = b.abort(TURN_B2)
        interactions += [second, blocked]
        bindings.append({"binding_id": "bd_0002", "request_id": REQUEST2_ID, "claim_id": "cl_0002", "agent_id": B_ID,
                         "generation": 1, "thread_id": THREAD_B, "turn_id": TURN_B2, "state": "published",
                         "outcome": None, "created_at": stamp(1), "updated_at": stamp(1)})
        evidence.append(ev(8, BLOCKED_ID, "admitted", {"binding_id": "bd_0002", "source": "peerwire"}, 2))
    document = export(agents=[agent_row(A_ID, "A", THREAD_A), agent_row(B_ID, "B", THREAD_B)], records=interactions,
                      evidence=evidence, bindings=bindings, requests=requests, claims=claims)
    model_requests = []
    for seq, agent in enumerate(("A", "B", "A", "A")):
        body = {"model": MODEL, "reasoning": {"summary": "auto", **({"effort": effort_a} if agent == "A" and effort_a
                                                                     else {})},
                "input": [], "tools": [{"type": "function", "name": "exec_command"}, PEERWIRE_TOOLS]}
        model_requests.append({"event": "request", "seq": seq, "agent": agent, "path": f"/agents/{agent}/v1/responses",
                               "headers": {}, "body": body})
        model_requests.append({"event": "response", "seq": seq, "agent": agent, "outcome": "answered",
                               "rule": f"rule-{seq}", "items": [], "error": None})
    return Exchange(a, b, document, lines, model_requests)


def run_description(run_id: str = "run-1", *, passed: bool = True, checks: list[dict[str, Any]] | None = None,
                    artifacts_dir: str = "task/") -> dict[str, Any]:
    """What the runner hands to ``write_report`` for the exchange above."""
    return {
        "run_id": run_id, "started_at": stamp(0), "finished_at": stamp(5), "codex_version": "0.171.0",
        "provider": "scripted",
        "scenarios": [{
            "name": "task", "mode": "attached", "description": "A assigns B a question; B's turn answers it.",
            "passed": passed, "wall_s": 5.0, "phases": [{"name": "setup", "s": 1.5}, {"name": "exchange", "s": 3.5}],
            "agents": {"A": {"agent_id": A_ID, "thread_ids": [THREAD_A], "generations": [1]},
                       "B": {"agent_id": B_ID, "thread_ids": [THREAD_B], "generations": [1]}},
            "inputs": {"prompts": {"A": [PROMPT_A]}},
            "outputs": {"A": [FINAL_A]},
            "checks": checks if checks is not None else [{
                "id": "task-reply-correlated", "verdict": "pass" if passed else "fail",
                "summary": "B's turn outcome is the reply to A's request",
                "evidence": {"records": [TASK_ID, REPLY_ID], "rollout": [f"rollouts/B/{ROLLOUT_B}:5"],
                             "model_requests": [1], "appserver": ["appserver/B.g1.appserver.jsonl:1"]}}],
            "artifacts_dir": artifacts_dir,
        }],
    }
