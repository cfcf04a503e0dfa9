"""The tool contract as the suite checks it: schemas and declared error codes.

Read from ``contracts/tools/*.json`` (the messaging profile),
``contracts/collab/*.json`` (the collaboration profile) and
``contracts/definitions.json``, bundled into self-contained schemas exactly as
the reference server advertises them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from peerwire.contract import COLLAB_ORDER, TOOL_ORDER, bundle, definitions

from .layout import CONTRACTS_DIR

TOOL_NAMES: tuple[str, ...] = TOOL_ORDER
COLLAB_TOOL_NAMES: tuple[str, ...] = COLLAB_ORDER
PROFILE_TOOLS: Mapping[str, tuple[str, tuple[str, ...]]] = {
    "messaging": ("tools", TOOL_NAMES),
    "collab": ("collab", COLLAB_TOOL_NAMES),
}
"""Each profile's folder in ``contracts/`` and its tools, in contract order."""


@dataclass(frozen=True)
class ToolContract:
    """One tool: its input and output schemas and the error codes it may return."""

    name: str
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any]
    errors: frozenset[str]
    profile: str = "messaging"

    def input_violations(self, arguments: Any) -> list[str]:
        return _violations(_validator(self.name, "input", self.profile), arguments)

    def output_violations(self, result: Any) -> list[str]:
        return _violations(_validator(self.name, "output", self.profile), result)


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
def error_codes() -> frozenset[str]:
    """Every machine-readable error code the contract defines."""
    return frozenset(definitions()["error"]["properties"]["code"]["enum"])


@lru_cache(maxsize=None)
def error_result_validator() -> Draft202012Validator:
    return Draft202012Validator(bundle({"$ref": "definitions.json#/$defs/error_result"}))


def error_result_violations(structured: Any) -> list[str]:
    """Why ``structured`` is not ``{"error": {code, message, details?}}`` (empty when it is)."""
    return _violations(error_result_validator(), structured)


@lru_cache(maxsize=None)
def _validator(name: str, which: str, profile: str) -> Draft202012Validator:
    contract = tool_contracts(profile)[name]
    return Draft202012Validator(contract.input_schema if which == "input" else contract.output_schema)


def _violations(validator: Draft202012Validator, value: Any) -> list[str]:
    return [_describe(e) for e in sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))]


def _describe(error: ValidationError) -> str:
    where = "/".join(str(p) for p in error.absolute_path)
    message = error.message if len(error.message) <= 300 else error.message[:300] + "…"
    return f"{where}: {message}" if where else message
