"""The suite calls only the documented interface of a provisioner (``harness/contract/interface.py``).

Every call the suite's code makes on a provisioner object (``provisioner.x(...)``, ``case_app.x``,
``shared_app.x``, and a hook fetched by name, ``_hook(provisioner, "x")`` or ``getattr(provisioner, "x")``)
must name a member of :class:`~harness.contract.interface.Provisioner` or
:class:`~harness.contract.interface.OptionalHooks`. A method renamed in the interface but not in a test
(``stop_app`` for ``make_unavailable``) would otherwise pass unnoticed against the reference, whose
provisioner still has the old name, and fail as an AttributeError counted against another implementation.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
from pathlib import Path

import pytest

import harness.contract
from harness.contract import interface
from harness.contract.manifest import manifest

CONTRACT_DIR = Path(harness.contract.__file__).resolve().parent
RECEIVERS = ("provisioner", "case_app", "shared_app")
"""What the suite's code names a provisioner object (a variable, attribute or fixture)."""
INTERFACE_MODULES = ("interface.py", "reference.py")
"""The interface itself, and the reference's own provisioner (which may call its own methods)."""


def documented() -> set[str]:
    members = set()
    for protocol in (interface.Provisioner, interface.OptionalHooks):
        members |= {name for name, _ in inspect.getmembers(protocol) if not name.startswith("_")}
        members |= set(getattr(protocol, "__annotations__", {}))
    return members


def _receiver_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def provisioner_uses(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, member) for every member of a provisioner-named object the code reads or fetches by name."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _receiver_name(node.value) in RECEIVERS:
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.Call) and len(node.args) >= 2 and _receiver_name(node.args[0]) in RECEIVERS \
                and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str) \
                and _receiver_name(node.func) in ("getattr", "hasattr", "_hook"):
            found.append((node.lineno, node.args[1].value))
    return found


def suite_sources() -> list[Path]:
    return sorted(p for p in CONTRACT_DIR.rglob("*.py") if p.name not in INTERFACE_MODULES)


def test_the_interface_has_the_members_the_check_relies_on():
    assert {"start", "register", "crash", "make_unavailable", "make_available", "stop", "freeze", "thaw",
            "set_agent", "capabilities", "agent_kinds"} <= documented()
    assert "stop_app" not in documented()


@pytest.mark.parametrize("path", suite_sources(), ids=lambda p: str(p.relative_to(CONTRACT_DIR)))
def test_the_suite_calls_only_documented_provisioner_members(path):
    allowed = documented()
    wrong = [f"{path.name}:{line}: {member}" for line, member in provisioner_uses(ast.parse(path.read_text("utf-8")))
             if member not in allowed]
    assert not wrong, f"not in harness/contract/interface.py's Provisioner or OptionalHooks: {wrong}"


def test_the_check_finds_a_renamed_method():
    code = "def t(own_servers, case_app):\n    own_servers.provisioner.stop_app()\n    _hook(case_app, 'freeze')\n"
    uses = provisioner_uses(ast.parse(code))
    assert (2, "stop_app") in uses and (3, "freeze") in uses
    assert "stop_app" not in documented()


# -- error codes: the README, the schema and the requirements agree -----------------------------------------

CONTRACTS = Path(harness.contract.__file__).resolve().parents[2] / "contracts"
SNAKE = re.compile(r"\b[a-z]+(?:_[a-z0-9]+)+\b")
NOT_CODES = {"active_children", "agent_message", "attach_codex", "child_mcp_servers", "encrypted_call_args",
             "encrypted_content", "retained_children", "steer_context"}
"""Snake-case words requirements use that are neither an error code nor a schema name: capabilities, record
kinds of a provider, configuration keys."""


def _schema_codes() -> set[str]:
    return set(json.loads((CONTRACTS / "definitions.json").read_text("utf-8"))["$defs"]["error"]["properties"]
               ["code"]["enum"])


def _schema_names() -> set[str]:
    names: set[str] = set()

    def walk(value: object) -> None:
        if isinstance(value, dict):
            names.update(value)
            for key in ("enum", "const"):
                found = value.get(key)
                names.update(v for v in (found if isinstance(found, list) else [found]) if isinstance(v, str))
            for inner in value.values():
                walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)

    for path in CONTRACTS.rglob("*.json"):
        if "cases" not in path.relative_to(CONTRACTS).parts:
            walk(json.loads(path.read_text("utf-8")))
    return names


def test_the_readme_lists_exactly_the_schemas_error_codes():
    readme = (CONTRACTS / "README.md").read_text("utf-8")
    start = readme.index("## Error codes")
    table = readme[start:readme.index("\n## ", start + 1)]
    listed = set(re.findall(r"^\| `([a-z_]+)` \|", table, flags=re.MULTILINE))
    assert listed == _schema_codes()


def test_every_tool_declares_only_schema_codes():
    for path in [*CONTRACTS.glob("tools/*.json"), *CONTRACTS.glob("collab/*.json")]:
        declared = set(json.loads(path.read_text("utf-8")).get("errors", []))
        assert declared <= _schema_codes(), (path.name, declared - _schema_codes())


def test_every_error_code_a_requirement_names_is_in_the_schema():
    """A snake-case word in a requirement's sentence is a schema name, an error code, or listed in NOT_CODES."""
    known = _schema_names() | _schema_codes() | NOT_CODES
    unknown = {(r.id, word) for r in manifest() for word in SNAKE.findall(r.behaviour) if word not in known}
    assert not unknown, f"add these codes to definitions.json and contracts/README.md: {sorted(unknown)}"
