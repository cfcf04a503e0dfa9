"""Dependencies split by use: what each entry point imports is installed by its extra.

``pip install peerwire`` must give a working core, ``peerwire[suite]`` a working contract
suite, ``peerwire[accept]`` a working acceptance runner. Every import of every module an entry
point reaches (read with ``ast``, imports inside functions included) must come from the
standard library, the project, or a distribution the use's requirements install (with what
those depend on).
"""

from __future__ import annotations

import functools
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.test_architecture import PACKAGES, dependency_graph, modules, reach, statements

ROOT = Path(__file__).resolve().parents[1]
OWN = {*PACKAGES, "peerwire_data"}

USES = {
    "core": ((), ("peerwire.cli", "peerwire.__main__", "peerwire.mcp_server", "peerwire.app")),
    "suite": (("suite",), ("harness.contract.cli", "harness.contract.plugin", "harness.contract.reference",
                           *sorted(m for m in modules("harness") if m.startswith("harness.contract.suite.")),
                           "harness.report.cli", "harness.cli", "harness.npm")),
    "accept": (("accept",), ("harness.acceptance.run", "harness.acceptance.record", "harness.acceptance.drift",
                             "harness.report.cli", "harness.cli")),
}
"""A use -> (its extras, the modules its commands start from)."""


def requirement_name(requirement: str) -> str:
    return Requirement(requirement).name.lower().replace("_", "-")


def installed_by(requirements: list[str]) -> set[str]:
    """The top-level import names the distributions ``requirements`` name provide, with their dependencies'
    (those this Python needs: environment markers are evaluated, extras of dependencies are not followed)."""
    names: set[str] = set()
    todo = [requirement_name(r) for r in requirements]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        distribution = metadata.distribution(name)
        names |= set((distribution.read_text("top_level.txt") or "").split())
        names |= {f.parts[0].removesuffix(".py") for f in distribution.files or ()
                  if f.parts[0].endswith(".py") or (len(f.parts) > 1 and f.parts[1] == "__init__.py")}
        for text in distribution.requires or ():
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement_name(text))
    return names


@functools.cache
def graph() -> dict[str, set[str]]:
    return dependency_graph()


def third_party_imports(start: str) -> dict[str, str]:
    """Every top-level module imported by ``start`` and what it reaches, outside the stdlib and the project."""
    known = {name: path for package in PACKAGES for name, path in modules(package).items()}
    found: dict[str, str] = {}
    for module in sorted({start, *reach(graph(), start)} & set(known)):
        for base, _ in statements(module, known[module]):
            top = base.partition(".")[0]
            if top and top not in OWN and top not in sys.stdlib_module_names and top != "__future__":
                found.setdefault(top, module)
    return found


@pytest.mark.parametrize("use", sorted(USES))
def test_every_import_of_a_use_is_installed_by_its_extra(use: str) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras, starts = USES[use]
    allowed = installed_by([*project["dependencies"], *(r for e in extras for r in project["optional-dependencies"][e])])
    missing = {top: module for start in starts for top, module in third_party_imports(start).items()
               if top not in allowed}
    assert missing == {}, f"{use}: imported but not installed by {extras or 'the core'}: {missing}"


def test_the_core_needs_nothing_but_jsonschema() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert [requirement_name(r) for r in project["dependencies"]] == ["jsonschema"]
