"""What a strict MCP client accepts: every record a receive returns validates against its outputSchema.

OpenCode's MCP client (the TypeScript SDK) checks a tool's structured content
against the tool's outputSchema and turns a mismatch into an error the model
sees (``MCP error -32602: Structured content does not match the tool's output
schema``); Codex shows it unchecked. OpenCode as the requester of the interrupt
scenario found one: the blocked reply peerwire publishes for an interrupted turn
carries its ``code``, which the reply record's schema did not allow. Every
kind of record a requester or a recipient can receive is built here the way the
core builds it, and a receive of each must validate.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from peerwire.contract import validate_output
from peerwire.operations import _page
from peerwire.store import Store


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "peerwire.db")


def turn_outcome(store: Store, a, b, status: str, code: str | None, *, by_recipient: bool) -> None:
    """A task of A's bound to B's turn, whose outcome peerwire publishes (from B, or as peerwire)."""
    request_id = store.mailbox.admit_task(a, b, f"a task that ends {status}")["request_id"]
    binding = store.bindings.bind(request_id, store.mailbox.claim_for_dispatch(request_id), b, 1, "ses_x",
                                  f"turn-{status}", via="session/prompt")
    store.bindings.capture_outcome(binding, {"turn_id": f"turn-{status}", "turn_status": status, "reply_status": status,
                                             "text": "why", "attributed_to_recipient": by_recipient, "code": code})
    store.bindings.publish_outcome(binding, b if by_recipient else None, status, "why", code=code)


def receive(store: Store, agent) -> dict:
    """receive_messages's result, as the core's operation shapes it."""
    return _page(store.mailbox.receive(agent, limit=100), timed_out=False)


@pytest.mark.parametrize("status, code, by_recipient", [
    ("blocked", "turn_interrupted", False),   # interrupt_agent: a Codex turn/interrupt or an ACP session/cancel
    ("failed", "prompt_error", False),        # an ACP prompt answered with an error
    ("failed", "turn_failed", False),
    ("done", None, True),                     # the turn's final answer, from the recipient
])
def test_a_reply_peerwire_publishes_from_a_turn_validates_for_a_strict_client(store, status, code, by_recipient):
    a, _ = store.registry.register_agent("A", "acp")
    b, _ = store.registry.register_agent("B", "codex")
    turn_outcome(store, a, b, status, code, by_recipient=by_recipient)
    result = receive(store, a)
    (record,) = result["records"]
    assert (record["kind"], record["status"], record.get("code")) == ("reply", status, code)
    assert validate_output("receive_messages", result) == []


def test_every_kind_of_record_validates_in_one_receive(store):
    a, _ = store.registry.register_agent("A", "acp")
    b, _ = store.registry.register_agent("B", "acp")
    store.mailbox.admit_information(b, a, "fyi")
    explicit = store.mailbox.admit_task(a, b, "answer me")["request_id"]
    store.mailbox.admit_reply(b, explicit, "done", "answered")
    store.mailbox.admit_task(b, a, "work for A")
    turn_outcome(store, a, b, "blocked", "turn_interrupted", by_recipient=False)
    result = receive(store, a)
    assert sorted({r["kind"] for r in result["records"]}) == ["information", "reply", "task"]
    assert validate_output("receive_messages", result) == []
