"""JSON Schema's ``pattern`` as the specification means it: ``$`` is the end of the string.

A schema's ``pattern`` is an ECMA-262 regular expression, where ``$`` (without
the multiline flag) matches only at the end of the input. jsonschema checks it
with Python's ``re.search``, where ``$`` also matches just before a final
newline: there ``^ix_[0-9a-f]{32}$`` accepts ``"ix_…\\n"``. Every validator of
the project's schemas is built from :func:`validator_class`, whose ``pattern``
keyword (``propertyNames`` included) reads each ``$`` outside a character
class as ``\\Z``. The schemas themselves stay plain ECMA-262, as MCP clients
and generators (hypothesis-jsonschema reads ``$`` the same way) expect.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from jsonschema.protocols import Validator


@lru_cache(maxsize=None)
def compiled(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled so that ``$`` is the end of the string, as in ECMA-262."""
    out: list[str] = []
    in_class = False
    chars = iter(pattern)
    for char in chars:
        if char == "\\":
            out.append(char + next(chars, ""))
        elif in_class:
            in_class = char != "]"
            out.append(char)
        elif char == "[":
            in_class = True
            out.append(char)
            # A "]" first in a class ("[]...]", "[^]...]") is a member, not its end.
            following = next(chars, "")
            if following == "^":
                out.append(following)
                following = next(chars, "")
            out.append(following)
            if following == "\\":
                out.append(next(chars, ""))
        elif char == "$":
            out.append(r"\Z")
        else:
            out.append(char)
    return re.compile("".join(out))


def _pattern(validator: Any, pattern: str, instance: Any, schema: dict) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and not compiled(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


@lru_cache(maxsize=None)
def validator_class() -> "type[Validator]":
    """Draft 2020-12 with the ECMA-262 ``pattern`` (jsonschema loads here, on first use)."""
    from jsonschema import Draft202012Validator, validators

    return validators.extend(Draft202012Validator, {"pattern": _pattern})
