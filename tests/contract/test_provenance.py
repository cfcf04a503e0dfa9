"""Provenance a user can read: every requirement's source resolves to text that ships with peerwire.

A contract rule cites a section of ``contracts/SPEC.md`` by its anchor; a
JSON-RPC 2.0 or MCP rule cites its spec's section and quotes its sentence (the
manifest enforces the quote). Any further part of a source (after ``; ``) names
a file in the repository. Nothing cites a document a user who installed the
package cannot open.
"""

from __future__ import annotations

import re
from pathlib import Path

from harness.contract.layout import CONTRACTS_DIR
from harness.contract.manifest import Origin, manifest

ROOT = CONTRACTS_DIR.parent
SPEC = CONTRACTS_DIR / "SPEC.md"
CITATION = re.compile(r"^contracts/SPEC\.md#([a-z0-9-]+)$")


def anchors() -> set[str]:
    return set(re.findall(r'<a id="([a-z0-9-]+)"></a>', SPEC.read_text("utf-8")))


def problems_of(source: str, known: set[str]) -> list[str]:
    """Why ``source`` does not resolve to shipped text (empty when it does)."""
    first, *more = source.split("; ")
    if Origin.of(first) is not Origin.CONTRACT:
        return []  # a JSON-RPC or MCP section (more parts: more sections of the same spec), its quote enforced
    problems = []
    cited = CITATION.match(first)
    if cited is None:
        problems.append(f"{first!r} is not a section of contracts/SPEC.md (contracts/SPEC.md#<anchor>)")
    elif cited.group(1) not in known:
        problems.append(f"contracts/SPEC.md has no anchor {cited.group(1)!r}")
    for part in more:
        path = part.split(" (")[0].split("#")[0].strip()
        if Origin.of(part) is not Origin.CONTRACT:
            continue
        if path.startswith("/") or ".." in Path(path).parts or not (ROOT / path).is_file():
            problems.append(f"{part!r} names no file of the repository")
    return problems


def test_the_contracts_own_rules_ship_with_it_under_stable_anchors():
    known = anchors()
    assert {"tools-receive-messages", "tools-wait-agent", "wire", "identity", "targets"} <= known, sorted(known)
    text = SPEC.read_text("utf-8")
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert len(headings) == len(known), "every section has exactly one anchor"


def test_every_requirement_source_resolves_to_shipped_text():
    known = anchors()
    unresolved = {r.id: problems_of(r.source, known) for r in manifest()}
    unresolved = {rid: found for rid, found in unresolved.items() if found}
    assert not unresolved, f"{len(unresolved)} sources do not resolve: {dict(list(unresolved.items())[:10])}"


def test_a_source_outside_the_project_is_refused():
    known = anchors()
    for outside in ("SPEC.md § The reference messaging core (contract v1)", "reference/tools.txt § Tool contract",
                    "contracts/SPEC.md#no-such-section",
                    "contracts/SPEC.md#wire; reference/tools.txt (\"a sentence\")",
                    "contracts/SPEC.md#wire; /etc/passwd", "contracts/SPEC.md#wire; ../outside.md"):
        assert problems_of(outside, known), outside
    for inside in ("contracts/SPEC.md#wire",
                   "contracts/SPEC.md#tools-receive-messages; contracts/tools/receive_messages.json (\"Waits.\")",
                   "JSON-RPC 2.0 § 5 Response object", "MCP 2025-11-25 § Basic / Lifecycle"):
        assert not problems_of(inside, known), inside
