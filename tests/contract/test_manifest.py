"""The meta-test: requirements, cases and tests stay tied to each other, both ways.

Every requirement that is neither deferred nor ``verified_by`` has a case or a
suite test naming it as its requirement; every case and every suite test names
one that exists. A ``verified_by`` requirement is what the black-box suite
cannot observe: a test of the reference's own (``tests/``) declares it with
``@requirement`` and no case or suite test does. A deferred requirement has no
coverage at all (else it should not be deferred). The contract's schemas, both
profiles', are valid and stay within what the generator can draw from.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
from pathlib import Path

import pytest
from hypothesis import find
from hypothesis_jsonschema import from_schema
from jsonschema import Draft202012Validator

from harness.contract.cases import all_cases
from harness.contract.generation import properties_of
from harness.contract.layout import CASE_SCHEMA_PATH, CONTRACTS_DIR, MANIFEST_SCHEMA_PATH, SUITE_DIR
from harness.contract.manifest import ALSO_ATTRIBUTE, PROTOCOL, REQUIREMENT_ATTRIBUTE, Origin, manifest
from harness.contract.schemas import PROFILE_TOOLS, error_codes, tool_contract

PROJECT_ROOT = Path(__file__).resolve().parents[2]
TESTS_DIR = PROJECT_ROOT / "tests"
PROFILE_TOOL_PAIRS = [(profile, tool) for profile, (_, tools) in PROFILE_TOOLS.items() for tool in tools]


def suite_tests() -> dict[str, str | None]:
    """Every test function of the suite -> the requirement it declares (None if it declares none)."""
    out: dict[str, str | None] = {}
    for path in sorted(SUITE_DIR.glob("test_*.py")):
        module = importlib.import_module(f"harness.contract.suite.{path.stem}")
        for name, function in vars(module).items():
            if name.startswith("test_") and inspect.isfunction(function):
                out[f"{path.stem}.{name}"] = getattr(function, REQUIREMENT_ATTRIBUTE, None)
    return out


def suite_also() -> dict[str, tuple[str, ...]]:
    """Every suite test -> the requirements it also votes for (``@requirement(..., also=...)``)."""
    out: dict[str, tuple[str, ...]] = {}
    for path in sorted(SUITE_DIR.glob("test_*.py")):
        module = importlib.import_module(f"harness.contract.suite.{path.stem}")
        for name, function in vars(module).items():
            if name.startswith("test_") and inspect.isfunction(function):
                out[f"{path.stem}.{name}"] = tuple(getattr(function, ALSO_ATTRIBUTE, ()) or ())
    return out


def coverage() -> dict[str, list[str]]:
    """Requirement -> the cases and suite tests that verify it."""
    covered: dict[str, list[str]] = {}
    for case in all_cases():
        covered.setdefault(case.requirement, []).append(case.id)
    for test, requirement_id in suite_tests().items():
        if requirement_id:
            covered.setdefault(requirement_id, []).append(test)
    for test, also in suite_also().items():
        for requirement_id in also:
            covered.setdefault(requirement_id, []).append(test)
    return covered


def _declared(decorator: ast.expr) -> ast.expr | None:
    """The argument of a ``@requirement(...)`` decorator, else None."""
    if not isinstance(decorator, ast.Call):
        return None
    func = decorator.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    return decorator.args[0] if name == "requirement" and decorator.args else None


def project_tests() -> dict[str, str]:
    """Every test of ``tests/`` declaring ``@requirement(ID)``: ``path::function`` -> ID.

    Read from the source, not imported: the live Codex tests need not be
    importable to be counted, and a declaration must be a literal ID.
    """
    out: dict[str, str] = {}
    for path in sorted(TESTS_DIR.rglob("test_*.py")):
        tree = ast.parse(path.read_text("utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for argument in filter(None, map(_declared, node.decorator_list)):
                where = f"{path.relative_to(PROJECT_ROOT)}::{node.name}"
                assert isinstance(argument, ast.Constant) and isinstance(argument.value, str), \
                    f"{where}: @requirement needs a literal requirement ID"
                assert where not in out, f"{where} declares more than one requirement"
                out[where] = argument.value
    return out


def project_coverage() -> dict[str, list[str]]:
    """Requirement -> the tests of tests/ that declare it."""
    covered: dict[str, list[str]] = {}
    for test, requirement_id in project_tests().items():
        covered.setdefault(requirement_id, []).append(test)
    return covered


def test_every_requirement_has_a_case_or_a_test():
    covered = coverage()
    missing = [r.id for r in manifest() if not r.outside_suite and r.id not in covered]
    assert not missing, f"requirements without a case or suite test: {missing}"


def test_deferred_requirements_have_no_coverage_and_say_why():
    covered, elsewhere = coverage(), project_coverage()
    deferred = [r for r in manifest() if r.deferred]
    assert all(r.deferred.strip() for r in deferred), "a deferred requirement says why"
    wrongly = [r.id for r in deferred if r.id in covered or r.id in elsewhere]
    assert not wrongly, f"covered but marked deferred (drop `deferred`, or make it verified_by): {wrongly}"


def test_verified_by_requirements_are_proven_by_the_reference_tests_alone():
    covered, elsewhere = coverage(), project_coverage()
    verified = [r for r in manifest() if r.verified_by]
    unproven = [r.id for r in verified if r.id not in elsewhere]
    assert not unproven, f"verified_by, but no test in tests/ declares them with @requirement: {unproven}"
    in_suite = [r.id for r in verified if r.id in covered]
    assert not in_suite, f"the suite covers them, so they are not outside it (drop verified_by): {in_suite}"


def test_tests_of_the_reference_declare_known_requirements():
    declared = project_tests()
    assert declared, "the reference's tests declare the requirements they prove"
    unknown = {t: r for t, r in declared.items() if r not in manifest()}
    assert not unknown, f"tests declaring unknown requirements: {unknown}"


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


@pytest.mark.parametrize("profile, tool", PROFILE_TOOL_PAIRS, ids=[f"{p}-{t}" for p, t in PROFILE_TOOL_PAIRS])
def test_tool_schemas_are_valid_flat_and_generable(profile, tool):
    contract = tool_contract(tool, profile)
    Draft202012Validator.check_schema(contract.input_schema)
    Draft202012Validator.check_schema(contract.output_schema)
    props, required = properties_of(contract.input_schema)
    assert required <= set(props)
    for name, schema in props.items():
        value = find(from_schema(schema), lambda _: True)
        assert Draft202012Validator(schema).is_valid(value), f"{tool}.{name}: drew {value!r}"


@pytest.mark.parametrize("profile, tool", PROFILE_TOOL_PAIRS, ids=[f"{p}-{t}" for p, t in PROFILE_TOOL_PAIRS])
def test_declared_error_codes_are_contract_codes(profile, tool):
    declared = tool_contract(tool, profile).errors
    assert declared and declared <= error_codes(), f"{tool}: {sorted(declared - error_codes())}"
    assert {"invalid_argument", "unknown_caller", "app_unavailable"} <= declared


def test_every_rule_says_whose_it_is_and_its_level_follows_its_source():
    """JSON-RPC and MCP rules quote their sentence and keyword, and take the keyword's level; the contract's
    own rules quote none. (The manifest refuses to load otherwise; this names the split.)"""
    origins = {r.origin for r in manifest()}
    assert origins == set(Origin), origins
    for r in manifest():
        if r.origin is Origin.CONTRACT:
            assert r.keyword is None and r.quote is None, r.id
        else:
            assert r.keyword and r.quote and r.keyword.split()[0] in r.quote, r.id


def test_the_protocol_profile_holds_only_json_rpc_and_mcp_rules_and_needs_no_tool():
    protocol = [r for r in manifest() if r.profile == PROTOCOL]
    assert len(protocol) >= 15
    assert all(r.origin in (Origin.JSON_RPC, Origin.MCP) for r in protocol)
    # The protocol profile's tests use the `protocol` fixture, which needs no provisioner.
    for path in sorted(SUITE_DIR.glob("test_*.py")):
        module = importlib.import_module(f"harness.contract.suite.{path.stem}")
        for name, function in vars(module).items():
            rid = getattr(function, REQUIREMENT_ATTRIBUTE, None)
            if rid and manifest()[rid].profile == PROTOCOL:
                parameters = inspect.signature(function).parameters
                assert "servers" not in parameters and "case_app" not in parameters, f"{path.stem}.{name}"


def test_an_mcp_should_is_never_reported_as_a_must():
    from harness.contract.manifest import KEYWORD_LEVELS, Level, Requirement, provenance_problems

    wrong = Requirement("x:y", Level.MUST, "MCP 2025-11-25 § Basic", "X does y.", keyword="SHOULD",
                        quote="Receivers SHOULD do y.")
    assert any("its level is SHOULD" in p for p in provenance_problems(wrong))
    dressed = Requirement("x:z", Level.MUST, "SPEC.md § x", "X does z.", keyword="MUST", quote="X MUST do z.")
    assert provenance_problems(dressed)
    assert KEYWORD_LEVELS["MUST NOT"] == "MUST"


def test_a_pending_step_names_a_background_call_still_running():
    """``pending`` looks at a call the case left running: one never started, or already collected, is a case
    error, not a silent pass."""
    from harness.contract.cases import PendingStep, _build_case
    from harness.contract.manifest import manifest as load_manifest

    def case(*steps):
        return {"name": "p", "requirement": "receive:timeout:wakes", "description": "d", "actors": {"bob": {}},
                "steps": [{"id": "wait", "actor": "bob", "call": "receive_messages", "arguments": {"timeout_ms": 30000},
                           "background": True}, *steps]}

    problems, built = _build_case("x", case({"pending": "wait", "for_ms": 1000}, {"await": "wait"}), load_manifest())
    assert problems == [] and built is not None and isinstance(built.steps[1], PendingStep)
    assert built.real_time_ms == 1000
    problems, _ = _build_case("x", case({"await": "wait"}, {"pending": "wait", "for_ms": 1000}), load_manifest())
    assert any("pending 'wait' is not an earlier background step still running" in p for p in problems), problems
    problems, _ = _build_case("x", case({"pending": "nope", "for_ms": 1000}, {"await": "wait"}), load_manifest())
    assert any("pending 'nope'" in p for p in problems), problems
