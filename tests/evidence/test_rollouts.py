"""RolloutIndex over rollout files in the format of the pinned Codex."""

from __future__ import annotations

import json
from pathlib import Path

from harness.evidence import UNVERIFIED, Location, RolloutIndex

from .exchange import (ANSWER, CALL_TASK, CALL_WAIT, FINAL_A, MODEL, PROMPT_A, ROLLOUT_A, ROLLOUT_B, TASK_BODY,
                       THREAD_A, THREAD_B, TURN_A, TURN_B, TURN_B2, Rollout, task_exchange)


def load(tmp_path: Path, **kw) -> tuple[RolloutIndex, dict[str, int]]:
    exchange = task_exchange(**kw)
    exchange.write(tmp_path)
    files = sorted((tmp_path / "rollouts").rglob("*.jsonl"))
    return RolloutIndex.load(files, root=tmp_path), exchange.lines


def test_threads_and_turns_keep_their_lines_model_and_effort(tmp_path):
    index, lines = load(tmp_path, effort_a="low", effort_b=None)
    assert set(index.threads) == {THREAD_A, THREAD_B}
    assert index.threads[THREAD_A].files == [f"rollouts/A/{ROLLOUT_A}"]
    assert index.threads[THREAD_A].cli_version == "0.171.0"
    (turn_a,) = index.thread_turns(THREAD_A)
    assert (turn_a.turn_id, turn_a.model, turn_a.effort, turn_a.status) == (TURN_A, MODEL, "low", "completed")
    assert turn_a.started == Location(f"rollouts/A/{ROLLOUT_A}", lines["a_start"])
    assert turn_a.ended == Location(f"rollouts/A/{ROLLOUT_A}", lines["a_complete"])
    assert turn_a.trigger == "operator" and turn_a.final_message == FINAL_A
    (turn_b,) = index.thread_turns(THREAD_B)
    # The rollout's turn_context has no effort: the index must not invent one.
    assert turn_b.effort == UNVERIFIED and turn_b.model == MODEL
    assert turn_b.trigger == "peerwire_task" and turn_b.parent_turn_id == TURN_A


def test_tool_calls_carry_call_and_output_lines(tmp_path):
    index, lines = load(tmp_path)
    task = index.call(CALL_TASK)
    assert task is not None
    assert (task.namespace, task.name, task.tool) == ("mcp__peerwire", "followup_task", "mcp__peerwire/followup_task")
    assert (task.thread_id, task.turn_id) == (THREAD_A, TURN_A)
    assert str(task.call) == f"rollouts/A/{ROLLOUT_A}:{lines['task_call']}"
    assert str(task.output_at) == f"rollouts/A/{ROLLOUT_A}:{lines['task_output']}"
    assert task.parsed_arguments() == {"target": "B", "message": TASK_BODY}
    assert task.mcp_status == "completed"
    assert [c.call_id for c in index.tool_calls(thread_id=THREAD_A)] == [CALL_TASK, CALL_WAIT]
    assert [c.call_id for c in index.tool_calls(name="wait_agent")] == [CALL_WAIT]


def test_interrupted_and_failed_turns_have_their_status(tmp_path):
    index, lines = load(tmp_path, interrupted_second_task=True)
    turn = index.turn(THREAD_B, TURN_B2)
    assert turn is not None and turn.status == "interrupted" and turn.abort_reason == "interrupted"
    assert turn.ended == Location(f"rollouts/B/{ROLLOUT_B}", lines["b2_abort"])
    rollout = Rollout("t-failed")
    rollout.meta()
    rollout.start("turn-f", "operator", effort="low")
    rollout.complete("turn-f", None, error='{"error": {"message": "no rule"}}')
    rollout.start("turn-open", "operator", effort="low")
    path = rollout.write(tmp_path / "failed.jsonl")
    failed = RolloutIndex.load([path], root=tmp_path)
    assert failed.turn("t-failed", "turn-f").status == "failed"
    assert failed.turn("t-failed", "turn-f").error == '{"error": {"message": "no rule"}}'
    assert failed.turn("t-failed", "turn-open").status == "incomplete"


def test_a_call_without_output_is_kept_without_one(tmp_path):
    rollout = Rollout("t-cut")
    rollout.meta()
    rollout.start("turn-1", "operator", effort=None)
    rollout.call("turn-1", "call_x", "wait_agent", {}, None)
    rollout.abort("turn-1")
    index = RolloutIndex.load([rollout.write(tmp_path / "r.jsonl")], root=tmp_path)
    call = index.call("call_x")
    assert call is not None and call.output is None and call.output_at is None


def test_occurrences_match_decoded_and_embedded_json_text(tmp_path):
    index, lines = load(tmp_path)
    # "×" and "—" are written unescaped here but the arguments are JSON inside JSON.
    found = index.occurrences(TASK_BODY, thread_id=THREAD_A)
    at_lines = {o.at.line for o in found}
    assert lines["task_call"] in at_lines and lines["task_output"] not in at_lines
    assert {o.at.line for o in index.occurrences(PROMPT_A)} == {lines["a_prompt"]}
    assert index.occurrences("") == []
    outputs = index.occurrences("mailbox_activity", record_types=("response_item",))
    assert [o.at.line for o in outputs] == [lines["wait_output"]]


def test_final_messages_per_turn(tmp_path):
    index, lines = load(tmp_path)
    finals = [(t.thread_id, t.turn_id, text) for t, text in index.final_messages()]
    assert finals == [(THREAD_A, TURN_A, FINAL_A), (THREAD_B, TURN_B, ANSWER)]
    message = index.message("msg_b_final")
    assert message is not None and message.phase == "final_answer" and message.at.line == lines["b_final"]


def test_broken_lines_are_problems_not_errors(tmp_path):
    path = tmp_path / "r.jsonl"
    good = {"timestamp": "2026-11-30T06:00:00.000Z", "type": "session_meta", "payload": {"id": "t1"}}
    path.write_text(json.dumps(good) + "\n" + '{"timestamp": "x", "type": "respo' + "\n[1, 2]\n", encoding="utf-8")
    index = RolloutIndex.load([path])
    assert set(index.threads) == {"t1"}
    cut, not_a_record = index.problems
    assert cut.startswith(f"{path.as_posix()}:2: not JSON (")
    assert not_a_record == f"{path.as_posix()}:3: not a rollout record"


def test_injected_items_between_turns_belong_to_a_context_only_turn(tmp_path):
    # What Codex records for thread/inject_items on an idle thread (verified on 0.171).
    rollout = Rollout("t-idle")
    rollout.meta()
    rollout.add("turn_context", {"turn_id": "auto-compact-0", "model": MODEL})
    rollout.message("auto-compact-0", "user", "Message Type: MESSAGE\nSender: A\nPayload:\nhi")
    rollout.start("turn-1", "operator", effort="low")
    index = RolloutIndex.load([rollout.write(tmp_path / "r.jsonl")], root=tmp_path)
    assert [(t.turn_id, t.status) for t in index.thread_turns("t-idle")] == [("auto-compact-0", "context_only"),
                                                                             ("turn-1", "incomplete")]
    (occurrence,) = index.occurrences("Payload:\nhi")
    assert occurrence.turn_id == "auto-compact-0"


def test_lines_carry_their_thread_and_the_turn_running_when_written(tmp_path):
    # The injected item carries a pseudo-turn (turn_id) but was written while no turn ran.
    rollout = Rollout("t-idle")
    rollout.meta()
    rollout.add("turn_context", {"turn_id": "auto-compact-0", "model": MODEL})
    injected = rollout.message("auto-compact-0", "user", "Message Type: MESSAGE\nSender: A\nPayload:\nhi")
    started = rollout.start("turn-1", "operator", effort="low")
    final = rollout.message("turn-1", "assistant", "done", phase="final_answer")
    ended = rollout.complete("turn-1", "done")
    index = RolloutIndex.load([rollout.write(tmp_path / "r.jsonl")], root=tmp_path)
    lines = {line.at.line: line for line in index.lines(thread_id="t-idle")}
    assert (lines[injected].turn_id, lines[injected].running_turn_id) == ("auto-compact-0", None)
    assert lines[injected].payload_type == "message" and lines[injected].text().endswith("Payload:\nhi")
    assert lines[started].running_turn_id == lines[final].running_turn_id == lines[ended].running_turn_id == "turn-1"
    assert index.line(Location("r.jsonl", final)) is lines[final]
    assert index.lines(thread_id="another") == [] and index.line(None) is None


def test_a_fork_does_not_inherit_the_turn_its_parent_was_in(tmp_path):
    # What Codex 0.171 writes for thread/fork mid-turn: the parent's turn, closed in the fork's history.
    parent = Rollout("t-parent")
    parent.meta()
    parent.start("turn-p", "operator", effort="low")
    child = Rollout("t-child")
    child.meta()
    child.lines[0]["payload"]["forked_from_id"] = "t-parent"
    child.add("event_msg", {"type": "turn_aborted", "turn_id": "turn-p", "reason": "interrupted"})
    child.start("turn-c", "peerwire_task", effort="low")
    child.complete("turn-c", "answer")
    index = RolloutIndex.load([parent.write(tmp_path / "p.jsonl"), child.write(tmp_path / "c.jsonl")], root=tmp_path)
    assert index.threads["t-child"].forked_from == "t-parent"
    assert [(t.turn_id, t.status) for t in index.thread_turns("t-child")] == [("turn-c", "completed")]
    assert index.turn("t-parent", "turn-p").status == "incomplete"


def test_a_cut_model_request_is_explained_only_by_its_turn(tmp_path):
    """Codex hangs up on a turn's in-flight request when the turn is interrupted or aborted, when its
    process stops first, or when input is steered in; a cut request in a turn that ran on and completed
    otherwise is unexplained (an answer went missing)."""
    from datetime import datetime

    def at(line: dict) -> float:
        return datetime.fromisoformat(line["timestamp"].replace("Z", "+00:00")).timestamp()

    rollout = Rollout("t-cuts")
    rollout.meta()
    asked: dict[str, float] = {}
    for turn in ("interrupted", "aborted", "steered", "steered-before", "completed"):
        rollout.start(turn, "operator", effort=None)
        rollout.message(turn, "user", f"prompt of {turn}")
        if turn == "steered-before":
            rollout.message(turn, "user", "steered before the request was made")
        asked[turn] = at(rollout.lines[-1]) + 0.008  # the model request, after the turn's input so far
        if turn == "steered":
            rollout.message(turn, "user", "steered while the request was in flight")
        if turn in ("interrupted", "aborted"):
            rollout.abort(turn, "interrupted" if turn == "interrupted" else "replaced")
        else:
            rollout.complete(turn, "done")
    rollout.start("incomplete", "operator", effort=None)
    asked["incomplete"] = at(rollout.lines[-1]) + 0.008
    index = RolloutIndex.load([rollout.write(tmp_path / "cuts.jsonl")], root=tmp_path)
    assert {turn: index.why_cut(turn, since) for turn, since in asked.items()} == {
        "interrupted": "interrupted", "aborted": "aborted", "steered": "steered", "steered-before": None,
        "completed": None, "incomplete": "incomplete"}
    assert index.why_cut("no-such-turn", asked["steered"]) is None
    assert index.why_cut(None, None) is None
    assert index.why_cut("steered", None) is None  # without the request's arrival, a steer explains nothing
