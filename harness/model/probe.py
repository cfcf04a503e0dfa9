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

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from peerwire import collab, envelope
from peerwire.envelope import MESSAGE_TYPES
from peerwire.lifecycle import Kind

from .log import ModelRequestLog
from .responses import item_text

LEGS = ("childQuestionObserved", "parentReplyObserved", "childFinalObserved", "finalExact")
STATEMENT = ("Each leg counts only when it is observed in an actual model input (the scripted model's "
             "request log), and the final answer must be exactly the expected text; a model that claims "
             "success without the exchange fails. Message occurrences include repeated history.")
"""How a report states what the probe's verdict means."""


@dataclass(frozen=True)
class ProbeExpectation:
    child: str  # the child's path, e.g. /root/worker
    question: str
    reply: str
    child_final: str
    final: str
    parent: str = "/root"

    @classmethod
    def from_table(cls, table: Mapping[str, Any]) -> "ProbeExpectation":
        """From a scenario's ``[probe]`` table (``child`` defaults to ``/root/worker``)."""
        return cls(child=table.get("child", "/root/worker"), question=table["question"], reply=table["reply"],
                   child_final=table["child_final"], final=table["final"], parent=table.get("parent", "/root"))


@dataclass(frozen=True)
class ProbeObservation:
    """The probe summary and, per leg, the model requests (``seq``) it was observed in."""

    summary: dict[str, Any]
    seen: dict[str, list[int]] = field(default_factory=dict)


def _texts(items: Iterable[Any]) -> list[str]:
    """The texts of the messages in a model input that the model did not write itself."""
    return [item_text(item) for item in items
            if isinstance(item, dict) and item.get("type") == "message" and item.get("role") != "assistant"]


def _opens_child_task(text: str, child: str) -> bool:
    """Whether ``text`` is the envelope of a task to ``child`` (its first input as a thread of its own)."""
    try:
        headers = envelope.parse(text)["headers"]
    except ValueError:
        return False
    return headers.get(envelope.TYPE_HEADER) == MESSAGE_TYPES[Kind.TASK] and headers.get("Task name") == child


def collab_probe(requests: Iterable[dict[str, Any]], expect: ProbeExpectation) -> dict[str, Any]:
    """``requests``: the model log's request/response pairs, as ``{"input": [...], "emitted": [...]}``."""
    return observe(requests, expect).summary


def observe(requests: Iterable[dict[str, Any]], expect: ProbeExpectation) -> ProbeObservation:
    """Like :func:`collab_probe`, also naming the requests each leg was seen in.

    A request is named by its ``seq`` (as :func:`requests_from_log` gives it),
    else by its position. ``finalExact`` is seen in the request that produced
    the parent's last final answer.
    """
    message, final_answer = MESSAGE_TYPES[Kind.INFORMATION], MESSAGE_TYPES[Kind.REPLY]
    question = collab.render(message, expect.parent, expect.child, expect.question)
    reply = collab.render(message, expect.child, expect.parent, expect.reply)
    final = collab.render(final_answer, expect.parent, expect.child, expect.child_final)
    summary = {"requests": 0, "nativeMessageOccurrences": 0, "childQuestionObserved": False,
               "parentReplyObserved": False, "childFinalObserved": False, "finalExact": False}
    seen: dict[str, list[int]] = {leg: [] for leg in LEGS}
    parent_finals: list[tuple[int, str]] = []
    for position, request in enumerate(requests):
        seq = request.get("seq", position)
        summary["requests"] += 1
        texts = _texts(request.get("input") or [])
        summary["nativeMessageOccurrences"] += sum(t.count(f"{envelope.TYPE_HEADER}: ") for t in texts)
        in_child = any(_opens_child_task(t, expect.child) for t in texts)
        legs = {"parentReplyObserved": reply} if in_child else {"childQuestionObserved": question,
                                                                  "childFinalObserved": final}
        for leg, expected in legs.items():
            if expected in texts:
                summary[leg] = True
                seen[leg].append(seq)
        if in_child:
            continue
        for item in request.get("emitted") or []:
            if item.get("type") == "message" and item.get("phase") == "final_answer":
                parent_finals.append((seq, item_text(item)))
    if parent_finals and parent_finals[-1][1] == expect.final:
        summary["finalExact"] = True
        seen["finalExact"].append(parent_finals[-1][0])
    summary["success"] = all(summary[leg] for leg in LEGS)
    return ProbeObservation(summary, seen)


def observe_log(path: Path, agent: str, expect: ProbeExpectation) -> ProbeObservation:
    """:func:`observe` over the model request log at ``path`` (absent: no request), route ``agent``."""
    return observe(route_requests(ModelRequestLog.load(path), agent), expect)


def requests_from_log(lines: Iterable[str], agent: str) -> list[dict[str, Any]]:
    """The scripted model log's requests of one route, each with what answered it (from the log's lines)."""
    return route_requests(ModelRequestLog.parse(lines), agent)


def route_requests(log: ModelRequestLog, agent: str) -> list[dict[str, Any]]:
    """The requests of route ``agent`` as :func:`observe` takes them: ``seq``, ``input``, ``emitted``."""
    return [{"seq": r.seq, "input": r.input_items(), "emitted": list(r.items)}
            for r in log.requests if r.agent == agent]
