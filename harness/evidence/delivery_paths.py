"""Which path each record took to its recipient, and the provider ids it was bound to, from the evidence rows.

The core records how a record reached its recipient's runtime as evidence rows
(``contracts/export.schema.json``): ``provider_accepted`` (a task admitted
into a turn), ``provider_visible`` (a record shown to the recipient's runtime)
and ``received`` (returned by its own ``receive_messages``). Their ``detail``
says how. The path names one table for both adapters:

=============  ===========================================================
``idle_start``  a task opened a turn on an idle Codex agent (``turn/start``)
``steer``       a task joined a Codex agent's running turn (``turn/steer``)
``inject``      a record entered a Codex thread without a turn
                (``thread/inject_items``)
``idle_prompt`` a task opened a prompt on an idle ACP agent (``session/prompt``)
``next_turn``   a record went in an ACP agent's next prompt (no inject)
``received``    the recipient took it with ``receive_messages``
=============  ===========================================================

Each entry also carries the ids the provider gave it: the thread or ACP
session (``ses_…``), the turn or prompt, and an ACP agent's message ids
(``msg_…``: the first of its turn, the final one, every one), so the canonical
request and interaction ids stay bound to the provider-facing ones in a report.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .core import CoreEvidence

_PATH_BY_VIA = {"turn/start": "idle_start", "turn/steer": "steer", "thread/inject_items": "inject"}
_STAGES = ("provider_accepted", "provider_visible", "received", "binding_capture")
_IDS = ("generation", "thread_id", "session_id", "turn_id", "prompt_message_id", "message_id", "final_item_id",
        "message_ids", "stop_reason", "acknowledged_by", "active_turn")


def delivery(core: CoreEvidence, record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The delivery entries of ``record`` (see the module docs), in the order the core recorded them."""
    out: list[dict[str, Any]] = []
    for row in core.evidence(record["record_id"]):
        stage = row.get("stage")
        if stage not in _STAGES:
            continue
        detail = row.get("detail") or {}
        if stage == "received":
            path, via = "received", "receive_messages"
        elif stage == "binding_capture":
            path, via = "captured", detail.get("via")
        else:
            via = detail.get("via")
            path = detail.get("path") or _PATH_BY_VIA.get(str(via), str(via))
        entry: dict[str, Any] = {"stage": stage, "path": path, "via": via}
        entry.update({key: detail[key] for key in _IDS if detail.get(key) not in (None, [], "")})
        out.append(entry)
    return out


def describe(entries: list[Mapping[str, Any]]) -> str:
    """The paths in a line, for people: ``idle_prompt (ses_…, prompt 9f…, msg_…) · received``."""
    parts = []
    for entry in entries:
        if entry["path"] == "captured":
            if entry.get("final_item_id"):
                parts.append(f"final message {entry['final_item_id']}")
            continue
        ids = [str(entry[key]) for key in ("session_id", "thread_id", "turn_id", "prompt_message_id", "message_id")
               if entry.get(key)]
        ids = list(dict.fromkeys(ids))
        parts.append(entry["path"] + (f" ({', '.join(ids)})" if ids else ""))
    return " · ".join(dict.fromkeys(parts)) or "not delivered"
