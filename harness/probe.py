"""The collaboration probe: did the parent/child exchange really happen?

Computed from the scripted model's request log alone — what Codex actually put
in front of the model — so a model that claims success without the exchange
fails. Each leg counts only when its envelope is observed in an actual model
input of the right thread:

* ``childQuestionObserved``: the child's question (MESSAGE, sender the child) in a parent input;
* ``parentReplyObserved``: the parent's reply (MESSAGE, sender ``/root``) in a child input;
* ``childFinalObserved``: the child's final answer (FINAL_ANSWER) in a parent input;
* ``finalExact``: the parent's last final answer is exactly the expected text.

``nativeMessageOccurrences`` counts envelopes across all inputs; repeated
history counts again, as it does for the model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable


@dataclass(frozen=True)
class ProbeExpectation:
    child: str  # the child's path, e.g. /root/worker
    question: str
    reply: str
    child_final: str
    final: str
    parent: str = "/root"


def _texts(items: Iterable[Any]) -> list[str]:
    out = []
    for item in items:
        if isinstance(item, dict) and item.get("type") == "message" and item.get("role") != "assistant":
            out.append("\n".join(part.get("text", "") for part in item.get("content") or [] if isinstance(part, dict)))
    return out


def _envelope(kind: str, recipient: str, sender: str, body: str) -> str:
    return f"Message Type: {kind}\nTask name: {recipient}\nSender: {sender}\nPayload:\n{body}"


def collab_probe(requests: Iterable[dict[str, Any]], expect: ProbeExpectation) -> dict[str, Any]:
    """``requests``: the model log's request/response pairs, as ``{"input": [...], "emitted": [...]}``."""
    child_task = f"Message Type: NEW_TASK\nTask name: {expect.child}\n"
    question = _envelope("MESSAGE", expect.parent, expect.child, expect.question)
    reply = _envelope("MESSAGE", expect.child, expect.parent, expect.reply)
    final = _envelope("FINAL_ANSWER", expect.parent, expect.child, expect.child_final)
    summary = {"requests": 0, "nativeMessageOccurrences": 0, "childQuestionObserved": False,
               "parentReplyObserved": False, "childFinalObserved": False, "finalExact": False}
    parent_finals: list[str] = []
    for request in requests:
        summary["requests"] += 1
        texts = _texts(request.get("input") or [])
        summary["nativeMessageOccurrences"] += sum(t.count("Message Type: ") for t in texts)
        in_child = any(t.startswith(child_task) for t in texts)
        if in_child:
            summary["parentReplyObserved"] |= any(t == reply for t in texts)
            continue
        summary["childQuestionObserved"] |= any(t == question for t in texts)
        summary["childFinalObserved"] |= any(t == final for t in texts)
        for item in request.get("emitted") or []:
            if item.get("type") == "message" and item.get("phase") == "final_answer":
                parent_finals.append("".join(p.get("text", "") for p in item.get("content") or []))
    summary["finalExact"] = bool(parent_finals) and parent_finals[-1] == expect.final
    legs = ("childQuestionObserved", "parentReplyObserved", "childFinalObserved", "finalExact")
    summary["success"] = all(summary[leg] for leg in legs)
    return summary


def requests_from_log(lines: Iterable[str], agent: str) -> list[dict[str, Any]]:
    """Pair the scripted model log's request and response records of one route."""
    requests: dict[int, dict[str, Any]] = {}
    order: list[int] = []
    for line in lines:
        record = json.loads(line)
        seq = record.get("seq")
        if record.get("event") == "request" and record.get("agent") == agent:
            requests[seq] = {"input": (record.get("body") or {}).get("input") or [], "emitted": []}
            order.append(seq)
        elif record.get("event") == "response" and seq in requests:
            requests[seq]["emitted"] = record.get("items") or []
    return [requests[s] for s in order]
