"""What each expectation operator of a case means.

:func:`check` takes one expectation (already evaluated: expressions replaced),
the step's structured result and the whole tool result, and says whether it
holds and, in words, what was checked or what was found instead. Equality is
JSON equality: ``true`` is not ``1``. Where a text differs, the detail spells
out the difference with escapes and code points (``U+0301``), so that
differences nobody can see in print are still visible.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from .expressions import PathError, lookup
from .textdiff import difference


@dataclass(frozen=True)
class CheckResult:
    passed: bool
    check: str
    detail: str | None = None


def check(expectation: Mapping[str, Any], structured: Any, result: Any) -> CheckResult:
    """Evaluate one expectation against a step's structured result (and raw ``result``)."""
    if "excludes_text" in expectation:
        needle = expectation["excludes_text"]
        what = f"the response does not contain {_short(needle)}"
        hits = [s for s in strings_in(result) if isinstance(needle, str) and needle in s]
        return CheckResult(not hits, what, f"it is in {_short(hits[0])}" if hits else None)

    path = expectation["path"]
    if expectation.get("of") == "result":
        # The whole tool result (content, isError), e.g. to see that an empty output has no content.
        structured = result
        where = f"result.{path}" if path else "the tool result"
    else:
        where = path or "the result"
    if "absent" in expectation:
        parent_path, _, key = path.rpartition(".")
        what = f"{where} is absent"
        try:
            parent = lookup(structured, parent_path)
        except PathError as exc:
            return CheckResult(False, what, f"{parent_path or 'the result'}: {exc}")
        present = isinstance(parent, dict) and key in parent
        return CheckResult(not present, what, f"it is there: {_short(parent[key])}" if present else None)

    op = next(k for k in ("equals", "not_equals", "contains", "lacks", "matches", "length", "increasing")
              if k in expectation)
    expected = expectation[op]
    what = f"{where} {op.replace('_', ' ')} {_short(expected)}" if op != "increasing" else f"{where} increases"
    try:
        actual = lookup(structured, path)
    except PathError as exc:
        return CheckResult(False, what, f"{where}: {exc}")
    found = _short(actual)
    if op == "equals":
        return CheckResult(same(actual, expected), what, None if same(actual, expected) else _visibly(actual, expected, path))
    if op == "not_equals":
        return CheckResult(not same(actual, expected), what, None if not same(actual, expected) else found)
    if op in ("contains", "lacks"):
        if isinstance(actual, str) and isinstance(expected, str):
            has = expected in actual
        elif isinstance(actual, list):
            has = any(matches(element, expected) for element in actual)
        else:
            return CheckResult(False, what, f"{where} is a {type(actual).__name__}, not a list or string")
        ok = has if op == "contains" else not has
        return CheckResult(ok, what, None if ok else found)
    if op == "matches":
        ok = matches(actual, expected)
        return CheckResult(ok, what, None if ok else _visibly(actual, expected, path))
    if op == "length":
        if not isinstance(actual, (list, str, dict)):
            return CheckResult(False, what, f"{where} has no length: {found}")
        ok = len(actual) == expected
        return CheckResult(ok, what, None if ok else f"length {len(actual)}: {found}")
    # increasing
    numbers = isinstance(actual, list) and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                               for x in actual)
    ok = numbers and all(a < b for a, b in zip(actual, actual[1:]))
    return CheckResult(ok, what, None if ok else found)


def same(a: Any, b: Any) -> bool:
    """JSON equality: like ``==`` but booleans are never numbers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) in (int, float) and type(b) in (int, float) and a == b or (type(a) is type(b) and a == b)


def matches(actual: Any, pattern: Any) -> bool:
    """Objects match when every key of ``pattern`` matches; everything else by :func:`same`."""
    if isinstance(pattern, dict):
        return isinstance(actual, dict) and all(k in actual and matches(actual[k], v) for k, v in pattern.items())
    return same(actual, pattern)


def strings_in(value: Any) -> Iterator[str]:
    """Every string inside ``value`` (keys too)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from strings_in(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings_in(v)


def _visibly(actual: Any, expected: Any, path: str) -> str:
    """What was found, and where a text in it differs from the expected one, escaped to the code point."""
    text = difference(expected, actual, path)
    return _short(actual) + (f"; {text}" if text else "")


def _short(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"…({len(text)} chars)"
