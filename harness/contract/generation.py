"""Tool arguments generated from the contract's input schemas (hypothesis-jsonschema).

Input schemas are kept flat: an object of named properties, ``required`` and
``additionalProperties: false``, each property a leaf schema. Each property's
values come from ``hypothesis_jsonschema.from_schema``; the object is assembled
here with ``fixed_dictionaries`` (which also keeps generation working with
Hypothesis versions whose internals the library's own object support lags).

Two adjustments keep the run fast and meaningful, and are the only ones:
``timeout_ms`` is drawn from 0..50 so no generated call waits long, and a
``target`` may also be one of the given known names so that valid calls reach
real agents, not only unknown ones.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

FAST_TIMEOUT_MS = 50
SPOOF_NAMES = ("sender", "from", "sender_id", "as", "on_behalf_of")

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


class SchemaShapeError(ValueError):
    """An input schema outside the flat shape this generator supports."""


@dataclass(frozen=True)
class InvalidArguments:
    """Arguments that violate the input schema, how, and which codes may refuse them."""

    arguments: dict[str, Any]
    violation: str
    allowed_codes: frozenset[str]


def resolve(schema: Any, defs: Mapping[str, Any]) -> Any:
    """``schema`` with every local ``#/$defs/…`` reference inlined."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            merged = {**copy.deepcopy(defs[ref[len("#/$defs/"):]]), **{k: v for k, v in schema.items() if k != "$ref"}}
            return resolve(merged, defs)
        return {k: resolve(v, defs) for k, v in schema.items() if k != "$defs"}
    if isinstance(schema, list):
        return [resolve(v, defs) for v in schema]
    return schema


def properties_of(schema: Mapping[str, Any]) -> tuple[dict[str, Any], frozenset[str]]:
    """The resolved property schemas and required names; :class:`SchemaShapeError` otherwise."""
    if schema.get("type") != "object" or schema.get("additionalProperties") is not False:
        raise SchemaShapeError("an input schema is an object with additionalProperties false")
    defs = schema.get("$defs", {})
    props = {name: resolve(sub, defs) for name, sub in schema.get("properties", {}).items()}
    for name, sub in props.items():
        if isinstance(sub, dict) and (sub.get("type") == "object" or "properties" in sub):
            raise SchemaShapeError(f"property {name!r} is an object; input schemas are flat")
    return props, frozenset(schema.get("required", ()))


def _leaf(name: str, sub: dict[str, Any], known_targets: Sequence[str]) -> st.SearchStrategy:
    sub = {k: v for k, v in sub.items() if k not in ("description", "default", "title")}
    if name == "timeout_ms":
        sub = {**sub, "minimum": max(sub.get("minimum", 0), 0), "maximum": FAST_TIMEOUT_MS}
    strategy = from_schema(sub)
    if name == "target" and known_targets:
        strategy = st.one_of(strategy, st.sampled_from(list(known_targets)))
    return strategy


def valid_arguments(schema: Mapping[str, Any], *, known_targets: Sequence[str] = ()) -> st.SearchStrategy:
    """Argument objects valid under ``schema``."""
    props, required = properties_of(schema)
    return st.fixed_dictionaries(
        {n: _leaf(n, s, known_targets) for n, s in props.items() if n in required},
        optional={n: _leaf(n, s, known_targets) for n, s in props.items() if n not in required},
    )


def _wrong_values(sub: dict[str, Any]) -> st.SearchStrategy:
    """Values ``sub`` rejects: anything its negation admits, plus its boundary neighbours."""
    plain = {k: v for k, v in sub.items() if k not in ("description", "default", "title")}
    edges: list[Any] = []
    if plain.get("type") == "integer":
        if "minimum" in plain:
            edges.append(plain["minimum"] - 1)
        if "maximum" in plain:
            edges.append(plain["maximum"] + 1)
    if plain.get("type") == "string":
        if plain.get("minLength", 0) > 0:
            edges.append("")
        if "maxLength" in plain:
            edges.append("x" * (plain["maxLength"] + 1))
    if "enum" in plain:
        edges.append("not-" + "-".join(map(str, plain["enum"])))
    negation = from_schema({"not": plain})
    return st.one_of(st.sampled_from(edges), negation) if edges else negation


def invalid_arguments(schema: Mapping[str, Any], *, known_targets: Sequence[str] = ()) -> st.SearchStrategy:
    """:class:`InvalidArguments`: a valid object with one violation (unknown key, wrong value or missing key)."""
    props, required = properties_of(schema)
    base = valid_arguments(schema, known_targets=known_targets)
    strategies = []

    @st.composite
    def unknown_key(draw: st.DrawFn) -> InvalidArguments:
        arguments = draw(base)
        key = draw(st.sampled_from(SPOOF_NAMES) | st.text(min_size=1, max_size=12).filter(lambda k: k not in props))
        arguments[key] = draw(JSON_VALUES)
        return InvalidArguments(arguments, f"unknown argument {key!r}", frozenset({"invalid_argument"}))

    strategies.append(unknown_key())

    if props:
        @st.composite
        def wrong_value(draw: st.DrawFn) -> InvalidArguments:
            arguments = draw(base)
            name = draw(st.sampled_from(sorted(props)))
            value = draw(_wrong_values(props[name]))
            arguments[name] = value
            codes = {"invalid_argument"}
            if name == "target" and isinstance(value, (list, dict)):
                codes.add("broadcast_not_supported")  # a list of targets is a broadcast
            return InvalidArguments(arguments, f"{name} = {value!r:.60}", frozenset(codes))

        strategies.append(wrong_value())

    if required:
        @st.composite
        def missing_key(draw: st.DrawFn) -> InvalidArguments:
            arguments = draw(base)
            name = draw(st.sampled_from(sorted(required)))
            del arguments[name]
            return InvalidArguments(arguments, f"no {name}", frozenset({"invalid_argument"}))

        strategies.append(missing_key())
    return st.one_of(strategies)
