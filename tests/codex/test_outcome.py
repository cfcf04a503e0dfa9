"""What a finished turn means for its tasks: the pure rules, case by case."""

from peerwire.codex.outcome import outcome_of
from peerwire.limits import MAX_BODY_BYTES


def msg(text, phase=None, id="m"):
    return {"type": "agentMessage", "id": id, "text": text, "phase": phase}


def test_final_answer_wins_over_later_commentary():
    out = outcome_of({"id": "t", "status": "completed"},
                     [msg("plan", "commentary", "1"), msg("the answer", "final_answer", "2"), msg("bye", "commentary", "3")], "B")
    assert (out.reply_status, out.body, out.final_item_id, out.attributed_to_recipient) == ("done", "the answer", "2", True)


def test_unknown_phase_is_the_compatibility_answer_and_commentary_never_counts():
    out = outcome_of({"id": "t", "status": "completed"}, [msg("a", None, "1"), msg("b", None, "2"), msg("c", "commentary", "3")], "B")
    assert (out.body, out.final_item_id) == ("b", "2")
    only_commentary = outcome_of({"id": "t", "status": "completed"}, [msg("thinking", "commentary")], "B")
    assert (only_commentary.reply_status, only_commentary.code) == ("blocked", "no_final_text")


def test_interrupted_failed_and_oversize_are_attributed_to_peerwire():
    interrupted = outcome_of({"id": "t", "status": "interrupted"}, [msg("partial", "final_answer")], "B")
    failed = outcome_of({"id": "t", "status": "failed", "error": {"message": "boom"}}, [], "B")
    big = outcome_of({"id": "t", "status": "completed"}, [msg("x" * (MAX_BODY_BYTES + 1), "final_answer")], "B")
    exact = outcome_of({"id": "t", "status": "completed"}, [msg("é" * (MAX_BODY_BYTES // 2), "final_answer")], "B")
    assert [(o.reply_status, o.code, o.attributed_to_recipient) for o in (interrupted, failed, big)] == [
        ("blocked", "turn_interrupted", False), ("failed", "turn_failed", False), ("blocked", "final_too_large", False)]
    assert "boom" in failed.body
    assert exact.reply_status == "done"  # exactly 64 KiB of UTF-8 is within the limit
    assert big.text_sha256 and big.text_chars == MAX_BODY_BYTES + 1


def test_a_status_peerwire_does_not_know_decides_nothing():
    for status in ("cancelled", "inProgress", "", None, 0, "COMPLETED"):
        assert outcome_of({"id": "t", "status": status}, [msg("looks final", "final_answer")], "B") is None, status
    assert outcome_of({"id": "t"}, [msg("looks final", "final_answer")], "B") is None
