"""What a finished Codex turn means for the tasks bound to it (pure rules, no I/O).

* ``completed``: the final assistant item becomes the reply ``done`` from the
  recipient: the last item with phase ``final_answer``; when the model gave no
  phases, the last completed assistant item whose phase is unknown (or a
  ``partial_answer``). Commentary never counts.
* ``interrupted``: a ``blocked`` reply attributed to peerwire.
* ``failed``: a ``failed`` reply attributed to peerwire, carrying the turn's error.
* no final text, or final text over the body limit: a ``blocked`` reply
  attributed to peerwire saying so.
* any other status (one this peerwire does not know, or none): no outcome at
  all (:func:`outcome_of` returns ``None``). What the turn did is unknown, so
  its tasks are uncertain: never replayed, never reported as ``done``.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from typing import Any, Iterable

from ..limits import MAX_BODY_BYTES

ANSWER_PHASES = (None, "partial_answer")

KNOWN_STATUSES = ("completed", "interrupted", "failed")
"""The terminal turn statuses that decide an outcome; any other leaves the tasks uncertain."""


@dataclass(frozen=True)
class TurnOutcome:
    turn_id: str
    turn_status: str
    reply_status: str  # done / blocked / failed
    body: str
    attributed_to_recipient: bool
    code: str | None = None
    final_item_id: str | None = None
    text_sha256: str | None = None
    text_chars: int = 0

    def evidence(self) -> dict[str, Any]:
        """The terminal evidence persisted before the reply is published."""
        return asdict(self)


def final_item(items: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    messages = [i for i in items if i.get("type") == "agentMessage"]
    finals = [i for i in messages if i.get("phase") == "final_answer"]
    if finals:
        return finals[-1]
    unknown = [i for i in messages if i.get("phase") in ANSWER_PHASES]
    return unknown[-1] if unknown else None


def outcome_of(turn: dict[str, Any], items: Iterable[dict[str, Any]], recipient_name: str) -> TurnOutcome | None:
    """What ``turn`` answers for its tasks; ``None`` when its status is not one of :data:`KNOWN_STATUSES`."""
    turn_id, status = turn["id"], turn.get("status")
    if status not in KNOWN_STATUSES:
        return None
    if status == "interrupted":
        return TurnOutcome(turn_id, status, "blocked", (
            f"{recipient_name}'s turn {turn_id} was interrupted before it finished this task; "
            "no answer was produced."), False, code="turn_interrupted")
    if status == "failed":
        error = (turn.get("error") or {}).get("message") or "no error message"
        return TurnOutcome(turn_id, status, "failed",
                           f"{recipient_name}'s turn {turn_id} failed: {error}", False, code="turn_failed")
    item = final_item(items)
    text = (item or {}).get("text") or ""
    if item is None or not text.strip():
        return TurnOutcome(turn_id, str(status), "blocked", (
            f"{recipient_name}'s turn {turn_id} ended without a final answer for this task."),
            False, code="no_final_text", final_item_id=(item or {}).get("id"))
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    size = len(text.encode("utf-8"))
    if size > MAX_BODY_BYTES:
        return TurnOutcome(turn_id, str(status), "blocked", (
            f"{recipient_name}'s final answer in turn {turn_id} is {size} bytes, over the "
            f"{MAX_BODY_BYTES}-byte reply limit; it was not forwarded."), False, code="final_too_large",
            final_item_id=item["id"], text_sha256=digest, text_chars=len(text))
    return TurnOutcome(turn_id, str(status), "done", text, True, final_item_id=item["id"],
                       text_sha256=digest, text_chars=len(text))
