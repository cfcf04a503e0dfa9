"""The envelope a receiving model sees around a message body.

::

    Message Type: NEW_TASK | MESSAGE | FINAL_ANSWER
    Request: <request_id>            (tasks and their answers)
    Sender: <name> (<agent_id>)
    <Header>: <value>                (how to answer a task, a reply's status, a notice's code)
    Payload:
    <body exactly as sent>

The payload is last so the body is never altered or followed by anything.

A task reaches Codex as a structured task item, not one rendered text: the
headers (:func:`head`: type, request id, sender and how to answer) and the
literal body are separate input parts of one user message, so a model or a
reader gets the peer's text exactly as sent, apart from the host's routing
metadata. Joined with a line break, as the Responses API joins the parts of a
message, they are exactly :func:`render`, so every envelope reader reads both.
"""

from __future__ import annotations

from typing import Any

from .lifecycle import Kind

TYPE_HEADER = "Message Type"
"""The first header of every envelope, peer and collaboration alike."""
MESSAGE_TYPES = {Kind.TASK: "NEW_TASK", Kind.INFORMATION: "MESSAGE", Kind.REPLY: "FINAL_ANSWER",
                 Kind.NOTICE: "MESSAGE"}
"""The message type a receiving model reads for each kind of record."""


def render(record: dict[str, Any]) -> str:
    """The envelope text of a mailbox record (see :func:`peerwire.store.record_view`)."""
    return head(record) + "\n" + record["body"]


def head(record: dict[str, Any]) -> str:
    """The envelope of a record without its body: every header, then ``Payload:`` (the routing metadata)."""
    kind = record["kind"]
    lines = [f"{TYPE_HEADER}: {MESSAGE_TYPES[kind]}"]
    request_id = record.get("request_id")
    if request_id:
        lines.append(f"Request: {request_id}")
    sender = record["sender"]
    lines.append(f"Sender: {sender['name']} ({sender['agent_id']})" if sender.get("agent_id")
                 else f"Sender: {sender['name']}")
    if kind == Kind.TASK:
        lines.append(f"Answer: call the reply tool with request_id {request_id} and status done, blocked or "
                     "failed; if you finish this turn without it, your final answer is sent as the reply")
    elif kind == Kind.REPLY:
        lines.append(f"Status: {record['status']}")
    if record.get("code"):
        lines.append(f"Notice: {record['code']}")
    lines.append("Payload:")
    return "\n".join(lines)


def parse(text: str) -> dict[str, Any]:
    """Split an envelope into its headers and the exact payload (inverse of :func:`render`, and of
    :func:`peerwire.collab.render`)."""
    head, sep, payload = text.partition("\nPayload:\n")
    if not sep or not head.startswith(f"{TYPE_HEADER}: "):
        raise ValueError("not a peerwire envelope")
    headers = {}
    for line in head.split("\n"):
        key, _, value = line.partition(": ")
        headers[key] = value
    return {"headers": headers, "payload": payload}
