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
from pathlib import Path

import pytest

import harness.contract
from harness.contract import interface

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
