"""Where the package data is found: through importlib.resources, the checkout's own files in an editable install.

The installed form (a wheel, away from any checkout) is ``tests/test_installed.py``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import peerwire.contract
from harness import resources
from peerwire import resources as core_resources
from peerwire.errors import Code, PeerwireError

ROOT = Path(__file__).resolve().parents[2]
READERS = ("peerwire", "harness")


@pytest.mark.parametrize(("lookup", "where"), [
    (resources.contracts, "contracts"),
    (resources.scenarios, "scenarios"),
    (resources.personas, "scenarios/personas"),
    (resources.fixtures, "fixtures"),
    (resources.appserver_fixtures, "fixtures/appserver"),
    (resources.recorded_durations, ".ci/durations.json"),
    (resources.npm_pins_file, "harness/npm-pins.json"),
    (resources.contract_suite, "harness/contract/suite"),
    (resources.contract_suite_config, "harness/contract/suite.ini"),
    (resources.typescript_client, "harness/contract/interop/ts_sdk_client.mjs"),
    (resources.packages_root, "."),
])
def test_an_editable_install_reads_the_checkouts_own_files(lookup, where) -> None:
    found = lookup()
    assert found == (ROOT / where).resolve() and found.exists()


def test_a_data_package_that_is_not_installed_says_how_to_reinstall() -> None:
    with pytest.raises(core_resources.PackageDataMissing, match=r"peerwire_data\.nothing is not installed.*pip install -e"):
        core_resources.data_folder("peerwire_data.nothing")


def test_the_core_turns_missing_data_into_an_internal_error_naming_the_override(monkeypatch) -> None:
    monkeypatch.delenv("PEERWIRE_CONTRACTS", raising=False)
    monkeypatch.setattr(peerwire.contract, "contracts",
                        lambda: core_resources.data_folder("peerwire_data.nothing"))
    with pytest.raises(PeerwireError) as failure:
        peerwire.contract.contracts_dir()
    assert failure.value.code == Code.INTERNAL and "PEERWIRE_CONTRACTS" in str(failure.value)


def source_relative_paths(path: Path) -> list[str]:
    """Where a module builds a path from its own location (``__file__``)."""
    return [f"{path.relative_to(ROOT)}:{node.lineno}" for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Name) and node.id == "__file__"]


def test_no_module_finds_files_relative_to_its_own_source() -> None:
    """A reader that builds its path from ``__file__`` works in a checkout and reads nothing installed: every
    reader goes through :mod:`peerwire.resources` / :mod:`harness.resources` instead."""
    offenders = [hit for package in READERS for path in sorted((ROOT / package).rglob("*.py"))
                 for hit in source_relative_paths(path)]
    assert offenders == [], offenders
