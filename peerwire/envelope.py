"""The envelope a receiving model sees around a message body, rendered from the contract's grammar.

::

    Message Type: NEW_TASK | MESSAGE | FINAL_ANSWER
    Request: <request_id>            (tasks and their answers)
    Sender: <name> (<agent_id>)
    <Header>: <value>                (how to answer a task, a reply's status, a notice's code)
    Payload:
    <body exactly as sent>

The headers, their order, their values and when each is present are
``contracts/envelope.json`` (form ``peer``; the collaboration tree's form is
``collab``, :func:`peerwire.collab.head`); this module only fills them in. The
payload is last so the body is never altered or followed by anything.

A task reaches Codex as a structured task item, not one rendered text: the
headers (:func:`head`: type, request id, sender and how to answer) and the
literal body are separate input parts of one user message, so a model or a
reader gets the peer's text exactly as sent, apart from the host's routing
metadata. Joined with a line break, as the Responses API joins the parts of a
message, they are exactly :func:`render`, so every envelope reader reads both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .contract_data import ENVELOPE, table
from .lifecycle import Kind

_GRAMMAR = table(ENVELOPE)
TYPE_HEADER = _GRAMMAR["forms"]["peer"]["headers"][0]["name"]
"""The first header of every envelope, peer and collaboration alike."""
PAYLOAD_LINE = _GRAMMAR["payload_line"]
MESSAGE_TYPES = {Kind(kind): name for kind, name in _GRAMMAR["message_types"].items()}
"""The message type a receiving model reads for each kind of record."""


def render(record: dict[str, Any]) -> str:
    """The envelope text of a mailbox record (see :func:`peerwire.store.record_view`)."""
    return head(record) + "\n" + record["body"]


def head(record: dict[str, Any]) -> str:
    """The envelope of a record without its body: every header, then ``Payload:`` (the routing metadata)."""
    sender = record["sender"]
    fields = {"message_type": MESSAGE_TYPES[record["kind"]], "request_id": record.get("request_id"),
              "sender_name": sender["name"], "sender_agent_id": sender.get("agent_id"),
              "status": record.get("status"), "code": record.get("code")}
    return form_head("peer", record["kind"], fields)


def form_head(form: str, kind: str | None, fields: Mapping[str, Any]) -> str:
    """The header lines of envelope ``form`` for a record of ``kind`` with ``fields``, then the payload line."""
    lines = [f"{header['name']}{_GRAMMAR['header_separator']}{header['value'].format_map(fields)}"
             for header in _GRAMMAR["forms"][form]["headers"] if _applies(header.get("when"), kind, fields)]
    return _GRAMMAR["line_break"].join([*lines, PAYLOAD_LINE])


def _applies(when: Mapping[str, Any] | None, kind: str | None, fields: Mapping[str, Any]) -> bool:
    if when is None:
        return True
    if "kind" in when:
        return kind == when["kind"]
    return bool(fields.get(when["field"])) != bool(when.get("absent"))


def parse(text: str) -> dict[str, Any]:
    """Split an envelope into its headers and the exact payload (inverse of :func:`render`, and of
    :func:`peerwire.collab.render`)."""
    head, sep, payload = text.partition(f"\n{PAYLOAD_LINE}\n")
    if not sep or not head.startswith(f"{TYPE_HEADER}: "):
        raise ValueError("not a peerwire envelope")
    headers = {}
    for line in head.split("\n"):
        key, _, value = line.partition(": ")
        headers[key] = value
    return {"headers": headers, "payload": payload}
