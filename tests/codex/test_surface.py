"""The declared protocol surface (``peerwire.codex.surface``) is the one the code uses.

Three witnesses keep the table honest: the string literals of the modules it
names (every method they mention is declared, every declared field is
mentioned), the pinned Codex's schema (every declared method, field and enum
value exists there, with the declared kind), and the recorded fixtures (every
params field the adapter actually sent is declared).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from harness.codex.protocol import Node, ProtocolSchema, shape_of
from harness.codex.fixtures import FIXTURE_DIR, load
from peerwire.codex.capabilities import DECLARATIONS
from peerwire.codex.surface import READERS, SURFACE, use_of

pytestmark = pytest.mark.codex

ROOT = Path(__file__).resolve().parents[2]

ADAPTER = ("peerwire/codex/adapter.py", "peerwire/codex/app_server.py", "peerwire/codex/outcome.py")
NOT_PROTOCOL = {"kind"}
"""Literals of the adapter that happen to be protocol field names but mean something else (a record's kind)."""


@functools.cache
def literals(module: str) -> frozenset[str]:
    tree = ast.parse((ROOT / module).read_text(encoding="utf-8"))
    return frozenset(node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
                     and isinstance(node.value, str))


def every_literal() -> set[str]:
    return set().union(*(literals(module) for module in READERS))


def all_methods(schema: ProtocolSchema) -> set[str]:
    return schema.methods("request") | schema.methods("notification") | schema.methods("server_request")


def test_every_method_the_readers_name_is_declared_and_every_declared_one_is_named(pinned_protocol) -> None:
    # Slash-less method names ("error", "warning") are ordinary words too: only those declared are sought.
    named = {text for text in every_literal() & all_methods(pinned_protocol) if "/" in text}
    declared = {use.method for use in SURFACE}
    assert named == {method for method in declared if "/" in method}
    assert {method for method in declared if "/" not in method} <= every_literal()


def test_every_declared_field_is_mentioned_by_a_reader() -> None:
    mentioned = every_literal()
    for use in SURFACE:
        for path in (*use.sends, *use.reads):
            missing = [part for part in path.split(".") if part not in mentioned]
            assert not missing, f"{use.method}: {path}: no reader mentions {missing}"


def protocol_names(schema: ProtocolSchema) -> set[str]:
    """Every property name in the params and answers of the declared requests and notifications."""
    names: set[str] = set()

    def collect(node: Node, depth: int) -> None:
        for variant in node.variants():
            for name, child in (variant.schema.get("properties") or {}).items():
                names.add(name)
                if depth < 5:
                    collect(Node(variant.document, child), depth + 1)
            if isinstance(variant.schema.get("items"), dict) and depth < 5:
                collect(Node(variant.document, variant.schema["items"]), depth + 1)

    for use in SURFACE:
        if use.kind != "server_request":
            for node in (pinned := schema.params(use.kind, use.method), schema.result(use.kind, use.method)):
                if node is not None:
                    collect(node, 0)
            assert pinned is not None
    return names


def test_the_adapter_touches_no_protocol_field_the_table_omits(pinned_protocol) -> None:
    declared = {part for use in SURFACE for path in (*use.sends, *use.reads) for part in path.split(".")}
    names = protocol_names(pinned_protocol)
    for module in ADAPTER:
        undeclared = (literals(module) & names) - declared - NOT_PROTOCOL
        assert not undeclared, f"{module} uses protocol fields the surface does not declare: {sorted(undeclared)}"


@pytest.mark.parametrize("use", SURFACE, ids=lambda use: use.method)
def test_the_pinned_schema_has_every_declared_method_field_and_value(use, pinned_protocol: ProtocolSchema) -> None:
    assert pinned_protocol.kind_of(use.method) == use.kind
    for path in use.sends:
        side = "result" if use.kind == "server_request" else "params"
        assert pinned_protocol.lookup(use.kind, use.method, side, path), f"{use.method} {side}.{path}"
    for path in use.reads:
        side = "result" if use.kind == "request" else "params"
        nodes = pinned_protocol.lookup(use.kind, use.method, side, path)
        assert nodes, f"{use.method} {side}.{path}"
        if path in use.values:
            shape = shape_of(nodes)
            assert shape.values is not None and set(use.values[path]) <= shape.values, (path, shape)
    assert set(use.values) <= set(use.reads)


def test_every_field_the_adapter_sent_in_a_fixture_is_declared() -> None:
    for fixture in sorted(FIXTURE_DIR.glob("*.jsonl")):
        for line in load(fixture):
            message = line.get("message") or {}
            if line["dir"] == "sent" and "id" in message and "method" in message:
                declared = {path.split(".")[0] for path in use_of(message["method"]).sends}
                sent = set(message.get("params") or {})
                assert sent <= declared, f"{fixture.name}: {message['method']} sent {sorted(sent - declared)}"


def test_every_fact_a_capability_needs_is_part_of_the_surface() -> None:
    for declaration in DECLARATIONS.values():
        if declaration.since is None:
            continue  # not used yet: nothing depends on it
        for fact in declaration.needs:
            use = use_of(fact.method)
            assert fact.path is None or fact.path in (*use.sends, *use.reads), f"{declaration.capability}: {fact}"


def test_a_method_outside_the_surface_is_not_found() -> None:
    with pytest.raises(KeyError):
        use_of("thread/archive")


def test_the_readers_exist() -> None:
    assert all((ROOT / module).is_file() for module in READERS)
    assert set(ADAPTER) <= set(READERS)
    assert Path(__file__).name not in READERS
