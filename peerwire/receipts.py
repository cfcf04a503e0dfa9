"""What a record keeps of the tool call that admitted it (its ``tool_receipt``)."""

from __future__ import annotations

from typing import Any


def tool_receipt(meta: dict[str, Any] | None) -> dict[str, Any]:
    """The caller's own receipt of the call: how it came (``via``), the MCP call id and Codex turn metadata."""
    meta = meta or {}
    out: dict[str, Any] = {"via": meta.get("via", "control")}
    if meta.get("call_id"):
        out["call_id"] = meta["call_id"]
    turn = meta.get("turn") or {}
    for key in ("session_id", "thread_id", "turn_id", "model"):
        if turn.get(key):
            out[key] = turn[key]
    return out
