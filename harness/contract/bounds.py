"""Boundary probes generated from the contract's input schemas: every bound, and both its neighbours.

Nothing here lists a tool or an argument: each numeric keyword of each input
property (``minimum``, ``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum``,
``minLength``, ``maxLength``) and each UTF-8 byte bound of
``definitions.json#/maxUtf8Bytes`` becomes probes at the bound, just inside it
and just outside it, so a bound added to a schema is probed without a line
changed here. Text at a length bound is probed twice: in ASCII and in astral
characters (one code point, two UTF-16 units, four UTF-8 bytes each), because
JSON Schema counts code points and implementations that count anything else
are off at exactly these lengths. A byte bound is probed in one-, two- and
four-byte characters.

A probe inside its bound must not be refused for it (any other declared
outcome is fine: a 256-character target that names nobody is
``unknown_target``); one outside must fail with the bound's code
(``invalid_argument``, or ``message_too_large`` for a byte bound) and a message
naming the argument.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from .generation import properties_of, resolve
from .schemas import ToolContract, utf8_byte_limits

ASTRAL = "\U0001d518"  # 𝔘: one code point, two UTF-16 code units, four UTF-8 bytes
TWO_BYTES = "é"  # U+00E9, precomposed
INVALID_ARGUMENT = "invalid_argument"
TOO_LARGE = "message_too_large"


@dataclass(frozen=True)
class Probe:
    """One argument value at or beside one bound of one tool's input schema."""

    tool: str
    argument: str
    value: Any
    inside: bool
    bound: str
    """The bound in words: ``maximum 100``, ``maxLength 256``, ``65536 UTF-8 bytes``."""
    refusal: str = INVALID_ARGUMENT
    """The error code a value outside the bound gets."""

    @property
    def label(self) -> str:
        side = "inside" if self.inside else "outside"
        return f"{self.tool}.{self.argument} = {describe(self.value)} ({side} {self.bound})"


def describe(value: Any) -> str:
    """A value as a probe label shows it: long text by its length, never in full."""
    if isinstance(value, str) and len(value) > 12:
        kinds = sorted({f"U+{ord(c):04X}" for c in value})
        return (f"{len(value)} characters ({len(value.encode('utf-8', 'surrogatepass'))} UTF-8 bytes) of "
                f"{' '.join(kinds[:3])}{' …' if len(kinds) > 3 else ''}")
    return repr(value)


def probes(contract: ToolContract) -> list[Probe]:
    """Every probe of every bound in ``contract``'s input schema, in property order."""
    props, _ = properties_of(contract.input_schema)
    raw = contract.input_schema.get("properties", {})
    out: list[Probe] = []
    for name, schema in props.items():
        out += _numeric(contract.name, name, schema)
        out += _lengths(contract.name, name, schema)
        out += _bytes(contract.name, name, raw.get(name, {}))
    return out


def _numeric(tool: str, name: str, schema: Mapping[str, Any]) -> Iterator[Probe]:
    kind = schema.get("type")
    if kind not in ("integer", "number"):
        return
    fractions = kind == "number"  # a number bound has fractional neighbours outside it, too
    if "minimum" in schema:
        low = schema["minimum"]
        yield Probe(tool, name, low - 1, False, f"minimum {low}")
        if fractions:
            yield Probe(tool, name, low - 0.5, False, f"minimum {low}")
        yield Probe(tool, name, low, True, f"minimum {low}")
        yield Probe(tool, name, low + 1, True, f"minimum {low}")
    if "maximum" in schema:
        high = schema["maximum"]
        yield Probe(tool, name, high - 1, True, f"maximum {high}")
        yield Probe(tool, name, high, True, f"maximum {high}")
        yield Probe(tool, name, high + 1, False, f"maximum {high}")
        if fractions:
            yield Probe(tool, name, high + 0.5, False, f"maximum {high}")
    if "exclusiveMinimum" in schema:
        low = schema["exclusiveMinimum"]
        yield Probe(tool, name, low, False, f"exclusiveMinimum {low}")
        yield Probe(tool, name, low + 1, True, f"exclusiveMinimum {low}")
    if "exclusiveMaximum" in schema:
        high = schema["exclusiveMaximum"]
        yield Probe(tool, name, high - 1, True, f"exclusiveMaximum {high}")
        yield Probe(tool, name, high, False, f"exclusiveMaximum {high}")


def _lengths(tool: str, name: str, schema: Mapping[str, Any]) -> Iterator[Probe]:
    if schema.get("type") != "string" or "pattern" in schema:
        return  # a pattern decides its own alphabet; lengths are probed where the alphabet is free
    low = schema.get("minLength", 0)
    if low > 0:
        yield Probe(tool, name, "x" * (low - 1), False, f"minLength {low}")
        yield Probe(tool, name, "x" * low, True, f"minLength {low}")
        yield Probe(tool, name, "x" * (low + 1), True, f"minLength {low}")
    if "maxLength" in schema:
        high = schema["maxLength"]
        bound = f"maxLength {high} (code points)"
        yield Probe(tool, name, "x" * (high - 1), True, bound)
        yield Probe(tool, name, "x" * high, True, bound)
        yield Probe(tool, name, ASTRAL * high, True, bound)
        yield Probe(tool, name, "x" * (high + 1), False, bound)
        yield Probe(tool, name, ASTRAL * (high + 1), False, bound)


def _bytes(tool: str, name: str, schema: Mapping[str, Any]) -> Iterator[Probe]:
    ref = schema.get("$ref", "") if isinstance(schema, Mapping) else ""
    limit = utf8_byte_limits().get(ref.rpartition("/")[2]) if ref.startswith("#/$defs/") else None
    if limit is None:
        return
    bound = f"{limit} UTF-8 bytes"
    yield Probe(tool, name, "x" * (limit - 1), True, bound, TOO_LARGE)
    yield Probe(tool, name, "x" * limit, True, bound, TOO_LARGE)
    yield Probe(tool, name, TWO_BYTES * (limit // 2), True, bound, TOO_LARGE)
    yield Probe(tool, name, ASTRAL * (limit // 4), True, bound, TOO_LARGE)
    yield Probe(tool, name, "x" * (limit + 1), False, bound, TOO_LARGE)
    yield Probe(tool, name, TWO_BYTES * (limit // 2) + "x", False, bound, TOO_LARGE)


def minimal_value(schema: Mapping[str, Any]) -> Any:
    """A plain value ``schema`` admits, for an argument a probe does not look at.

    ``enum`` and ``default`` first, then the lower bound, then the least string;
    anything else is drawn (deterministically) from the schema.
    """
    if "enum" in schema:
        return copy.deepcopy(schema["enum"][0])
    if "const" in schema:
        return copy.deepcopy(schema["const"])
    if "default" in schema:
        return copy.deepcopy(schema["default"])
    kind = schema.get("type")
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    if kind == "string" and "pattern" not in schema:
        return "x" * max(schema.get("minLength", 0), 1)
    from hypothesis import find
    from hypothesis_jsonschema import from_schema

    return find(from_schema(dict(schema)), lambda _: True)


def resolved_properties(contract: ToolContract) -> dict[str, Any]:
    """The input properties with their shared definitions inlined."""
    defs = contract.input_schema.get("$defs", {})
    return {name: resolve(sub, defs) for name, sub in contract.input_schema.get("properties", {}).items()}
