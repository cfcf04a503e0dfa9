"""The tool contract, loaded from ``contracts/`` (the one source of truth).

Tool files refer to shared definitions (``definitions.json#/$defs/NAME``); the
loader bundles every schema into a self-contained document with local
``$defs`` so that MCP clients, which resolve no external references, get
exactly what the files say.
"""

from __future__ import annotations

import copy
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import Code, PeerwireError
from .jsonrpc import lone_surrogate_at
from .limits import MAX_BODY_BYTES
from .profiles import COLLAB, MESSAGING
from .registry_rules import is_broadcast
from .resources import PackageDataMissing, contracts
from .schema_pattern import validator_class

if TYPE_CHECKING:  # jsonschema loads on the first validation, not on import (the MCP server never needs it)
    from jsonschema.protocols import Validator
    from jsonschema.exceptions import ValidationError

TOOL_ORDER = (
    "send_message",
    "followup_task",
    "receive_messages",
    "reply",
    "wait_agent",
    "interrupt_agent",
    "list_agents",
)
COLLAB_ORDER = ("spawn_agent", "send_message", "followup_task", "wait_agent", "list_agents", "interrupt_agent")

PROFILES = {MESSAGING: ("tools", TOOL_ORDER), COLLAB: ("collab", COLLAB_ORDER)}
"""Each tool profile's folder in ``contracts/`` and its tools in order (:mod:`peerwire.profiles`)."""
_EXTERNAL = "definitions.json#/$defs/"


def contracts_dir() -> Path:
    """``$PEERWIRE_CONTRACTS`` or the contract shipped as package data (:func:`peerwire.resources.contracts`)."""
    override = os.environ.get("PEERWIRE_CONTRACTS")
    try:
        path = Path(override) if override else contracts()
    except PackageDataMissing as exc:
        raise PeerwireError(Code.INTERNAL, f"{exc}, or set PEERWIRE_CONTRACTS") from None
    if not (path / "definitions.json").is_file():
        raise PeerwireError(
            Code.INTERNAL,
            f"contract schemas not found in {path}; reinstall peerwire (in a checkout: pip install -e .) "
            "or set PEERWIRE_CONTRACTS",
        )
    return path


@lru_cache(maxsize=None)
def definitions() -> dict[str, Any]:
    return _document("definitions.json")["$defs"]


@lru_cache(maxsize=None)
def _document(name: str) -> dict[str, Any]:
    return json.loads((contracts_dir() / name).read_text("utf-8"))


@lru_cache(maxsize=None)
def document_validator(name: str) -> "Validator":
    """A validator for a document schema in ``contracts/`` (e.g. ``export.schema.json``).

    The schema's references into ``definitions.json`` resolve to that file, so
    each shared shape keeps its one definition.
    """
    from referencing import Registry, Resource

    shared = _document("definitions.json")
    registry = Registry().with_resource(shared["$id"], Resource.from_contents(shared))
    return validator_class()(_document(name), registry=registry)


def bundle(schema: dict[str, Any]) -> dict[str, Any]:
    """A self-contained copy of ``schema`` with every shared definition it uses inlined."""
    defs = definitions()
    needed: dict[str, Any] = {}

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            out = {}
            for key, value in node.items():
                if key == "$ref" and isinstance(value, str) and value.startswith(_EXTERNAL):
                    name = value[len(_EXTERNAL):]
                    add(name)
                    out[key] = f"#/$defs/{name}"
                else:
                    out[key] = walk(value)
            return out
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    def add(name: str) -> None:
        if name in needed:
            return
        needed[name] = None  # reserve first: definitions may refer to each other
        needed[name] = walk_local(copy.deepcopy(defs[name]))

    def walk_local(node: Any) -> Any:
        # Inside definitions.json, references are local ("#/$defs/x").
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "$ref" and isinstance(value, str) and value.startswith("#/$defs/"):
                    add(value[len("#/$defs/"):])
                else:
                    walk_local(value)
        elif isinstance(node, list):
            for v in node:
                walk_local(v)
        return node

    root = walk(schema)
    # MCP wants an object schema at the root, not a bare reference.
    if set(root) <= {"$ref", "description"} and root.get("$ref", "").startswith("#/$defs/"):
        root = {**copy.deepcopy(needed[root["$ref"][len("#/$defs/"):]]), **{k: v for k, v in root.items() if k != "$ref"}}
    if needed:
        root["$defs"] = dict(sorted(needed.items()))
    return root


@lru_cache(maxsize=None)
def tools(profile: str = MESSAGING) -> tuple[dict[str, Any], ...]:
    """The tool definitions as ``tools/list`` advertises them, in contract order."""
    folder, order = PROFILES[profile]
    out = []
    for name in order:
        raw = json.loads((contracts_dir() / folder / f"{name}.json").read_text("utf-8"))
        out.append({
            "name": raw["name"],
            "title": raw["title"],
            "description": raw["description"],
            "inputSchema": bundle(raw["inputSchema"]),
            "outputSchema": bundle(raw["outputSchema"]),
        })
    return tuple(out)


def tool(name: str, profile: str = MESSAGING) -> dict[str, Any]:
    for t in tools(profile):
        if t["name"] == name:
            return t
    raise KeyError(name)


@lru_cache(maxsize=None)
def _validator(name: str, which: str, profile: str = MESSAGING) -> "Validator":
    return validator_class()(_inlined(tool(name, profile)[which]))


def _inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its local ``$defs`` references replaced by what they name (cycles stay references).

    The same constraints, but resolving a ``$ref`` on every call was most of the cost of validating one.
    """
    defs = schema.get("$defs", {})

    def walk(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [walk(v, seen) for v in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and ref[8:] in defs and ref[8:] not in seen:
            target = walk(defs[ref[8:]], seen + (ref[8:],))
            rest = {k: walk(v, seen) for k, v in node.items() if k != "$ref"}
            return {"allOf": [target, rest]} if rest else target
        return {k: walk(v, seen) for k, v in node.items()}

    return walk(schema, ())


@lru_cache(maxsize=None)
def definition_validator(name: str) -> "Validator":
    return validator_class()(bundle({"$ref": _EXTERNAL + name}))


@lru_cache(maxsize=None)
def _defaults(name: str, profile: str) -> tuple[tuple[str, Any], ...]:
    """The ``default`` of each argument of a tool's input schema that declares one."""
    properties = tool(name, profile)["inputSchema"].get("properties", {})
    return tuple((key, spec["default"]) for key, spec in properties.items() if "default" in spec)


def validate_arguments(name: str, arguments: Any, profile: str = MESSAGING) -> dict[str, Any]:
    """Check a tool call's arguments; raise a specific, actionable error otherwise.

    Order matters for the error a caller sees: text that is not Unicode (a lone
    surrogate) is named first, a broadcast target is named as such before
    schema validation, and an oversize body is ``message_too_large`` rather
    than a generic schema error. Returns the arguments with the schema's
    defaults filled in and integral numbers (``5.0``) as integers.
    """
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise PeerwireError(Code.INVALID_ARGUMENT, f"{name}: arguments must be an object")
    where = lone_surrogate_at(arguments)
    if where is not None:
        raise PeerwireError(Code.INVALID_ARGUMENT,
                            f"{name}: {where} holds a lone surrogate, which is not Unicode text", {"argument": where})
    if "target" in arguments and is_broadcast(arguments["target"]):
        target = arguments["target"]
        raise PeerwireError(
            Code.BROADCAST_NOT_SUPPORTED,
            "broadcast targets are not supported: name exactly one agent (see list_agents)",
            {"target": target if isinstance(target, str) else list(target) if not isinstance(target, dict) else target},
        )
    validator = _validator(name, "inputSchema", profile)
    errors = [] if validator.is_valid(arguments) else sorted(validator.iter_errors(arguments),
                                                              key=lambda e: list(e.path))
    if errors:
        raise PeerwireError(Code.INVALID_ARGUMENT, f"{name}: {_describe(errors[0])}",
                            {"violations": [_describe(e) for e in errors[:5]]})
    message = arguments.get("message")
    if isinstance(message, str):
        size = len(message.encode("utf-8", "surrogatepass"))
        if size > MAX_BODY_BYTES:
            raise PeerwireError(
                Code.MESSAGE_TOO_LARGE,
                f"message is {size} bytes; the limit is {MAX_BODY_BYTES} UTF-8 bytes: shorten it or split it",
                {"bytes": size, "limit": MAX_BODY_BYTES},
            )
    filled = {key: value for key, value in _defaults(name, profile) if key not in arguments}
    for key, value in arguments.items():
        # JSON has one number type: 5.0 is the integer 5 to the schema, and to us.
        filled[key] = int(value) if isinstance(value, float) and value.is_integer() else value
    return filled


def prepare_validators() -> None:
    """Build every tool's input validator now (the app at start-up), not on the first call of each tool."""
    for profile, (_, order) in PROFILES.items():
        for name in order:
            _validator(name, "inputSchema", profile)
            _defaults(name, profile)


def validate_output(name: str, result: Any, profile: str = MESSAGING) -> list[str]:
    """Schema violations of a tool's structured result (empty when it conforms)."""
    return [_describe(e) for e in _validator(name, "outputSchema", profile).iter_errors(result)]


def _describe(error: "ValidationError") -> str:
    where = ".".join(str(p) for p in error.absolute_path)
    if error.validator == "additionalProperties":
        return f"{error.message} (this tool takes no such argument; the sender is always the calling session)"
    if error.validator == "multipleOf" and error.validator_value == 1:  # a count typed number (see contracts/collab)
        return f"{where}: {error.instance!r} is not a whole number"
    return f"{where}: {error.message}" if where else error.message
