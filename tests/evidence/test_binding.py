"""Binding core records to rollouts: exact matches, and explicit reasons when there is none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.evidence import UNVERIFIED, RolloutIndex
from harness.evidence.binding import bind_records as bind_core
from harness.evidence.core import CoreEvidence, violations
from peerwire import envelope

from .exchange import (A_ID, B_ID, BINDING_ID, BLOCKED_ID, CALL_TASK, MODEL, REPLY_ID, ROLLOUT_A, ROLLOUT_B, TASK_ID,
                       THREAD_A, THREAD_B, TURN_A, TURN_B, ident, record, task_exchange)


def setup(tmp_path: Path, **kw):
    exchange = task_exchange(**kw)
    exchange.write(tmp_path)
    index = RolloutIndex.load(sorted((tmp_path / "rollouts").rglob("*.jsonl")), root=tmp_path)
    return exchange, index


def by_id(bindings):
    return {b.interaction_id: b for b in bindings}


def bind_records(document, index):
    return bind_core(CoreEvidence.of(document), index)


def test_the_synthetic_exchange_is_a_valid_export():
    assert violations(task_exchange().export) == []
    assert violations(task_exchange(interrupted_second_task=True).export) == []


def test_a_task_binds_to_its_function_call_and_output_lines(tmp_path):
    exchange, index = setup(tmp_path, effort_a="low")
    task = by_id(bind_records(exchange.export, index))[TASK_ID]
    assert task.bound and task.source == "tool_call"
    assert (task.agent, task.thread_id, task.turn_id, task.call_id) == ("A", THREAD_A, TURN_A, CALL_TASK)
    assert task.call == f"rollouts/A/{ROLLOUT_A}:{exchange.lines['task_call']}"
    assert task.output == f"rollouts/A/{ROLLOUT_A}:{exchange.lines['task_output']}"
    assert (task.model, task.effort, task.turn_status) == (MODEL, "low", "completed")
    (delivery,) = task.deliveries
    assert (delivery.binding_id, delivery.agent, delivery.turn_id, delivery.via) == (BINDING_ID, "B", TURN_B,
                                                                                     "turn/start")
    assert delivery.started == f"rollouts/B/{ROLLOUT_B}:{exchange.lines['b_start']}"
    # The NEW_TASK envelope B's turn started with is where the task surfaced.
    assert task.delivered == (f"rollouts/B/{ROLLOUT_B}:{exchange.lines['b_task_message']}",)
    assert task.notes == ()


def test_a_reply_from_a_turn_outcome_binds_through_the_binding_row(tmp_path):
    exchange, index = setup(tmp_path, effort_b=None)
    reply = by_id(bind_records(exchange.export, index))[REPLY_ID]
    assert reply.bound and reply.source == "provider_binding" and reply.call_id is None
    assert (reply.agent, reply.thread_id, reply.turn_id, reply.binding_id) == ("B", THREAD_B, TURN_B, BINDING_ID)
    assert reply.final == f"rollouts/B/{ROLLOUT_B}:{exchange.lines['b_final']}"
    assert reply.effort == UNVERIFIED  # B's turn context omitted it
    assert reply.delivered == (f"rollouts/A/{ROLLOUT_A}:{exchange.lines['a_inject']}",)


def test_an_interrupted_outcome_binds_to_where_the_turn_ended(tmp_path):
    exchange, index = setup(tmp_path, interrupted_second_task=True)
    blocked = by_id(bind_records(exchange.export, index))[BLOCKED_ID]
    assert blocked.source == "provider_binding" and blocked.turn_status == "interrupted"
    assert blocked.final == f"rollouts/B/{ROLLOUT_B}:{exchange.lines['b2_abort']}"


def receipt_of(document, record_id):
    row = next(r for r in document["records"] if r["record_id"] == record_id)
    return row, dict(row["tool_receipt"])


def test_a_receipt_naming_another_turn_is_unbound(tmp_path):
    exchange, index = setup(tmp_path)
    row, receipt = receipt_of(exchange.export, TASK_ID)
    row["tool_receipt"] = {**receipt, "turn_id": "some-other-turn"}
    task = by_id(bind_records(exchange.export, index))[TASK_ID]
    assert task.source is None
    assert task.unbound == f"call {CALL_TASK} is in turn {TURN_A}, the receipt says some-other-turn"


def test_a_receipt_naming_another_agents_thread_is_unbound(tmp_path):
    exchange, index = setup(tmp_path)
    row, receipt = receipt_of(exchange.export, TASK_ID)
    row["tool_receipt"] = {**receipt, "thread_id": THREAD_B}
    task = by_id(bind_records(exchange.export, index))[TASK_ID]
    assert task.unbound == f"receipt thread {THREAD_B} belongs to B, not the sender A"


def test_a_call_missing_from_the_rollouts_is_unbound(tmp_path):
    exchange, index = setup(tmp_path)
    row, receipt = receipt_of(exchange.export, TASK_ID)
    row["tool_receipt"] = {**receipt, "call_id": "call_nowhere"}
    assert by_id(bind_records(exchange.export, index))[TASK_ID].unbound == "no rollout records call call_nowhere"


def test_a_call_of_the_wrong_tool_is_unbound(tmp_path):
    exchange, index = setup(tmp_path)
    row, _ = receipt_of(exchange.export, TASK_ID)
    row.update(kind="information", state="provider_visible")
    del row["request_id"]
    unbound = by_id(bind_records(exchange.export, index))[TASK_ID].unbound
    assert unbound == f"call {CALL_TASK} is mcp__peerwire/followup_task, a information comes from send_message"


def test_a_model_disagreement_is_a_note_not_a_failure(tmp_path):
    exchange, index = setup(tmp_path)
    row, receipt = receipt_of(exchange.export, TASK_ID)
    row["tool_receipt"] = {**receipt, "model": "other-model"}
    task = by_id(bind_records(exchange.export, index))[TASK_ID]
    assert task.bound and task.notes == (f"receipt model other-model differs from the rollout's {MODEL}",)


def test_records_without_receipt_or_binding_say_why(tmp_path):
    exchange, index = setup(tmp_path)
    cli, note, hello, unbound = ident("ix", 0xc1), ident("ix", 0xd1), ident("ix", 0xd2), ident("rq", 0xf)
    exchange.export["records"] += [
        record(cli, "information", (A_ID, "A"), (B_ID, "B"), "from the CLI", seq=10),
        record(note, "notice", (None, "peerwire"), (A_ID, "A"), "uncertain", seq=11, request_id=unbound,
               code="delivery_uncertain"),
        record(hello, "notice", (None, "peerwire"), (A_ID, "A"), "hello", seq=12, code="hello"),
    ]
    assert violations(exchange.export) == []
    found = by_id(bind_records(exchange.export, index))
    assert found[cli].unbound == "no tool receipt: created outside an MCP tool call (operator or CLI)"
    assert found[note].unbound == (f"peerwire notice about {unbound} with no provider binding "
                                   "(nothing reached a turn)")
    assert found[hello].unbound == "peerwire notice not tied to a tool call or a provider turn"
    assert all(found[i].source is None for i in (cli, note, hello))


def test_a_binding_whose_turn_is_in_no_rollout_is_unbound(tmp_path):
    exchange, index = setup(tmp_path)
    exchange.export["bindings"][0]["turn_id"] = "lost-turn"
    found = by_id(bind_records(exchange.export, index))
    assert found[REPLY_ID].unbound == f"binding {BINDING_ID}: turn lost-turn is in no rollout"
    assert found[TASK_ID].bound  # the task itself still binds to A's call
    assert found[TASK_ID].deliveries[0].unbound == f"binding {BINDING_ID}: turn lost-turn is in no rollout"


def test_to_json_round_trips_through_json(tmp_path):
    exchange, index = setup(tmp_path)
    for binding in bind_records(exchange.export, index):
        data = binding.to_json()
        assert json.loads(json.dumps(data)) == data
        assert data["interaction_id"] == binding.interaction_id


REFERENCE_RENDER, REFERENCE_HEAD = envelope.render, envelope.head


def _sender_without_id(record):
    return REFERENCE_RENDER(record).replace(f" ({record['sender']['agent_id']})", "", 1)


def _headers_reordered(record):
    head, body = REFERENCE_HEAD(record).split("\n"), record["body"]
    head[1], head[2] = head[2], head[1]
    return "\n".join([*head, body])


def _status_dropped(record):
    return "\n".join(line for line in REFERENCE_RENDER(record).split("\n") if not line.startswith("Status: "))


def _answer_dropped(record):
    return "\n".join(line for line in REFERENCE_RENDER(record).split("\n") if not line.startswith("Answer: "))


def _body_with_a_final_line_break(record):
    return REFERENCE_RENDER(record) + "\n"


def _reply_announced_as_a_message(record):
    return REFERENCE_RENDER(record).replace("FINAL_ANSWER", "MESSAGE", 1)


# A core whose renderer deviates from the contract's grammar in one way each. The reference's own renderer is
# replaced by the same mutant, as a change to the reference would: the judge must still not find the record
# delivered, because it judges by the contract (contracts/envelope.json), not by the reference's code.
PLANTED = {"sender without its id": (_sender_without_id, TASK_ID), "headers reordered": (_headers_reordered, TASK_ID),
           "no answer instructions": (_answer_dropped, TASK_ID), "body changed": (_body_with_a_final_line_break, TASK_ID),
           "no status": (_status_dropped, REPLY_ID), "wrong message type": (_reply_announced_as_a_message, REPLY_ID)}


@pytest.mark.parametrize("planted", sorted(PLANTED))
def test_a_planted_envelope_deviation_is_not_found_delivered(tmp_path, monkeypatch, planted):
    mutant, record_id = PLANTED[planted]

    def render(record):
        return mutant(record) if record["record_id"] == record_id else REFERENCE_RENDER(record)

    monkeypatch.setattr(envelope, "render", render)
    exchange, index = setup(tmp_path, render=render)
    bound = by_id(bind_records(exchange.export, index))
    assert bound[record_id].delivered == (), f"{planted}: the judge accepted an envelope the contract does not"
    other = REPLY_ID if record_id == TASK_ID else TASK_ID
    assert bound[other].delivered, "the record rendered as the contract says is still found"
