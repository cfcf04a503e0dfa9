"""Per-agent transcripts: what each agent's model was given and did, in time order.

Built from the agent's rollout lines (the thread the runner or the core names
for it) and, when there is one, the scripted model's request log:

* ``turn_started`` / ``turn_ended`` — a turn's trigger, its status, duration and error;
* ``input`` — a user message: an operator prompt, or what peerwire put into the
  thread (a task envelope, an injected message or reply);
* ``context`` / ``instructions`` — the environment context and developer
  instructions Codex adds (clipped: they repeat in every turn; the rollout line
  has them whole);
* ``tool_call`` — the call's namespace, tool and arguments with its output, the
  error it returned (an MCP call Codex marked failed, or a result carrying an
  ``error``) and how long it took;
* ``answer`` — an assistant message, with its phase (commentary / final_answer);
* ``reasoning`` — a reasoning summary, when the model wrote one;
* ``model_request`` — one request to the agent's model (the scripted model names the rule it matched), the
  outcome and the time to answer.

Every entry carries ``source``, the line it was read from (``rollouts/...:N`` or
``model-requests.jsonl:N``), so a reader can check it against the artifact.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from harness.evidence.rollouts import RolloutIndex, RolloutLine, parse_time
from harness.evidence.model_log import ModelRequestLog

from .sequence import tool_result

CONTEXT_CHARS = 240
"""How much of a context or instructions message an entry keeps: its first lines (a collaboration role, the
working directory). They repeat for every agent of every scenario run; the cited rollout line has them whole."""
_CONTEXT_TAG = re.compile(r"^\s*<([a-z_]+)>")


def transcripts(index: RolloutIndex, model_log: ModelRequestLog, thread_agents: Mapping[str, str], *,
                model_log_name: str) -> dict[str, list[dict[str, Any]]]:
    """``agent -> entries`` in time order, for every agent that owns a thread in ``thread_agents``.

    Offsets (``offset_s``) are seconds since the earliest entry of any agent, so
    the transcripts of one scenario share a clock.
    """
    out: dict[str, list[dict[str, Any]]] = {}
    for line in index.lines():
        agent = thread_agents.get(line.thread_id or "")
        if agent is None:
            continue
        entry = _from_rollout(index, line)
        if entry is not None:
            out.setdefault(agent, []).append(entry)
    for request in model_log.requests:
        agent = thread_agents.get(request.thread_id or "") or request.agent
        if not agent:
            continue
        latency = (round(request.answered_at - request.received_at, 3)
                   if request.answered_at is not None and request.received_at is not None else None)
        outcome = request.outcome or "unanswered"
        out.setdefault(agent, []).append(_entry(
            _iso(request.received_at), "model_request", f"model request {request.seq}: {outcome}"
            + (f" by rule {request.rule}" if request.rule else ""), f"{model_log_name}:{request.line}",
            turn_id=_turn_of(request.body), status=outcome, error=request.error, duration_s=latency,
            model_request=request.seq))
    starts = [parse_time(e["at"]) for entries in out.values() for e in entries if e["at"]]
    zero = min((s for s in starts if s is not None), default=None)
    for entries in out.values():
        # Stable: entries at the same instant keep their reading order (rollout order first).
        entries.sort(key=lambda e: parse_time(e["at"]) or datetime.max.replace(tzinfo=timezone.utc))
        for number, entry in enumerate(entries):
            entry["seq"] = number
            at = parse_time(entry["at"])
            entry["offset_s"] = round((at - zero).total_seconds(), 3) if at and zero else None
    return dict(sorted(out.items()))


def _from_rollout(index: RolloutIndex, line: RolloutLine) -> dict[str, Any] | None:
    payload, kind, ptype = line.payload, line.record_type, line.payload.get("type")
    where = str(line.at)
    if kind == "event_msg" and ptype == "task_started":
        attribution = payload.get("turn_attribution") or {}
        trigger = attribution.get("turn_trigger") or "unknown trigger"
        return _entry(line.timestamp, "turn_started", f"turn started ({trigger})", where, turn_id=line.turn_id,
                      status=trigger)
    if kind == "event_msg" and ptype in ("task_complete", "turn_aborted"):
        return _turn_ended(index, line)
    if kind != "response_item":
        return None
    if ptype == "message":
        role = payload.get("role")
        text = _content_text(payload.get("content"))
        if role == "assistant":
            phase = payload.get("phase") or "unknown phase"
            return _entry(line.timestamp, "answer", f"answer ({phase})", where, turn_id=line.turn_id, text=text,
                          status=phase)
        if role == "developer" or role == "system":
            return _entry(line.timestamp, "instructions", f"{role} instructions", where, turn_id=line.turn_id,
                          text=_clip(text))
        tag = _CONTEXT_TAG.match(text)
        if tag:
            return _entry(line.timestamp, "context", tag.group(1).replace("_", " "), where, turn_id=line.turn_id,
                          text=_clip(text))
        return _entry(line.timestamp, "input", f"{role} input", where, turn_id=line.turn_id, text=text)
    if ptype == "reasoning":
        summary = "\n".join(str(part.get("text", "")) for part in payload.get("summary") or [] if isinstance(part, dict))
        return _entry(line.timestamp, "reasoning", "reasoning", where, turn_id=line.turn_id, text=summary or None)
    if ptype and ptype.endswith("_call") and payload.get("call_id"):
        return _tool_call(index, line)
    return None


def _tool_call(index: RolloutIndex, line: RolloutLine) -> dict[str, Any]:
    payload = line.payload
    call = index.call(str(payload["call_id"]))
    name = str(payload.get("name") or payload.get("type"))
    namespace = payload.get("namespace")
    raw_arguments = payload.get("arguments", payload.get("input"))
    arguments: Any = raw_arguments
    if isinstance(raw_arguments, str):
        try:
            arguments = json.loads(raw_arguments)
        except ValueError:
            arguments = raw_arguments
    output, output_at, status = (call.output, call.output_at, call.mcp_status) if call else (None, None, None)
    result = tool_result(output)
    error = None
    if isinstance(result, dict) and isinstance(result.get("error"), dict):
        failure = result["error"]
        error = f"{failure.get('code')}: {failure.get('message')}"
    elif status == "failed":
        error = "the call failed"
    elif namespace and str(namespace).startswith("mcp__") and call is not None and call.mcp_completed is None \
            and output is not None:
        # Codex answered the model itself, without running the MCP call (e.g. a tool it did not have yet).
        error = f"Codex did not run the call: {_clip(_output_text(output) or '')}"
    duration = None
    if output_at is not None:
        began, ended = parse_time(line.timestamp), index.timestamp(output_at)
        duration = round((ended - began).total_seconds(), 3) if began and ended else None
    title = f"{namespace}.{name}" if namespace else name
    return _entry(line.timestamp, "tool_call", title, str(line.at), turn_id=line.turn_id, arguments=arguments,
                  output=_output_text(output), error=error, duration_s=duration,
                  status=status or ("answered" if output_at is not None else "no output recorded"),
                  output_source=str(output_at) if output_at is not None else None, call_id=str(payload["call_id"]))


def _turn_ended(index: RolloutIndex, line: RolloutLine) -> dict[str, Any]:
    payload = line.payload
    turn = index.turn(line.thread_id or "", line.turn_id or "")
    status = turn.status if turn is not None and turn.ended == line.at else (
        "interrupted" if payload.get("reason") == "interrupted" else payload.get("type"))
    error = turn.error if turn is not None else None
    if payload.get("type") == "turn_aborted":
        error = error or (f"aborted: {payload.get('reason')}" if payload.get("reason") != "interrupted" else None)
    duration = payload.get("duration_ms")
    return _entry(line.timestamp, "turn_ended", f"turn {status}", str(line.at), turn_id=line.turn_id,
                  status=status, error=error,
                  duration_s=round(duration / 1000, 3) if isinstance(duration, (int, float)) else None,
                  text=payload.get("last_agent_message"))


def _entry(at: str | None, kind: str, title: str, source: str, **fields: Any) -> dict[str, Any]:
    entry = {"seq": 0, "at": at, "offset_s": None, "kind": kind, "title": title, "source": source,
             "turn_id": None, "text": None, "arguments": None, "output": None, "error": None,
             "status": None, "duration_s": None, "output_source": None, "call_id": None, "model_request": None}
    entry.update(fields)
    return entry


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _output_text(output: Any) -> str | None:
    if output is None:
        return None
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n".join(str(p.get("text", "")) for p in output if isinstance(p, dict))
    return json.dumps(output, ensure_ascii=False)


def _clip(text: str) -> str:
    return text if len(text) <= CONTEXT_CHARS else text[:CONTEXT_CHARS] + f"… [{len(text)} characters in all]"


def _turn_of(body: Mapping[str, Any]) -> str | None:
    metadata = body.get("client_metadata")
    return str(metadata["turn_id"]) if isinstance(metadata, dict) and metadata.get("turn_id") else None


def _iso(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
