"""Differences between texts made visible: escapes and code points.

"é" (U+00E9) and "é" (U+0065 U+0301) print the same, and so do a trailing
space, CRLF against LF, or a zero-width joiner left out. A failure that quotes
both texts as they are shows nothing. :func:`explain` shows where two texts
part, with every invisible or non-ASCII character escaped and the code points
around the first difference spelled out; :func:`difference` finds the first
differing text inside two JSON values and explains it.
"""

from __future__ import annotations

from typing import Any

WINDOW = 6
"""Code points shown on either side of the first difference."""
CLIP = 160


def escaped(text: str, clip: int = CLIP) -> str:
    """``text`` as a quoted literal in which only printable ASCII stands for itself."""
    out = []
    for char in text:
        code = ord(char)
        if char == "\\":
            out.append("\\\\")
        elif char == '"':
            out.append('\\"')
        elif char in "\n\r\t":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}[char])
        elif 0x20 <= code < 0x7F:
            out.append(char)
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    literal = "".join(out)
    if len(literal) > clip:
        literal = literal[:clip] + f"…[{len(literal) - clip} more]"
    return f'"{literal}"'


def code_points(text: str) -> str:
    """``U+0065 U+0301``: each character of ``text`` by its code point."""
    return " ".join(f"U+{ord(c):04X}" for c in text) or "(nothing)"


def _size(text: str) -> str:
    return f"{len(text)} code points, {len(text.encode('utf-8', 'surrogatepass'))} UTF-8 bytes"


def explain(expected: str, found: str) -> str:
    """Where ``found`` parts from ``expected``, visibly; empty when they are the same text."""
    if expected == found:
        return ""
    at = next((i for i, (a, b) in enumerate(zip(expected, found)) if a != b), min(len(expected), len(found)))
    start = max(0, at - WINDOW)
    return (f"expected {escaped(expected)} ({_size(expected)}), found {escaped(found)} ({_size(found)}); "
            f"they differ from code point {at}: expected {code_points(expected[start:at + WINDOW])}, "
            f"found {code_points(found[start:at + WINDOW])}" + (f" (from code point {start})" if start else ""))


def difference(expected: Any, found: Any, path: str = "") -> str | None:
    """The first text that differs between two JSON values, explained with its path; ``None`` if none does.

    Only texts are explained: a missing key or a number differs visibly already.
    """
    where = path or "the value"
    if isinstance(expected, str) and isinstance(found, str):
        return f"{where}: {explain(expected, found)}" if expected != found else None
    if isinstance(expected, dict) and isinstance(found, dict):
        for key in expected:
            if key in found:
                hit = difference(expected[key], found[key], f"{path}.{key}" if path else str(key))
                if hit:
                    return hit
        return None
    if isinstance(expected, list) and isinstance(found, list):
        for index, (a, b) in enumerate(zip(expected, found)):
            hit = difference(a, b, f"{path}.{index}" if path else str(index))
            if hit:
                return hit
    return None
