"""Binding core records to rollouts: exact matches, and explicit reasons when there is none."""

from __future__ import annotations

import json
from pathlib import Path

from harness.evidence import UNVERIFIED, RolloutIndex, bind_records

from .exchange import (BINDING_ID, CALL_TASK, MODEL, REPLY_ID, ROLLOUT_A, ROLLOUT_B, TASK_ID, THREAD_A, THREAD_B,
                       TURN_A, TURN_B, record, task_exchange)


def setup(tmp_path: Path, **kw):
    exchange = task_exchange(**kw)
    exchange.write(tmp_path)
    index = RolloutIndex.load(sorted((tmp_path / "rollouts").rglob("*.jsonl")), root=tmp_path)
    return exchange, index


def by_id(bindings):
    return {b.interaction_id: b for b in bindings}


def test_a_task_binds_to_its_function_call_and_output_lines(tmp_path):
    exchange, index = setup(tmp_path, effort_a="low")
    task = by_id(bind_records(exchange.dump, index))[TASK_ID]
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
    reply = by_id(bind_records(exchange.dump, index))[REPLY_ID]
    assert reply.bound and reply.source == "provider_binding" and reply.call_id is None
    assert (reply.agent, reply.thread_id, reply.turn_id, reply.binding_id) == ("B", THREAD_B, TURN_B, BINDING_ID)
    assert reply.final == f"rollouts/B/{ROLLOUT_B}:{exchange.lines['b_final']}"
    assert reply.effort == UNVERIFIED  # B's turn context omitted it
    assert reply.delivered == (f"rollouts/A/{ROLLOUT_A}:{exchange.lines['a_inject']}",)


def test_an_interrupted_outcome_binds_to_where_the_turn_ended(tmp_path):
    exchange, index = setup(tmp_path, interrupted_second_task=True)
    blocked = by_id(bind_records(exchange.dump, index))["ix_reply002"]
    assert blocked.source == "provider_binding" and blocked.turn_status == "interrupted"
    assert blocked.final == f"rollouts/B/{ROLLOUT_B}:{exchange.lines['b2_abort']}"


def receipt_of(dump, interaction_id):
    row = next(r for r in dump["interactions"] if r["interaction_id"] == interaction_id)
    return row, json.loads(row["tool_receipt"])


def test_a_receipt_naming_another_turn_is_unbound(tmp_path):
    exchange, index = setup(tmp_path)
    row, receipt = receipt_of(exchange.dump, TASK_ID)
    row["tool_receipt"] = json.dumps({**receipt, "turn_id": "some-other-turn"})
    task = by_id(bind_records(exchange.dump, index))[TASK_ID]
    assert task.source is None
    assert task.unbound == f"call {CALL_TASK} is in turn {TURN_A}, the receipt says some-other-turn"


def test_a_receipt_naming_another_agents_thread_is_unbound(tmp_path):
    exchange, index = setup(tmp_path)
    row, receipt = receipt_of(exchange.dump, TASK_ID)
    row["tool_receipt"] = json.dumps({**receipt, "thread_id": THREAD_B})
    task = by_id(bind_records(exchange.dump, index))[TASK_ID]
    assert task.unbound == f"receipt thread {THREAD_B} belongs to B, not the sender A"


def test_a_call_missing_from_the_rollouts_is_unbound(tmp_path):
    exchange, index = setup(tmp_path)
    row, receipt = receipt_of(exchange.dump, TASK_ID)
    row["tool_receipt"] = json.dumps({**receipt, "call_id": "call_nowhere"})
    assert by_id(bind_records(exchange.dump, index))[TASK_ID].unbound == "no rollout records call call_nowhere"


def test_a_call_of_the_wrong_tool_is_unbound(tmp_path):
    exchange, index = setup(tmp_path)
    row, _ = receipt_of(exchange.dump, TASK_ID)
    row["kind"] = "information"
    unbound = by_id(bind_records(exchange.dump, index))[TASK_ID].unbound
    assert unbound == f"call {CALL_TASK} is mcp__peerwire/followup_task, a information comes from send_message"


def test_a_model_disagreement_is_a_note_not_a_failure(tmp_path):
    exchange, index = setup(tmp_path)
    row, receipt = receipt_of(exchange.dump, TASK_ID)
    row["tool_receipt"] = json.dumps({**receipt, "model": "other-model"})
    task = by_id(bind_records(exchange.dump, index))[TASK_ID]
    assert task.bound and task.notes == (f"receipt model other-model differs from the rollout's {MODEL}",)


def test_records_without_receipt_or_binding_say_why(tmp_path):
    exchange, index = setup(tmp_path)
    exchange.dump["interactions"] += [
        record("ix_cli00001", "information", ("aaaaaaaa-0000-4000-8000-000000000001", "A"),
               ("bbbbbbbb-0000-4000-8000-000000000002", "B"), "from the CLI", seq=10),
        record("ix_note0001", "notice", (None, "peerwire"), ("aaaaaaaa-0000-4000-8000-000000000001", "A"),
               "uncertain", seq=11, request_id="rq_unbound", notice_code="delivery_uncertain"),
        record("ix_note0002", "notice", (None, "peerwire"), ("aaaaaaaa-0000-4000-8000-000000000001", "A"),
               "hello", seq=12),
    ]
    found = by_id(bind_records(exchange.dump, index))
    assert found["ix_cli00001"].unbound == "no tool receipt: created outside an MCP tool call (operator or CLI)"
    assert found["ix_note0001"].unbound == ("peerwire notice about rq_unbound with no provider binding "
                                            "(nothing reached a turn)")
    assert found["ix_note0002"].unbound == "peerwire notice not tied to a tool call or a provider turn"
    assert all(found[i].source is None for i in ("ix_cli00001", "ix_note0001", "ix_note0002"))


def test_a_binding_whose_turn_is_in_no_rollout_is_unbound(tmp_path):
    exchange, index = setup(tmp_path)
    exchange.dump["bindings"][0]["turn_id"] = "lost-turn"
    found = by_id(bind_records(exchange.dump, index))
    assert found[REPLY_ID].unbound == f"binding {BINDING_ID}: turn lost-turn is in no rollout"
    assert found[TASK_ID].bound  # the task itself still binds to A's call
    assert found[TASK_ID].deliveries[0].unbound == f"binding {BINDING_ID}: turn lost-turn is in no rollout"


def test_to_json_round_trips_through_json(tmp_path):
    exchange, index = setup(tmp_path)
    for binding in bind_records(exchange.dump, index):
        data = binding.to_json()
        assert json.loads(json.dumps(data)) == data
        assert data["interaction_id"] == binding.interaction_id
