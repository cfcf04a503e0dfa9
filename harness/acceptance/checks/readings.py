"""Readings several judgements share: envelopes in texts, inject requests, receive outputs, replies, turns.

Each reads the run's observations and answers one question; none decides a verdict
on its own (those that find nothing raise :class:`~.kernel.Failed` with what is missing).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.evidence.envelope_grammar import collab_fields, deviations, peer_fields, read
from harness.evidence.rollouts import RolloutLine
from harness.evidence.responses import MAIL_TYPES, is_incoming, item_text

from ..observations import Observations, TranscriptLine, output_json
from .kernel import require


def expected_envelope(obs: Observations, record: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The envelope form ``record`` travels in, and the fields it must carry.

    Between agents of a collaboration tree the envelope (form ``collab``) names no
    request but the recipient's and the sender's paths; any other record travels in
    the ``peer`` form, with its type, request, sender, and status or notice code.
    """
    recipient_path = obs.paths.get(record["recipient"]["agent_id"])
    if recipient_path is not None:
        sender = obs.paths.get(record["sender"]["agent_id"]) or obs.agent_name(record["sender"]["agent_id"])
        return "collab", collab_fields(record, recipient_path, sender)
    return "peer", peer_fields(record)


def carries(obs: Observations, text: str, record: Mapping[str, Any]) -> bool:
    """Whether ``text`` is exactly the envelope the contract prescribes for ``record``: every header the
    grammar names for it, with the record's values, and the exact body."""
    parsed = read(text)
    if parsed is None or parsed.payload != record["body"]:
        return False
    return not deviations(parsed, *_expected(obs, record))


def _expected(obs: Observations, record: Mapping[str, Any]) -> tuple[str, Mapping[str, Any], dict[str, Any]]:
    form, fields = expected_envelope(obs, record)
    return form, record, fields


def why_not_carried(obs: Observations, texts: list[str], record: Mapping[str, Any]) -> str:
    """Why none of ``texts`` is ``record``'s envelope: how the nearest one (an envelope with the exact body, else
    any envelope) departs from the grammar's, or that none is an envelope."""
    parsed = [found for found in map(read, texts) if found is not None]
    nearest = [found for found in parsed if found.payload == record["body"]] or parsed
    if not nearest:
        return "no text is an envelope by the contract's grammar"
    return "the envelope departs from the contract's: " + "; ".join(deviations(nearest[0], *_expected(obs, record)))


def texts_of(item: Mapping[str, Any]) -> list[str]:
    """The texts an input item may carry an envelope in: its whole text, and for a message of several parts
    each part joined to the next. An ACP prompt is one message whose parts are each waiting record's head and
    body, then the prompt's own text: a record's envelope is two neighbouring parts, not the whole."""
    texts = [item_text(item)]
    content = item.get("content") if item.get("type") in MAIL_TYPES else None
    if isinstance(content, list):
        parts = [part["text"] for part in content if isinstance(part, Mapping) and isinstance(part.get("text"), str)]
        texts += [f"{head}\n{body}" for head, body in zip(parts, parts[1:])]
    return texts


def carried_by(obs: Observations, item: Mapping[str, Any], record: Mapping[str, Any]) -> bool:
    """Whether the input item ``item`` carries ``record``'s envelope (see :func:`texts_of`)."""
    return any(carries(obs, text, record) for text in texts_of(item))


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
    delivered into the thread, ``(line, "next prompt")`` for it carried in an ACP agent's next prompt. All are
    the contract's delivery; which one a model used is its choice (or, without inject, its kind's limit)."""
    found = [(output, "receive_messages") for output, received in receive_outputs(obs, agent, record["record_id"])
             if received.get("body") == record["body"]]
    found += [(line, "next prompt" if line.payload.get("acp_prompt") else "injected") for line in obs.rollout(agent)
              if line.record_type == "response_item" and is_incoming(line.payload)
              and carried_by(obs, line.payload, record)]
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
