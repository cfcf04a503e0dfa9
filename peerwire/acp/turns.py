"""One ACP prompt turn and what its answer means for the tasks it carried (pure rules, no I/O).

An ACP turn is one ``session/prompt``: it ends when the agent answers with a
``stopReason`` (or an error). What the agent said in between arrives as
``session/update`` notifications; the agent sends all of them before its
answer. The turn's final agent message is the text of the last agent message
(``agent_message_chunk``\\ s of one ``messageId``) with no tool call after it:
earlier messages led to tool calls (commentary), and a turn whose last step
was a tool call ended without a final message.

What the answer means (:data:`STOP_REASONS`, the rule as data):

============================  =========  ===========================================
the prompt's answer            reply      why
============================  =========  ===========================================
``end_turn``                   done       the final agent message, from the recipient
                                          (``blocked`` from peerwire when there is no
                                          final text, or it is over the 64 KiB limit)
``cancelled``                  blocked    peerwire cancelled it (``interrupt_agent``;
                                          ``turn_interrupted``, as for Codex)
``max_tokens``                 failed     the model was cut off: the task is not done
``max_turn_requests``          failed     the agent gave up: the task is not done
``refusal``                    failed     the agent refused to go on
a JSON-RPC error answer        failed     the agent said the prompt failed (its message)
any other stop reason          uncertain  no rule knows what it means: never replayed,
                                          never reported as done
no answer (agent gone)         uncertain  the turn was not observed to its end
============================  =========  ===========================================

Only ``done`` is attributed to the recipient; the others are peerwire's notices.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ..limits import MAX_BODY_BYTES

TURN_EVIDENCE = frozenset({"agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan"})
"""``session/update`` kinds that only a running turn produces: the first one proves the prompt was admitted.
(``available_commands_update``, ``usage_update`` and the like can arrive between turns.)"""

STOP_REASONS: Mapping[str, tuple[str, str | None]] = {
    "end_turn": ("done", None),
    "cancelled": ("blocked", "turn_interrupted"),
    "max_tokens": ("failed", "turn_max_tokens"),
    "max_turn_requests": ("failed", "turn_max_turn_requests"),
    "refusal": ("failed", "turn_refused"),
}
"""Stop reason -> (reply status, notice code). A reason that is not here leaves its tasks uncertain."""


@dataclass(frozen=True)
class FinalMessage:
    message_id: str | None
    text: str


@dataclass
class PromptTurn:
    """A prompt in flight: what it carries and how far the agent got with it."""

    turn_id: str
    """The id peerwire gave it: sent as the prompt's ``messageId`` (the agent echoes it as ``userMessageId``)."""
    session_id: str
    trigger: str
    """``task`` (a dispatched task) or ``operator`` (a person's prompt)."""
    request_ids: tuple[str, ...] = ()
    record_ids: tuple[str, ...] = ()
    """Information, replies and notices that reached the agent in this prompt (its next turn)."""
    since: int = 0
    """The index in the session's ``received`` notifications from which this turn's updates are read."""
    acknowledged_by: str | None = None
    """What first proved the agent admitted the prompt: an update kind, or ``prompt_answer``."""
    first_message_id: str | None = None
    claims: dict[str, str] = field(default_factory=dict)
    """request_id -> claim_id of the tasks it carries."""
    bound: bool = False
    """Its tasks are bound and its mail marked visible (done once, before any outcome is handled)."""
    finished: bool = False

    def observe(self, update: Mapping[str, Any]) -> bool:
        """Note one ``session/update`` of this turn's session; True when it is the first proof the prompt runs."""
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk" and self.first_message_id is None and update.get("messageId"):
            self.first_message_id = str(update["messageId"])
        if self.acknowledged_by is None and kind in TURN_EVIDENCE:
            self.acknowledged_by = f"session/update {kind}"
            return True
        return False


def final_message(updates: Iterable[Mapping[str, Any]]) -> FinalMessage | None:
    """The turn's final agent message: the last message's text, unless a tool call followed it."""
    texts: dict[str, list[str]] = {}
    last_message: str | None = None
    tool_after = False
    for update in updates:
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            content = update.get("content") or {}
            if content.get("type") != "text":
                continue
            message_id = str(update.get("messageId") or "")
            if message_id != last_message:
                tool_after = False
            last_message = message_id
            texts.setdefault(message_id, []).append(str(content.get("text") or ""))
        elif kind in ("tool_call", "tool_call_update") and last_message is not None:
            tool_after = True
    if last_message is None or tool_after:
        return None
    return FinalMessage(last_message or None, "".join(texts[last_message]))


def message_ids(updates: Iterable[Mapping[str, Any]]) -> list[str]:
    """The agent's message ids (``msg_…`` for OpenCode) in the order they first spoke."""
    seen: list[str] = []
    for update in updates:
        message_id = update.get("messageId")
        if update.get("sessionUpdate") == "agent_message_chunk" and message_id and message_id not in seen:
            seen.append(str(message_id))
    return seen


def outcome_of(turn: PromptTurn, answer: Mapping[str, Any] | None, error: Mapping[str, Any] | None,
               updates: list[Mapping[str, Any]], recipient_name: str) -> dict[str, Any] | None:
    """The terminal evidence of a prompt's tasks, or None when its answer leaves them uncertain.

    ``answer`` is the prompt's result, ``error`` its JSON-RPC error (one of the
    two). The dict has the keys of :class:`peerwire.codex.outcome.TurnOutcome`'s
    evidence (``reply_status``, ``text``, ``attributed_to_recipient``, ``code``,
    ``final_item_id`` ...) plus the ACP facts (``stop_reason``, ``message_ids``,
    ``user_message_id``).
    """
    ids = message_ids(updates)
    facts: dict[str, Any] = {"turn_id": turn.turn_id, "session_id": turn.session_id, "message_ids": ids}
    if error is not None:
        message = str(error.get("message") or "no error message")
        return {**facts, "turn_status": "error", "stop_reason": None, "reply_status": "failed",
                "text": f"{recipient_name}'s prompt {turn.turn_id} failed: [{error.get('code')}] {message}",
                "attributed_to_recipient": False, "code": "prompt_error", "final_item_id": None,
                "text_sha256": None, "text_chars": 0}
    stop = (answer or {}).get("stopReason")
    facts.update(stop_reason=stop, turn_status=stop, user_message_id=(answer or {}).get("userMessageId"))
    rule = STOP_REASONS.get(stop) if isinstance(stop, str) else None
    if rule is None:
        return None
    status, code = rule
    if status != "done":
        what = {"blocked": "was cancelled before it finished this task; no answer was produced",
                "failed": f"ended with stop reason {stop!r} before finishing this task"}[status]
        return {**facts, "reply_status": status, "text": f"{recipient_name}'s turn {turn.turn_id} {what}.",
                "attributed_to_recipient": False, "code": code, "final_item_id": None,
                "text_sha256": None, "text_chars": 0}
    final = final_message(updates)
    text = final.text if final is not None else ""
    final_id = final.message_id if final is not None else None
    if not text.strip():
        return {**facts, "reply_status": "blocked", "attributed_to_recipient": False, "code": "no_final_text",
                "text": f"{recipient_name}'s turn {turn.turn_id} ended without a final answer for this task.",
                "final_item_id": final_id, "text_sha256": None, "text_chars": 0}
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    size = len(text.encode("utf-8"))
    if size > MAX_BODY_BYTES:
        return {**facts, "reply_status": "blocked", "attributed_to_recipient": False, "code": "final_too_large",
                "text": (f"{recipient_name}'s final answer in turn {turn.turn_id} is {size} bytes, over the "
                         f"{MAX_BODY_BYTES}-byte reply limit; it was not forwarded."),
                "final_item_id": final_id, "text_sha256": digest, "text_chars": len(text)}
    return {**facts, "reply_status": "done", "text": text, "attributed_to_recipient": True, "code": None,
            "final_item_id": final_id, "text_sha256": digest, "text_chars": len(text)}
