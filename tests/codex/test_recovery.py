"""App start-up after a crash: captured outcomes are published, lost observations made uncertain.

Nothing is re-run: recovery works from what the store holds.
"""

from __future__ import annotations

from pathlib import Path

from peerwire.codex.adapter import CodexProvider
from peerwire.store import Store


def _bound(store: Store, a, b, text: str, turn: str) -> tuple[str, str]:
    request_id = store.mailbox.admit_task(a, b, text)["request_id"]
    claim = store.mailbox.claim_for_dispatch(request_id)
    return request_id, store.bindings.bind(request_id, claim, b, 1, "thread-1", turn, via="turn/start")


def test_recover_publishes_captured_and_marks_lost_uncertain(tmp_path: Path):
    store = Store(tmp_path / "db")
    a, _ = store.registry.register_agent("A", "codex")
    b, _ = store.registry.register_agent("B", "codex")
    captured_rq, captured = _bound(store, a, b, "finished before the crash", "turn-1")
    lost_rq, lost = _bound(store, a, b, "running at the crash", "turn-2")
    # The crash came after the terminal evidence was persisted and before the reply was written.
    store.bindings.capture_outcome(captured, {"turn_id": "turn-1", "turn_status": "completed", "reply_status": "done",
                                              "text": "the answer", "attributed_to_recipient": True, "code": None})
    published = []
    CodexProvider(store, lambda rid, iid: published.append(iid), tmp_path / "codex").recover()

    done = store.trace(captured_rq)
    assert [b["state"] for b in done["bindings"]] == ["published"]
    (reply,) = [i for i in done["interactions"] if i["kind"] == "reply"]
    assert (reply["body"], reply["status"], reply["sender"]["name"]) == ("the answer", "done", "B")
    gone = store.trace(lost_rq)
    assert gone["interactions"][0]["state"] == "uncertain"
    assert [b["state"] for b in gone["bindings"]] == ["uncertain"]
    (notice,) = [i for i in gone["interactions"] if i["kind"] == "notice"]
    assert notice["code"] == "delivery_uncertain" and notice["recipient"]["name"] == "A"
    assert set(published) == {reply["record_id"], notice["record_id"]}
    assert store.mailbox.pending_tasks(b.agent_id) == []  # nothing left to dispatch: no replay
    # a second start-up finds nothing more to do
    CodexProvider(store, lambda *_: published.append("again"), tmp_path / "codex").recover()
    assert "again" not in published
