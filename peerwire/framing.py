"""Newline-delimited framing, the same at every hop: one line limit, and a name for a line over it.

``mcp serve`` reads JSON-RPC lines from its client and the app reads control
lines from its callers with the same :class:`Lines` and the same limit,
:data:`~peerwire.limits.MAX_LINE_BYTES`. A line over the limit is not kept: it
becomes one :class:`Oversize`, which remembers only its size and its first and
last bytes, so the hop can answer *that* request (``message_too_large``, with
its id) and carry on with the next line. Nothing else on the connection is
affected.

An oversize line is never parsed, so its id is recovered only where the bytes
prove it: a top-level member before any nested value (the official Python SDK
writes ``{"jsonrpc", "id", "method", "params"}``, the control clients
``{"id", ...}``) or after the last one (the TypeScript SDK writes
``{"method", "params", "jsonrpc", "id"}``). An id inside a nested object, or
one that only looks like a member from inside a string, names nothing.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from .errors import Code, PeerwireError
from .limits import MAX_BODY_BYTES, MAX_LINE_BYTES

KEPT_BYTES = 4096
"""How much of each end of an oversize line is kept to name its request."""

_SCALAR = rb'(?:"(?:[^"\\]|\\.){0,1024}"|-?\d{1,20}(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null)'
_FIRST = re.compile(rb'\s*\{')
_MEMBER_AHEAD = re.compile(rb'\s*"([A-Za-z_][A-Za-z0-9_]{0,31})"\s*:\s*(' + _SCALAR + rb')\s*,')
_MEMBER_BEHIND = re.compile(rb'[,{]\s*"([A-Za-z_][A-Za-z0-9_]{0,31})"\s*:\s*(' + _SCALAR + rb')\s*$')
_CLOSE = re.compile(rb'\}\s*$')


@dataclass(frozen=True)
class Oversize:
    """A line longer than the limit, read and dropped: its size and its two ends."""

    size: int
    head: bytes
    tail: bytes

    def error(self, limit: int = MAX_LINE_BYTES) -> PeerwireError:
        """The refusal of this line's request (the call fails; its connection goes on)."""
        return too_large(self.size, limit)

    def member(self, key: str) -> Any:
        """The value of the top-level scalar member ``key``, where the kept ends prove it; else ``None``."""
        found = _members_ahead(self.head)
        if key not in found:
            found = {**_members_behind(self.tail), **found}
        raw = found.get(key)
        if raw is None:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return None


def too_large(size: int, limit: int = MAX_LINE_BYTES) -> PeerwireError:
    """``message_too_large`` for a request of ``size`` bytes over the line ``limit``."""
    return PeerwireError(
        Code.MESSAGE_TOO_LARGE,
        f"the request is {size} bytes, over the {limit}-byte limit of one message, so it was not read; "
        f"a body holds at most {MAX_BODY_BYTES} UTF-8 bytes: send a shorter one",
        {"bytes": size, "limit": limit})


def _members_ahead(head: bytes) -> dict[str, bytes]:
    """Scalar members at the start of the top-level object, up to its first nested (or cut) value."""
    start = _FIRST.match(head)
    if start is None:
        return {}
    found: dict[str, bytes] = {}
    at = start.end()
    while (member := _MEMBER_AHEAD.match(head, at)) is not None:
        found.setdefault(member.group(1).decode(), member.group(2))
        at = member.end()
    return found


def _members_behind(tail: bytes) -> dict[str, bytes]:
    """Scalar members at the end of the top-level object, back to its last nested (or cut) value.

    The line's last ``}`` closes the top-level object; walking back from it, a
    member proves itself by a ``,`` or ``{`` before its key: a string holds no
    unescaped quote, so no string can end where such a member begins.
    """
    close = _CLOSE.search(tail)
    if close is None:
        return {}
    rest = tail[: close.start()]
    found: dict[str, bytes] = {}
    while (member := _MEMBER_BEHIND.search(rest)) is not None:
        found.setdefault(member.group(1).decode(), member.group(2))
        rest = rest[: member.start() + 1]
        if rest.endswith(b"{"):
            break
        rest = rest[:-1]
    return found


def out_of_range_at(value: Any, path: str) -> str | None:
    """Where in ``value`` a number JSON cannot carry (infinite or NaN) sits, as ``path.key[i]``; else ``None``."""
    stack = [(value, path)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            return where
        if isinstance(node, dict):
            stack.extend((child, f"{where}.{key}") for key, child in node.items())
        elif isinstance(node, list):
            stack.extend((child, f"{where}[{i}]") for i, child in enumerate(node))
    return None


class Lines:
    """Splits a byte stream into lines of at most ``limit`` bytes (the newline not counted).

    :meth:`feed` returns the complete lines in a chunk, each as bytes, or as an
    :class:`Oversize` when it was longer than ``limit``. Memory held is at most
    ``limit`` bytes of a partial line plus the ends of an oversize one.
    """

    def __init__(self, limit: int = MAX_LINE_BYTES):
        self.limit = limit
        self._partial = bytearray()
        self._over: tuple[int, bytes, bytearray] | None = None  # size so far, head, tail

    def feed(self, chunk: bytes) -> list[bytes | Oversize]:
        out: list[bytes | Oversize] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start: len(chunk) if end < 0 else end]
            if self._over is None and len(self._partial) + len(piece) > self.limit:
                self._over = (0, bytes((self._partial + piece[:KEPT_BYTES])[:KEPT_BYTES]), bytearray())
                self._grow_over(bytes(self._partial))
                self._partial.clear()
            if self._over is not None:
                self._grow_over(piece)
            if end < 0:
                if self._over is None:
                    self._partial += piece
                return out
            if self._over is not None:
                size, head, tail = self._over
                out.append(Oversize(size, head, bytes(tail)))
                self._over = None
            elif self._partial:
                self._partial += piece
                out.append(bytes(self._partial))
                self._partial.clear()
            else:
                out.append(bytes(piece))
            start = end + 1

    def _grow_over(self, piece: bytes) -> None:
        assert self._over is not None
        size, head, tail = self._over
        tail += piece[-KEPT_BYTES:]
        del tail[:-KEPT_BYTES]
        self._over = (size + len(piece), head, tail)

    def rest(self) -> bytes | Oversize | None:
        """What the stream ended with after its last newline (``None`` for nothing)."""
        if self._over is not None:
            size, head, tail = self._over
            return Oversize(size, head, bytes(tail))
        return bytes(self._partial) if self._partial else None
