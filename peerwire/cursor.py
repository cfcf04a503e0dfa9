"""Recipient-bound mailbox cursors.

A cursor is an opaque string naming a position in one recipient's mailbox. It is
signed with the home's secret so a caller can neither forge a position nor use
another recipient's cursor.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

from .errors import Code, PeerwireError

_PREFIX = "c1."


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(secret: bytes, payload: bytes) -> str:
    return _b64(hmac.new(secret, payload, hashlib.sha256).digest()[:16])


def encode(secret: bytes, agent_id: str, seq: int) -> str:
    payload = json.dumps({"a": agent_id, "s": seq}, separators=(",", ":")).encode()
    return f"{_PREFIX}{_b64(payload)}.{_mac(secret, payload)}"


def decode(secret: bytes, agent_id: str, cursor: str) -> int:
    """The mailbox position in ``cursor``; ``cursor_invalid`` if it is not the caller's."""
    invalid = PeerwireError(
        Code.CURSOR_INVALID,
        "cursor is not one this app issued to you; omit it to read from your last acknowledgement",
    )
    if not isinstance(cursor, str) or not cursor.startswith(_PREFIX):
        raise invalid
    try:
        body, mac = cursor[len(_PREFIX):].split(".", 1)
        payload = _unb64(body)
    except (ValueError, TypeError):
        raise invalid from None
    # Bytes, not str: compare_digest refuses non-ASCII text, and a cursor is whatever the caller sent.
    if not hmac.compare_digest(mac.encode("utf-8", "surrogatepass"), _mac(secret, payload).encode()):
        raise invalid
    data = json.loads(payload)
    if data.get("a") != agent_id:
        raise PeerwireError(Code.CURSOR_INVALID, "cursor belongs to another recipient")
    seq = data.get("s")
    if not isinstance(seq, int) or seq < 0:
        raise invalid
    return seq
