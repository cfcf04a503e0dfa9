"""The tool contract as the suite checks it: schemas and declared error codes.

Read from ``contracts/tools/*.json`` (the messaging profile),
``contracts/collab/*.json`` (the collaboration profile) and
``contracts/definitions.json``, bundled into self-contained schemas exactly as
the reference server advertises them.

Every tool's ``outputSchema`` has one form: an object schema whose ``oneOf``
holds the tool's result first and the error result
(``definitions.json#/$defs/error_result``) second, so that a client validating
``structuredContent`` against it accepts tool errors too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from peerwire.contract import COLLAB_ORDER, PROFILES, TOOL_ORDER, bundle, definitions
from peerwire.schema_pattern import validator_class

from .layout import CONTRACTS_DIR

TOOL_NAMES: tuple[str, ...] = TOOL_ORDER
COLLAB_TOOL_NAMES: tuple[str, ...] = COLLAB_ORDER
PROFILE_TOOLS: Mapping[str, tuple[str, tuple[str, ...]]] = PROFILES
"""Each profile's folder in ``contracts/`` and its tools, in contract order."""


ERROR_RESULT_REF = "#/$defs/error_result"


class ContractShapeError(ValueError):
    """A tool file whose outputSchema is not the result-or-error union."""


@dataclass(frozen=True)
class ToolContract:
    """One tool: its input schema, its output schema (result or error) and the error codes it may return."""

    name: str
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any]
    errors: frozenset[str]
    profile: str = "messaging"

    @property
    def result_schema(self) -> dict[str, Any]:
        """The success alternative of :attr:`output_schema`, self-contained (with the shared ``$defs``)."""
        return result_alternative(self.output_schema)

    def input_violations(self, arguments: Any) -> list[str]:
        return _violations(_validator(self.name, "input", self.profile), arguments)

    def output_violations(self, structured: Any) -> list[str]:
        """Why ``structured`` fits neither the result nor the error alternative (empty when it fits one)."""
        return _violations(_validator(self.name, "output", self.profile), structured)

    def result_violations(self, structured: Any) -> list[str]:
        """Why ``structured`` is not a successful result of this tool (an error result is not one)."""
        return _violations(_validator(self.name, "result", self.profile), structured)


ANNOTATIONS = frozenset({"description", "title", "examples", "$comment", "$schema", "$id"})
"""Keywords that say nothing about which values a schema admits: ignored when schemas are compared."""


def canonical_schema(schema: Any, defs: Mapping[str, Any] | None = None, depth: int = 0) -> Any:
    """``schema`` as the values it admits: local references inlined, annotations dropped, order ignored.

    Two schemas with the same canonical form validate the same values, however
    they were bundled (a top-level ``$ref`` inlined or not, ``$defs`` named or
    ordered differently, descriptions reworded). ``default`` is kept: it says
    what an omitted argument means.
    """
    if depth > 64:
        raise ContractShapeError("a schema refers to itself; the contract's schemas are not recursive")
    if isinstance(schema, list):
        return [canonical_schema(v, defs, depth + 1) for v in schema]
    if not isinstance(schema, dict):
        return schema
    defs = {**(defs or {}), **schema.get("$defs", {})}
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and ref[len("#/$defs/"):] in defs:
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        return canonical_schema({**defs[ref[len("#/$defs/"):]], **rest}, defs, depth + 1)
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ANNOTATIONS or key == "$defs":
            continue
        if key in ("properties", "patternProperties"):
            out[key] = {name: canonical_schema(sub, defs, depth + 1) for name, sub in value.items()}
        elif key in ("required", "enum", "type") and isinstance(value, list):
            out[key] = sorted(value, key=_json_key)
        elif key in ("oneOf", "anyOf", "allOf") and isinstance(value, list):
            out[key] = sorted((canonical_schema(v, defs, depth + 1) for v in value), key=_json_key)
        else:
            out[key] = canonical_schema(value, defs, depth + 1)
    return out


def first_difference(expected: Any, found: Any, path: str = "") -> str | None:
    """Where two canonical schemas first differ, as ``path: expected X, found Y``; ``None`` if they are equal."""
    if isinstance(expected, dict) and isinstance(found, dict):
        for key in sorted(set(expected) | set(found)):
            where = f"{path}/{key}"
            if key not in found:
                return f"{where}: missing (expected {_json_key(expected[key])[:200]})"
            if key not in expected:
                return f"{where}: not in the contract ({_json_key(found[key])[:200]})"
            hit = first_difference(expected[key], found[key], where)
            if hit:
                return hit
        return None
    if isinstance(expected, list) and isinstance(found, list) and len(expected) != len(found):
        return f"{path or '/'}: expected {len(expected)} items, found {len(found)}: {_json_key(found)[:200]}"
    if isinstance(expected, list) and isinstance(found, list):
        for index, (a, b) in enumerate(zip(expected, found)):
            hit = first_difference(a, b, f"{path}/{index}")
            if hit:
                return hit
        return None
    if expected != found or type(expected) is not type(found):
        return f"{path or '/'}: expected {_json_key(expected)[:200]}, found {_json_key(found)[:200]}"
    return None


def schema_differences(advertised: Mapping[str, Mapping[str, Any]], profile: str = "messaging") -> list[str]:
    """How the tools a server advertised (name -> tool) differ from a profile's contract, by admitted values."""
    differences = []
    for name, contract in tool_contracts(profile).items():
        tool = advertised.get(name, {})
        for key, expected in (("inputSchema", contract.input_schema), ("outputSchema", contract.output_schema)):
            where = first_difference(canonical_schema(expected), canonical_schema(tool.get(key)))
            if where:
                differences.append(f"{name}.{key} {where}")
    return differences


def _json_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def result_alternative(output_schema: Mapping[str, Any]) -> dict[str, Any]:
    """The success alternative of a bundled output schema; :class:`ContractShapeError` if it has another form."""
    alternatives = output_schema.get("oneOf")
    if (output_schema.get("type") != "object" or not isinstance(alternatives, list) or len(alternatives) != 2
            or alternatives[1] != {"$ref": ERROR_RESULT_REF}):
        raise ContractShapeError("an outputSchema is {type: object, oneOf: [RESULT, {$ref: error_result}]}")
    result = dict(alternatives[0])
    if "$defs" in output_schema:
        result["$defs"] = output_schema["$defs"]
    return result


@lru_cache(maxsize=None)
def tool_contracts(profile: str = "messaging") -> Mapping[str, ToolContract]:
    """Every tool of a profile's contract by name, in contract order."""
    folder, names = PROFILE_TOOLS[profile]
    out = {}
    for name in names:
        raw = json.loads((CONTRACTS_DIR / folder / f"{name}.json").read_text("utf-8"))
        out[name] = ToolContract(name=name, input_schema=bundle(raw["inputSchema"]),
                                 output_schema=bundle(raw["outputSchema"]), errors=frozenset(raw["errors"]),
                                 profile=profile)
    return out


def tool_contract(name: str, profile: str = "messaging") -> ToolContract:
    return tool_contracts(profile)[name]


@lru_cache(maxsize=None)
def utf8_byte_limits() -> Mapping[str, int]:
    """``definitions.json``'s ``maxUtf8Bytes``: definition name -> the most UTF-8 bytes its strings hold.

    These are the bounds JSON Schema cannot state (``maxLength`` counts
    characters); a property whose schema is ``{"$ref": ".../$defs/NAME"}`` has
    the bound of ``NAME``.
    """
    document = json.loads((CONTRACTS_DIR / "definitions.json").read_text("utf-8"))
    return {name: limit for name, limit in document.get("maxUtf8Bytes", {}).items() if not name.startswith("$")}


def body_byte_limit() -> int:
    """The most UTF-8 bytes a message, task or reply body holds."""
    return utf8_byte_limits()["body"]


@lru_cache(maxsize=None)
def error_codes() -> frozenset[str]:
    """Every machine-readable error code the contract defines."""
    return frozenset(definitions()["error"]["properties"]["code"]["enum"])


@lru_cache(maxsize=None)
def error_result_validator() -> Draft202012Validator:
    return validator_class()(bundle({"$ref": "definitions.json#/$defs/error_result"}))


def error_result_violations(structured: Any) -> list[str]:
    """Why ``structured`` is not ``{"error": {code, message, details?}}`` (empty when it is)."""
    return _violations(error_result_validator(), structured)


@lru_cache(maxsize=None)
def _validator(name: str, which: str, profile: str) -> Draft202012Validator:
    contract = tool_contracts(profile)[name]
    schema = {"input": contract.input_schema, "output": contract.output_schema,
              "result": contract.result_schema}[which]
    return validator_class()(schema)


def _violations(validator: Draft202012Validator, value: Any) -> list[str]:
    return [_describe(e) for e in sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))]


def _describe(error: ValidationError) -> str:
    where = "/".join(str(p) for p in error.absolute_path)
    message = error.message if len(error.message) <= 300 else error.message[:300] + "…"
    return f"{where}: {message}" if where else message
