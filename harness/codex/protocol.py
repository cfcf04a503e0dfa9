"""The app-server protocol of one Codex version, as its own generated JSON Schema says.

``codex app-server generate-json-schema --out DIR`` writes one schema per
message family: ``ClientRequest.json`` (a union over every request method,
each naming its params definition), ``ServerNotification.json``,
``ServerRequest.json``, and one file per answer (``<Name>Response.json``,
under ``v2/``, ``v1/`` or the top) whose name follows the params definition
(``TurnStartParams`` is answered by ``TurnStartResponse``).

:class:`ProtocolSchema` answers the questions the capability check and the
drift report ask: which methods exist, whether a field exists at a dotted
path (through arrays, and through every variant of a union), with which JSON
types and enum values. :func:`check_fixture` validates a recorded app-server
exchange (``fixtures/appserver/*.jsonl``) against it.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from jsonschema import Draft7Validator

from peerwire.codex.capabilities import Fact

from harness.codex.install import CodexInstallation
from harness.process.bounded import run_bounded
from harness.codex.fixtures import load

Kind = Literal["request", "notification", "server_request"]
Side = Literal["params", "result"]

GENERATE_TIMEOUT = 120.0
_FAMILIES: dict[str, str] = {"request": "ClientRequest.json", "notification": "ServerNotification.json",
                             "server_request": "ServerRequest.json"}
_MAX_ERRORS = 5


class ProtocolSchemaError(Exception):
    """The schema cannot be generated or read."""


@dataclass(frozen=True)
class Node:
    """A schema node and the document its ``$ref``s resolve in."""

    document: dict[str, Any] = field(repr=False, compare=False)
    schema: dict[str, Any]

    def __post_init__(self) -> None:
        if not isinstance(self.schema, dict):  # a boolean schema (true/false) says nothing about fields
            object.__setattr__(self, "schema", {})

    def resolved(self) -> Node:
        node, seen = self, set()
        while isinstance(node.schema.get("$ref"), str):
            ref = node.schema["$ref"]
            if ref in seen or not ref.startswith("#/"):
                break  # a recursive or external reference: stop here
            seen.add(ref)
            target: Any = node.document
            for part in ref[2:].split("/"):
                target = target.get(part, {}) if isinstance(target, dict) else {}
            node = Node(node.document, target)
        return node

    def variants(self) -> Iterator[Node]:
        """This node and, recursively, every branch of its unions and intersections (resolved)."""
        node = self.resolved()
        yield node
        for key in ("anyOf", "oneOf", "allOf"):
            for branch in node.schema.get(key) or []:
                yield from Node(node.document, branch).variants()

    def children(self, name: str) -> list[Node]:
        """The nodes property ``name`` can have, looking through arrays and unions."""
        found = []
        for variant in self.variants():
            properties = variant.schema.get("properties") or {}
            if name in properties:
                found.append(Node(variant.document, properties[name]))
            items = variant.schema.get("items")
            if isinstance(items, dict):
                found += Node(variant.document, items).children(name)
        return found


@dataclass(frozen=True)
class Shape:
    """What a schema allows at one path: JSON types, enum values (None: not an enum), required-ness."""

    types: frozenset[str]
    values: frozenset[str] | None

    def to_json(self) -> dict[str, Any]:
        return {"types": sorted(self.types), "values": None if self.values is None else sorted(self.values)}


def shape_of(nodes: Iterable[Node]) -> Shape:
    types: set[str] = set()
    values: set[str] = set()
    open_values = False
    for node in nodes:
        for variant in node.variants():
            schema = variant.schema
            declared = schema.get("type")
            types.update([declared] if isinstance(declared, str) else declared or [])
            if "enum" in schema:
                values.update(str(v) for v in schema["enum"] if v is not None)
                types.update(_json_type(v) for v in schema["enum"])
            elif "const" in schema:
                values.add(str(schema["const"]))
                types.add(_json_type(schema["const"]))
            elif declared == "string" or (isinstance(declared, list) and "string" in declared):
                open_values = True  # any string: no closed set of values
            if "properties" in schema and not declared:
                types.add("object")
    return Shape(frozenset(types), None if open_values or not values else frozenset(values))


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value), "object")


class ProtocolSchema:
    """The protocol schema in one ``generate-json-schema`` output folder."""

    def __init__(self, root: str | os.PathLike[str], version: str | None = None):
        self.root = Path(root)
        self.version = version
        missing = [name for name in _FAMILIES.values() if not (self.root / name).is_file()]
        if missing:
            raise ProtocolSchemaError(f"{self.root} holds no app-server schema (missing {', '.join(missing)})")

    @classmethod
    def generate(cls, codex: CodexInstallation, out: str | os.PathLike[str], *,
                 timeout: float = GENERATE_TIMEOUT) -> ProtocolSchema:
        """Run ``codex app-server generate-json-schema --out OUT`` and read the result.

        Codex runs with a scratch ``CODEX_HOME``. Raises :class:`ProtocolSchemaError`
        when the command is missing (releases before 0.58.0), fails or hangs.
        """
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        env = codex.child_env()
        with tempfile.TemporaryDirectory(prefix="peerwire-schema-home-") as scratch:
            env["CODEX_HOME"] = scratch
            try:
                result = run_bounded([str(codex.program), "app-server", "generate-json-schema", "--out",
                                      str(out)], env=env, stdin=subprocess.DEVNULL, capture_output=True,
                                     text=True, timeout=timeout)
            except subprocess.TimeoutExpired as exc:
                raise ProtocolSchemaError(f"Codex {codex.version} did not generate its schema within "
                                          f"{timeout:.0f} s") from exc
        if result.returncode != 0:
            tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
            raise ProtocolSchemaError(f"Codex {codex.version} cannot generate its app-server schema "
                                      f"(status {result.returncode}): {tail}")
        return cls(out, codex.version)

    # -- documents ---------------------------------------------------------------------------

    @functools.cache  # noqa: B019  (one schema per Codex install, kept for the process's life)
    def _document(self, name: str) -> dict[str, Any]:
        return json.loads((self.root / name).read_text(encoding="utf-8"))

    @functools.cache  # noqa: B019  (as above)
    def _branches(self, kind: Kind) -> dict[str, Node]:
        """Method -> the union branch of its family document (``method``, ``params`` ...)."""
        document = self._document(_FAMILIES[kind])
        out: dict[str, Node] = {}
        for branch in document.get("oneOf") or []:
            method = (branch.get("properties") or {}).get("method") or {}
            for name in method.get("enum") or ([method["const"]] if "const" in method else []):
                out[name] = Node(document, branch)
        return out

    def methods(self, kind: Kind) -> set[str]:
        return set(self._branches(kind))

    def kind_of(self, method: str) -> Kind | None:
        return next((kind for kind in _FAMILIES if method in self._branches(kind)), None)  # type: ignore[misc]

    def params(self, kind: Kind, method: str) -> Node | None:
        branch = self._branches(kind).get(method)
        if branch is None:
            return None
        params = (branch.schema.get("properties") or {}).get("params")
        return Node(branch.document, params).resolved() if isinstance(params, dict) else None

    def result(self, kind: Kind, method: str) -> Node | None:
        """The answer's schema: ``<Name>Response`` for params ``<Name>Params``; None when there is none."""
        branch = self._branches(kind).get(method)
        if branch is None:
            return None
        ref = ((branch.schema.get("properties") or {}).get("params") or {}).get("$ref", "")
        name = ref.rsplit("/", 1)[-1]
        if not name.endswith("Params"):
            return None
        file_name = f"{name.removesuffix('Params')}Response.json"
        for folder in ("v2", "v1", "."):
            path = self.root / folder / file_name
            if path.is_file():
                document = json.loads(path.read_text(encoding="utf-8"))
                return Node(document, document)
        return None

    def params_validator(self, kind: Kind, method: str) -> Draft7Validator | None:
        """A validator of the method's ``params``; None when the schema lacks the method."""
        branch = self._branches(kind).get(method)
        if branch is None:
            return None
        params = (branch.schema.get("properties") or {}).get("params") or {}
        # The params definition as the root schema, its document's definitions in reach of "$ref".
        return _validator({**{k: v for k, v in branch.document.items() if k != "oneOf"}, **params}
                          if "$ref" not in params else {"definitions": branch.document.get("definitions", {}),
                                                        "$ref": params["$ref"]})

    # -- questions -----------------------------------------------------------------------------

    def lookup(self, kind: Kind, method: str, side: Side, path: str) -> list[Node]:
        """The nodes at dotted ``path`` in the method's params or result; [] when it does not exist."""
        node = self.params(kind, method) if side == "params" else self.result(kind, method)
        nodes = [node] if node is not None else []
        for part in path.split("."):
            nodes = [child for n in nodes for child in n.children(part)]
        return nodes

    def required(self, kind: Kind, method: str) -> set[str]:
        """The params fields the method requires."""
        node = self.params(kind, method)
        if node is None:
            return set()
        return {name for variant in node.variants() for name in variant.schema.get("required") or []}

    def offers(self, fact: Fact) -> bool:
        kind = self.kind_of(fact.method)
        if kind is None:
            return False
        return fact.path is None or bool(self.lookup(kind, fact.method, "params", fact.path))

    def offered(self, facts: Iterable[Fact]) -> set[Fact]:
        return {fact for fact in facts if self.offers(fact)}


@functools.cache
def _validator_for(text: str) -> Draft7Validator:
    return Draft7Validator(json.loads(text))


def _validator(document: dict[str, Any]) -> Draft7Validator:
    return _validator_for(json.dumps(document, sort_keys=True))


# -- recorded fixtures ----------------------------------------------------------------------------


@dataclass
class FixtureCheck:
    """One fixture validated against one schema.

    ``checked`` counts the messages validated; ``errors`` says what failed;
    ``not_offered`` lists notifications the fixture holds whose method this
    schema does not have (another version would simply not send them).
    """

    fixture: str
    checked: int = 0
    errors: list[str] = field(default_factory=list)
    not_offered: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_json(self) -> dict[str, Any]:
        return {"fixture": self.fixture, "ok": self.ok, "checked": self.checked, "errors": self.errors,
                "not_offered": self.not_offered}


def check_fixture(path: Path, schema: ProtocolSchema, *, strict: bool = True) -> FixtureCheck:
    """Validate every request the adapter sent, every notification and every answer in a fixture.

    Fixture lines are ``{"dir": "sent"|"received", "message"}`` with
    ``{"dir": "session"}`` markers between app-server sessions (request ids
    restart per session). A request's and a notification's ``params`` are
    checked against their method's params definition, an answer against its
    request's ``<Name>Response`` schema where the schema has one. A request
    whose method the schema lacks is an error; so is such a notification when
    ``strict`` (the schema of the version that recorded the fixture), while
    otherwise it is only listed in ``not_offered``.
    """
    check = FixtureCheck(path.stem)
    methods: dict[Any, str] = {}

    def judge(what: str, validator: Draft7Validator, instance: Any) -> None:
        check.checked += 1
        for error in validator.iter_errors(instance):
            if len(check.errors) >= _MAX_ERRORS:
                break
            where = "/".join(map(str, error.absolute_path))
            check.errors.append(f"{what}{' at ' + where if where else ''}: {error.message[:200]}")

    for line in load(path):
        if line["dir"] == "session":
            methods.clear()
            continue
        message = line["message"]
        method = message.get("method")
        if line["dir"] == "sent" and "id" in message and method:
            methods[message["id"]] = method
            validator = schema.params_validator("request", method)
            if validator is None:
                check.errors.append(f"{method} request: Codex {schema.version or ''} has no such method")
            else:
                judge(f"{method} request", validator, message.get("params"))
        elif line["dir"] == "received" and method and "id" not in message:
            validator = schema.params_validator("notification", method)
            if validator is not None:
                judge(f"{method} notification", validator, message.get("params"))
            elif strict:
                check.errors.append(f"{method} notification: not in the schema")
            elif method not in check.not_offered:
                check.not_offered.append(method)
        elif line["dir"] == "received" and "result" in message and message.get("id") in methods:
            answer = schema.result("request", methods[message["id"]])
            if answer is not None:
                judge(f"{methods[message['id']]} answer", _validator(answer.document), message["result"])
    return check
