"""How another Codex version's protocol differs on the surface peerwire uses.

Only the methods, notifications, server requests and fields of
:data:`peerwire.codex.surface.SURFACE` are compared; everything else in the
schema may change freely. Per method the verdict is

* ``breaking``: something peerwire sends or reads is gone or changed
  incompatibly (a field missing, a type narrowed or widened, an enum value
  peerwire branches on removed, a newly required field peerwire does not send);
* ``additive``: the method's schema changed, but nothing peerwire uses did
  (new fields, new enum values at a read path, fields peerwire ignores);
* ``unchanged``: the schemas are the same.

A field the adapter leaves out for older versions (an optional field of
:data:`peerwire.codex.capabilities.OPTIONAL_FIELDS`) still counts as breaking
when missing, with a note that the adapter copes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from peerwire.codex.capabilities import OPTIONAL_FIELDS
from peerwire.codex.surface import SURFACE, Use

from harness.codex.protocol import Node, ProtocolSchema, shape_of

Verdict = Literal["breaking", "additive", "unchanged"]
_DEPTH = 8


@dataclass
class MethodDrift:
    method: str
    kind: str
    verdict: Verdict = "unchanged"
    changes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"method": self.method, "kind": self.kind, "verdict": self.verdict, "changes": self.changes}


def diff_surface(base: ProtocolSchema, other: ProtocolSchema) -> list[MethodDrift]:
    """One :class:`MethodDrift` per declared use, comparing ``other`` against ``base`` (the pinned schema)."""
    return [_diff_use(use, base, other) for use in SURFACE]


def _diff_use(use: Use, base: ProtocolSchema, other: ProtocolSchema) -> MethodDrift:
    drift = MethodDrift(use.method, use.kind)
    breaking: list[str] = []
    additive: list[str] = []
    if use.method not in other.methods(use.kind):
        if use.kind == "server_request":
            additive.append(f"{other.version} never sends it (peerwire declines it when it does)")
        else:
            breaking.append(f"{other.version} has no {use.kind.replace('_', ' ')} {use.method}")
        return _conclude(drift, breaking, additive)
    send_side = "result" if use.kind == "server_request" else "params"
    read_side = "result" if use.kind == "request" else "params"
    for path in use.sends:
        ours, theirs = (schema.lookup(use.kind, use.method, send_side, path) for schema in (base, other))
        if not theirs:
            breaking.append(f"{send_side}.{path} is gone (peerwire sends it){_coping(use.method, path)}")
        elif ours and (lost := shape_of(ours).types - shape_of(theirs).types):
            breaking.append(f"{send_side}.{path} no longer accepts {', '.join(sorted(lost))}")
    if use.kind == "request":
        sent = {path.split(".")[0] for path in use.sends}
        for name in sorted(other.required(use.kind, use.method) - base.required(use.kind, use.method) - sent):
            breaking.append(f"params.{name} is now required and peerwire does not send it")
    for path in use.reads:
        ours, theirs = (schema.lookup(use.kind, use.method, read_side, path) for schema in (base, other))
        if not theirs:
            breaking.append(f"{read_side}.{path} is gone (peerwire reads it)")
            continue
        before, after = shape_of(ours), shape_of(theirs)
        if gained := after.types - before.types:
            breaking.append(f"{read_side}.{path} may now be {', '.join(sorted(gained))}")
        if path in use.values and after.values is not None:
            if lost := set(use.values[path]) - after.values:
                breaking.append(f"{read_side}.{path} no longer has {', '.join(map(repr, sorted(lost)))}")
        if before.values is not None and after.values is not None:
            if new := after.values - before.values:
                additive.append(f"{read_side}.{path} gains {', '.join(map(repr, sorted(new)))}")
            if gone := (before.values - after.values) - set(use.values.get(path, ())):
                additive.append(f"{read_side}.{path} drops {', '.join(map(repr, sorted(gone)))} (peerwire does "
                                f"not branch on it)")
    if not breaking and not additive:
        additive += _unused_changes(use, base, other)
    return _conclude(drift, breaking, additive)


def _conclude(drift: MethodDrift, breaking: list[str], additive: list[str]) -> MethodDrift:
    drift.changes = breaking + additive
    drift.verdict = "breaking" if breaking else "additive" if additive else "unchanged"
    return drift


def _coping(method: str, path: str) -> str:
    for optional in OPTIONAL_FIELDS:
        if optional.method == method and optional.field == path:
            return f"; the adapter leaves it out below {optional.since}"
    return ""


def _unused_changes(use: Use, base: ProtocolSchema, other: ProtocolSchema) -> list[str]:
    """What changed in fields peerwire does not use: property names added or removed, else 'schema text'."""
    out = []
    for side in ("params", "result"):
        ours, theirs = (schema.params(use.kind, use.method) if side == "params" else schema.result(use.kind,
                        use.method) for schema in (base, other))
        if _canonical(ours) == _canonical(theirs):
            continue
        before, after = _names(ours), _names(theirs)
        added, removed = sorted(after - before), sorted(before - after)
        if added or removed:
            out.append(f"{side}: " + "; ".join(filter(None, [
                f"new {_few(added)}" if added else "", f"without {_few(removed)}" if removed else ""]))
                + " (unused by peerwire)")
        else:
            out.append(f"{side}: the schema changed in parts peerwire does not use")
    return out


def _few(names: list[str], shown: int = 6) -> str:
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


def _names(node: Node | None, depth: int = 0, prefix: str = "") -> set[str]:
    """Dotted property paths under ``node`` (arrays and unions looked through), a few levels deep."""
    if node is None or depth > 3:
        return set()
    names: set[str] = set()
    for variant in node.variants():
        for name, child in (variant.schema.get("properties") or {}).items():
            names.add(prefix + name)
            names |= _names(Node(variant.document, child), depth + 1, f"{prefix}{name}.")
        items = variant.schema.get("items")
        if isinstance(items, dict):
            names |= _names(Node(variant.document, items), depth + 1, prefix)
    return names


def _canonical(node: Node | None) -> str:
    """The schema under ``node`` with references expanded (to a bounded depth), as stable text."""
    def expand(schema: Any, document: dict[str, Any], depth: int) -> Any:
        if isinstance(schema, dict):
            if "$ref" in schema and depth < _DEPTH:
                target = Node(document, schema).resolved()
                return expand(target.schema, target.document, depth + 1)
            return {k: expand(v, document, depth) for k, v in schema.items() if k not in ("description", "title")}
        if isinstance(schema, list):
            return [expand(v, document, depth) for v in schema]
        return schema

    return "" if node is None else json.dumps(expand(node.schema, node.document, 0), sort_keys=True)
