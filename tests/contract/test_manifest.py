"""The meta-test: requirements, cases and suite tests stay tied to each other, both ways.

Every requirement that is not deferred has a case or a suite test naming it as
its requirement; every case and every suite test names one that exists; a
deferred requirement has no coverage (else it should not be deferred). The
contract's schemas are valid and stay within what the generator can draw from.
"""

from __future__ import annotations

import importlib
import inspect
import json

import pytest
from hypothesis import find
from hypothesis_jsonschema import from_schema
from jsonschema import Draft202012Validator

from harness.contract.cases import all_cases
from harness.contract.generation import properties_of
from harness.contract.layout import CASE_SCHEMA_PATH, CONTRACTS_DIR, MANIFEST_SCHEMA_PATH, SUITE_DIR
from harness.contract.manifest import REQUIREMENT_ATTRIBUTE, manifest
from harness.contract.schemas import TOOL_NAMES, error_codes, tool_contract


def suite_tests() -> dict[str, str | None]:
    """Every test function of the suite -> the requirement it declares (None if it declares none)."""
    out: dict[str, str | None] = {}
    for path in sorted(SUITE_DIR.glob("test_*.py")):
        module = importlib.import_module(f"harness.contract.suite.{path.stem}")
        for name, function in vars(module).items():
            if name.startswith("test_") and inspect.isfunction(function):
                out[f"{path.stem}.{name}"] = getattr(function, REQUIREMENT_ATTRIBUTE, None)
    return out


def coverage() -> dict[str, list[str]]:
    """Requirement -> the cases and suite tests that verify it."""
    covered: dict[str, list[str]] = {}
    for case in all_cases():
        covered.setdefault(case.requirement, []).append(case.id)
    for test, requirement_id in suite_tests().items():
        if requirement_id:
            covered.setdefault(requirement_id, []).append(test)
    return covered


def test_every_requirement_has_a_case_or_a_test():
    covered = coverage()
    missing = [r.id for r in manifest() if not r.deferred and r.id not in covered]
    assert not missing, f"requirements without a case or suite test: {missing}"


def test_deferred_requirements_have_no_coverage_and_say_why():
    covered = coverage()
    deferred = [r for r in manifest() if r.deferred]
    assert deferred, "the manifest lists the deferred requirements explicitly"
    wrongly = [r.id for r in deferred if r.id in covered]
    assert not wrongly, f"covered but marked deferred (drop `deferred`): {wrongly}"


def test_every_suite_test_names_a_requirement():
    unnamed = []
    for test, requirement_id in suite_tests().items():
        function_takes_case = test.endswith(".test_case")
        if requirement_id is None and not function_takes_case:
            unnamed.append(test)
        elif requirement_id is not None:
            assert requirement_id in manifest(), f"{test} names unknown requirement {requirement_id}"
    assert not unnamed, f"suite tests without @requirement: {unnamed}"


def test_every_case_names_known_requirements():
    for case in all_cases():
        unknown = case.requirements() - {r.id for r in manifest()}
        assert not unknown, f"{case.id} names unknown requirements {unknown}"


def test_case_ids_are_unique():
    ids = [c.id for c in all_cases()]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("path", [CASE_SCHEMA_PATH, MANIFEST_SCHEMA_PATH, CONTRACTS_DIR / "definitions.json"],
                         ids=lambda p: p.name)
def test_contract_documents_are_valid_schemas(path):
    Draft202012Validator.check_schema(json.loads(path.read_text("utf-8")))


@pytest.mark.parametrize("tool", TOOL_NAMES)
def test_tool_schemas_are_valid_flat_and_generable(tool):
    contract = tool_contract(tool)
    Draft202012Validator.check_schema(contract.input_schema)
    Draft202012Validator.check_schema(contract.output_schema)
    props, required = properties_of(contract.input_schema)
    assert required <= set(props)
    for name, schema in props.items():
        value = find(from_schema(schema), lambda _: True)
        assert Draft202012Validator(schema).is_valid(value), f"{tool}.{name}: drew {value!r}"


@pytest.mark.parametrize("tool", TOOL_NAMES)
def test_declared_error_codes_are_contract_codes(tool):
    declared = tool_contract(tool).errors
    assert declared and declared <= error_codes(), f"{tool}: {sorted(declared - error_codes())}"
    assert {"invalid_argument", "unknown_caller", "app_unavailable"} <= declared
