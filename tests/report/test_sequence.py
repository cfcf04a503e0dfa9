"""The Mermaid sequence diagram of an exchange, from evidence rows and rollouts."""

from __future__ import annotations

from pathlib import Path

from harness.evidence import RolloutIndex
from harness.evidence.core import CoreEvidence
from harness.report import SequenceDiagram
from harness.report.sequence import escape, tool_result
from tests.evidence.exchange import TASK2_ID, THREAD_A, THREAD_B, export, ident, record, stamp, task_exchange


def build(document, **kw) -> SequenceDiagram:
    return SequenceDiagram.build(CoreEvidence.of(document), **kw)


def diagram(tmp_path: Path, **kw) -> SequenceDiagram:
    exchange = task_exchange(**kw)
    exchange.write(tmp_path)
    index = RolloutIndex.load(sorted((tmp_path / "rollouts").rglob("*.jsonl")), root=tmp_path)
    return build(exchange.export, agents=["A", "B"], index=index, thread_agents={THREAD_A: "A", THREAD_B: "B"})


def test_participants_and_steps_in_time_order(tmp_path):
    seq = diagram(tmp_path)
    assert seq.participants == ["A", "core", "adapter", "B"]
    steps = [(s.actor, s.target, s.text) for s in seq.steps]
    assert steps == [
        ("A", "A", "operator prompt starts turn …urn-a1"),
        ("A", "core", 'followup_task to B: "What is 6 × 7? — reply with the number" (rq_000001)'),
        ("core", "adapter", "dispatch rq_000001 to B"),
        ("adapter", "B", "turn/start rq_000001 (start turn …urn-b1)"),
        ("B", "adapter", "turn …urn-b1 completed: done"),
        ("adapter", "core", 'turn outcome as reply done to rq_000001: "42"'),
        ("A", "core", "wait_agent"),
        ("core", "A", "woke: mailbox_activity"),
        ("adapter", "A", "thread/inject_items: reply ix_0000b1"),
        ("A", "A", 'turn …urn-a1 completed: "B says: 42"'),
    ]


def test_mermaid_text_declares_participants_and_arrows(tmp_path):
    text = diagram(tmp_path).mermaid()
    lines = text.splitlines()
    assert lines[:5] == ["sequenceDiagram", "    participant p_A as A", "    participant p_core as core",
                         "    participant p_adapter as adapter", "    participant p_B as B"]
    assert "    p_adapter->>p_B: turn/start rq_000001 (start turn …urn-b1)" in lines
    assert "    p_B-->>p_adapter: turn …urn-b1 completed: done" in lines
    assert "    Note over p_A: operator prompt starts turn …urn-a1" in lines


def test_an_interrupted_turn_and_its_blocked_reply_are_drawn(tmp_path):
    exchange = task_exchange(interrupted_second_task=True)
    exchange.export["evidence"].append({"evidence_id": 9, "record_id": TASK2_ID, "stage": "binding_capture",
                                        "at": "2026-11-30T06:00:01.500Z",
                                        "detail": {"binding_id": "bd_0002", "turn_id": "01a2-turn-b2",
                                                   "turn_status": "interrupted", "reply_status": "blocked"}})
    seq = build(exchange.export, agents=["A", "B"])
    texts = [s.text for s in seq.steps]
    assert texts[-2:] == ["turn …urn-b2 interrupted: blocked",
                          'peerwire reply blocked to rq_000002: "B\'s turn was interrupted."']


def test_bodies_cannot_break_the_diagram():
    body = "line one\nline two; #hash <b>tag</b> " + "x" * 100
    out = escape(body)
    assert "\n" not in out and ";" not in out.replace("#59;", "").replace("#35;", "").replace("#lt;", "").replace(
        "#gt;", "")
    assert out.startswith("line one line two#59; #35;hash #lt;b#gt;tag")
    assert out.endswith("…")


def test_unknown_agents_in_the_export_become_participants():
    info = ident("ix", 1)
    document = export(records=[record(info, "information", ("c", "C"), ("d", "D"), "hi", seq=1)],
                      evidence=[{"evidence_id": 1, "record_id": info, "stage": "admitted", "at": stamp(0),
                                 "detail": {}}])
    seq = build(document, agents=[])
    assert seq.participants == ["C", "core", "adapter"]
    assert "participant p_C as C" in seq.mermaid()


def test_tool_results_are_read_from_both_output_shapes():
    assert tool_result('Wall time: 0.1 seconds\nOutput:\n{"woke":true}') == {"woke": True}
    parts = [{"type": "input_text", "text": "Wall time: 0.1 seconds\nOutput:"},
             {"type": "input_text", "text": '{"state": "interrupt_requested"}'}]
    assert tool_result(parts) == {"state": "interrupt_requested"}
    assert tool_result("plain text") is None and tool_result(None) is None


def test_an_interrupt_call_draws_the_turn_interrupt_right_after_it(tmp_path):
    exchange = task_exchange()
    exchange.rollout_a.call("01a2-turn-a1", "call_int", "interrupt_agent", {"target": "B"},
                            {"target": {"agent_id": "b", "name": "B"}, "state": "interrupt_requested",
                             "previous_status": "active", "turn_id": "01a2-turn-b1"})
    exchange.write(tmp_path)
    index = RolloutIndex.load(sorted((tmp_path / "rollouts").rglob("*.jsonl")), root=tmp_path)
    seq = build(exchange.export, agents=["A", "B"], index=index, thread_agents={THREAD_A: "A", THREAD_B: "B"})
    steps = [(s.actor, s.target, s.text) for s in seq.steps]
    start = steps.index(("A", "core", "interrupt_agent B"))
    assert steps[start + 1:start + 3] == [("adapter", "B", "turn/interrupt (turn …urn-b1)"),
                                          ("core", "A", "interrupt_requested (turn …urn-b1)")]


def test_a_steered_task_is_drawn_as_a_steer():
    exchange = task_exchange()
    accepted = next(e for e in exchange.export["evidence"] if e["stage"] == "provider_accepted")
    accepted["detail"] = {**accepted["detail"], "via": "turn/steer"}
    texts = [s.text for s in build(exchange.export, agents=["A", "B"]).steps]
    assert "turn/steer rq_000001 (steer into turn …urn-b1)" in texts
