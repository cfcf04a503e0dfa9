"""``--provisioner`` / ``--driver module:Class``: found where Python finds it, else in the current directory.

peerwire installed as a tool (``pipx run``, ``uvx``) runs in an environment of its own, without the
adopting project on ``sys.path``; its provisioner module beside it must still be found.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.contract.interface import load_class


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The current directory holds a project's modules; sys.path does not name it (a console script's)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    for name in [m for m in sys.modules if m.startswith("adopter_")]:
        monkeypatch.delitem(sys.modules, name)
    return tmp_path


def test_a_module_in_the_current_directory_is_found_last(project: Path) -> None:
    (project / "adopter_provisioner.py").write_text("class Provisioner:\n    pass\n")
    assert load_class("adopter_provisioner:Provisioner").__name__ == "Provisioner"
    assert sys.path[-1] == str(project), "appended, so the project never shadows an installed module"


def test_a_package_in_the_current_directory_is_found(project: Path) -> None:
    (project / "adopter_pkg").mkdir()
    (project / "adopter_pkg" / "__init__.py").write_text("")
    (project / "adopter_pkg" / "prov.py").write_text("class P:\n    pass\n")
    assert load_class("adopter_pkg.prov:P").__module__ == "adopter_pkg.prov"


def test_a_module_nowhere_is_refused_naming_it(project: Path) -> None:
    with pytest.raises(ValueError, match="cannot import adopter_nowhere"):
        load_class("adopter_nowhere:P")


def test_a_missing_dependency_of_the_module_is_its_own_error(project: Path) -> None:
    (project / "adopter_broken.py").write_text("import adopter_dependency_that_is_missing\nclass P: ...\n")
    with pytest.raises(ValueError, match="adopter_dependency_that_is_missing"):
        load_class("adopter_broken:P")
