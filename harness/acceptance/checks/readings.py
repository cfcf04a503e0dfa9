"""Readings several judgements share: envelopes in texts, inject requests, receive outputs, replies, turns.

Each reads the run's observations and answers one question; none decides a verdict
on its own (those that find nothing raise :class:`~.kernel.Failed` with what is missing).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.evidence.rollouts import RolloutLine
from harness.evidence.responses import is_incoming, item_text
from peerwire import envelope

from ..observations import Observations, TranscriptLine, output_json
from .kernel import require


def envelope_of(text: str) -> dict[str, Any] | None:
    try:
        return envelope.parse(text)
    except ValueError:
        return None


def carries(obs: Observations, text: str, record: Mapping[str, Any]) -> bool:
    """Whether ``text`` is the envelope of ``record``: its type, request and exact body.

    Between agents of a collaboration tree the envelope names no request but
    the recipient's and the sender's paths (:func:`peerwire.collab.render`).
    """
    parsed = envelope_of(text)
    if parsed is None or parsed["payload"] != record["body"]:
        return False
    headers = parsed["headers"]
    if headers.get(envelope.TYPE_HEADER) != envelope.MESSAGE_TYPES[record["kind"]]:
        return False
    recipient_path = obs.paths.get(record["recipient"]["agent_id"])
    if recipient_path is not None:
        sender = obs.paths.get(record["sender"]["agent_id"]) or obs.agent_name(record["sender"]["agent_id"])
        return headers.get("Task name") == recipient_path and headers.get("Sender") == sender
    return headers.get("Request") == record.get("request_id") if record.get("request_id") else True


def inject_lines(obs: Observations, agent: str, record: Mapping[str, Any]) -> list[TranscriptLine]:
    """The thread/inject_items requests in ``agent``'s transcript that carry the envelope of ``record``."""
    found = []
    for line in obs.transcript(agent):
        if line.dir == "sent" and line.method == "thread/inject_items":
            texts = [item_text(item) for item in line.params.get("items") or []]
            if any(carries(obs, text, record) for text in texts):
                found.append(line)
    return found


def receive_outputs(obs: Observations, agent: str, record_id: str) -> list[tuple[RolloutLine, dict[str, Any]]]:
    """(output line, the record as received) for each receive_messages output holding ``record_id``."""
    found = []
    for _call, output in obs.tool_calls(agent, "receive_messages"):
        data = output_json(output.text()) if output is not None else None
        for received in (data or {}).get("records") or []:
            if received.get("record_id") == record_id:
                found.append((output, received))
    return found


def arrivals(obs: Observations, agent: str, record: Mapping[str, Any]) -> list[tuple[RolloutLine, str]]:
    """Every way ``record`` reached ``agent``'s model, in rollout order: ``(line, "receive_messages")`` for a
    receive output holding it with the exact body, ``(line, "injected")`` for its envelope (the exact body)
    delivered into the thread. Both are the contract's delivery; which one a model used is its choice."""
    found = [(output, "receive_messages") for output, received in receive_outputs(obs, agent, record["record_id"])
             if received.get("body") == record["body"]]
    found += [(line, "injected") for line in obs.rollout(agent)
              if line.record_type == "response_item" and is_incoming(line.payload)
              and carries(obs, line.text(), record)]
    lines = obs.rollout(agent)
    return sorted(found, key=lambda pair: lines.index(pair[0]) if pair[0] in lines else len(lines))


def reply_of(obs: Observations, task: Mapping[str, Any]) -> dict[str, Any]:
    request = obs.core.request(task["request_id"])
    require(request is not None, f"no request row for {task['request_id']}")
    require(request["reply_record_id"], f"request {task['request_id']} has no reply")
    reply = obs.record(request["reply_record_id"])
    return {**reply, "reply_source": request["reply_source"]}


def turn_of_request(obs: Observations, record: Mapping[str, Any]) -> str:
    bindings = obs.bindings_of(record["request_id"])
    require(len(bindings) == 1, f"task {record['request_id']} has {len(bindings)} bindings, not one")
    return bindings[0]["turn_id"]


def result_thread(obs: Observations, host: str, request: TranscriptLine) -> str | None:
    """The thread a thread/start, thread/fork or thread/resume request was answered with."""
    answer = obs.response_to(host, request)
    return ((answer.message.get("result") or {}).get("thread") or {}).get("id") if answer else None


def opened_turn(obs: Observations, host: str, request: TranscriptLine) -> str | None:
    """The turn a turn/start request was answered with."""
    answer = obs.response_to(host, request)
    return ((answer.message.get("result") or {}).get("turn") or {}).get("id") if answer else None
