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
history counts again, as it does for the model; ``agentMessageOccurrences`` and
``userMessageOccurrences`` split them by the form that carried them (a native
agent message, or a user message), which says how mail reached each model.
``encryptedMessageOccurrences``
counts, the same way, input items that carry opaque content (``encrypted_content``,
an encrypted content part, or populated ``encrypted_function_args``).
``stopReason`` says how the parent's last model response ended (``stop``: a final
answer; ``tool_calls``; ``error``: the model answered with an error; ``none``: no
response). ``modelErrors`` is this runtime's count of extension errors: model
requests answered with an error (no rule matched, a failure injected).
``requestCap`` bounds the probe: more requests than the cap fail it, and
``capExceeded`` names the cap.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from harness.evidence.envelope_grammar import collab_fields, message_type, prescribed, read, type_header
from harness.evidence.model_log import ModelRequestLog
from harness.evidence.responses import is_incoming, item_text

DEFAULT_REQUEST_CAP = 12
"""A probe's model requests, at most, unless its ``[probe]`` table says ``max_requests``."""
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
    max_requests: int = DEFAULT_REQUEST_CAP

    @classmethod
    def from_table(cls, table: Mapping[str, Any]) -> "ProbeExpectation":
        """From a scenario's ``[probe]`` table (``child`` defaults to ``/root/worker``, ``max_requests`` to
        :data:`DEFAULT_REQUEST_CAP`)."""
        return cls(child=table.get("child", "/root/worker"), question=table["question"], reply=table["reply"],
                   child_final=table["child_final"], final=table["final"], parent=table.get("parent", "/root"),
                   max_requests=int(table.get("max_requests", DEFAULT_REQUEST_CAP)))


@dataclass(frozen=True)
class ProbeObservation:
    """The probe summary and, per leg, the model requests (``seq``) it was observed in."""

    summary: dict[str, Any]
    seen: dict[str, list[int]] = field(default_factory=dict)


def _texts(items: Iterable[Any]) -> list[str]:
    """The texts of the messages in a model input that the model did not write itself (agent messages too)."""
    return [item_text(item) for item in items if is_incoming(item)]


def _envelopes(items: Iterable[Any], item_type: str) -> int:
    return sum(item_text(item).count(f"{type_header()}: ") for item in items
               if is_incoming(item) and item.get("type") == item_type)


def _encrypted(item: Any) -> bool:
    """Whether an input item carries opaque content the model reads but nobody here decrypts."""
    if not isinstance(item, dict) or item.get("role") == "assistant":
        return False
    if item.get("encrypted_content") or item.get("encrypted_function_args"):
        return True
    content = item.get("content")
    return isinstance(content, list) and any(isinstance(part, dict) and part.get("type") == "encrypted_content"
                                             for part in content)


def _stop_reason(response: Mapping[str, Any] | None) -> str:
    outcome = None if response is None else response.get("outcome", "answered")
    if outcome is None:
        return "none"
    if response.get("error") or outcome != "answered":
        return "error"
    emitted = response.get("emitted") or []
    if emitted and emitted[-1].get("type") == "function_call":
        return "tool_calls"
    return "stop"


def _opens_child_task(text: str, child: str) -> bool:
    """Whether ``text`` is the envelope of a task to ``child`` (its first input as a thread of its own)."""
    parsed = read(text)
    return (parsed is not None and parsed.form == "collab" and parsed.fields["message_type"] == message_type("task")
            and parsed.fields["recipient_path"] == child)


def _tree_envelope(kind: str, recipient_path: str, sender_path: str, body: str) -> str:
    """The collaboration envelope the contract's grammar prescribes (``contracts/envelope.json``, form collab)."""
    record = {"kind": kind, "body": body}
    return prescribed("collab", record, collab_fields(record, recipient_path, sender_path))


def mail_forms(summary: Mapping[str, Any]) -> str:
    """How the envelopes reached the models, for a report: ``8 envelopes in model inputs (5 as native agent
    messages, 3 as user messages)``."""
    return (f"{summary['nativeMessageOccurrences']} envelopes in model inputs "
            f"({summary.get('agentMessageOccurrences', 0)} as native agent messages, "
            f"{summary.get('userMessageOccurrences', 0)} as user messages)")


def collab_probe(requests: Iterable[dict[str, Any]], expect: ProbeExpectation) -> dict[str, Any]:
    """``requests``: the model log's request/response pairs, as ``{"input": [...], "emitted": [...]}``."""
    return observe(requests, expect).summary


def observe(requests: Iterable[dict[str, Any]], expect: ProbeExpectation) -> ProbeObservation:
    """Like :func:`collab_probe`, also naming the requests each leg was seen in.

    A request is named by its ``seq`` (as :func:`requests_from_log` gives it),
    else by its position. ``finalExact`` is seen in the request that produced
    the parent's last final answer.
    """
    question = _tree_envelope("information", expect.parent, expect.child, expect.question)
    reply = _tree_envelope("information", expect.child, expect.parent, expect.reply)
    final = _tree_envelope("reply", expect.parent, expect.child, expect.child_final)
    summary: dict[str, Any] = {"requests": 0, "nativeMessageOccurrences": 0, "agentMessageOccurrences": 0,
                               "userMessageOccurrences": 0, "encryptedMessageOccurrences": 0,
                               "childQuestionObserved": False, "parentReplyObserved": False,
                               "childFinalObserved": False, "finalExact": False, "modelErrors": 0,
                               "requestCap": expect.max_requests}
    seen: dict[str, list[int]] = {leg: [] for leg in LEGS}
    parent_finals: list[tuple[int, str]] = []
    last_parent: Mapping[str, Any] | None = None
    for position, request in enumerate(requests):
        seq = request.get("seq", position)
        summary["requests"] += 1
        texts = _texts(request.get("input") or [])
        summary["nativeMessageOccurrences"] += sum(t.count(f"{type_header()}: ") for t in texts)
        summary["agentMessageOccurrences"] += _envelopes(request.get("input") or [], "agent_message")
        summary["userMessageOccurrences"] += _envelopes(request.get("input") or [], "message")
        summary["encryptedMessageOccurrences"] += sum(_encrypted(item) for item in request.get("input") or [])
        if request.get("error") or request.get("outcome", "answered") not in (None, "answered"):
            summary["modelErrors"] += 1
        in_child = any(_opens_child_task(t, expect.child) for t in texts)
        if not in_child:
            last_parent = request
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
    summary["stopReason"] = _stop_reason(last_parent)
    over = summary["requests"] > expect.max_requests
    if over:
        summary["capExceeded"] = (f"the probe's request cap of {expect.max_requests} was exceeded: "
                                  f"{summary['requests']} model requests")
    summary["success"] = all(summary[leg] for leg in LEGS) and not over and summary["stopReason"] == "stop"
    return ProbeObservation(summary, seen)


def observe_log(path: Path, agent: str, expect: ProbeExpectation) -> ProbeObservation:
    """:func:`observe` over the model request log at ``path`` (absent: no request), route ``agent``."""
    return observe(route_requests(ModelRequestLog.load(path), agent), expect)


def requests_from_log(lines: Iterable[str], agent: str) -> list[dict[str, Any]]:
    """The scripted model log's requests of one route, each with what answered it (from the log's lines)."""
    return route_requests(ModelRequestLog.parse(lines), agent)


def route_requests(log: ModelRequestLog, agent: str) -> list[dict[str, Any]]:
    """The requests of route ``agent`` as :func:`observe` takes them: ``seq``, ``input``, ``emitted``."""
    return [{"seq": r.seq, "input": r.input_items(), "emitted": list(r.items), "outcome": r.outcome,
             "error": r.error} for r in log.requests if r.agent == agent]
