"""Interoperability with the official MCP clients.

The happy-path cases run again through the MCP Python SDK's stdio client
(``interop:sdk:happy-path``, ``collab:interop:sdk``). Then each official
client runs one plan (:mod:`harness.contract.interop.plan`) of every tool's
success and the errors an inert client can provoke: the MCP Python SDK, the
pinned MCP TypeScript SDK and the pinned Inspector CLI, which validate
``structuredContent`` against the advertised ``outputSchema`` (the TypeScript
clients errors included). Each must accept every answer and see each error's
code; the Inspector, which costs a process per call, makes each tool's first
success and first error. The raw client runs the same plan to show why when they do not: every
answer, errors included, must validate against the advertised output schema.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest
from anyio.from_thread import start_blocking_portal
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from harness.contract.cases import all_cases
from harness.contract.driver import INTEROP_REQUIREMENT, PROFILE_REQUIREMENTS, CaseRun
from harness.contract.fixtures import Servers
from harness.contract.interop import clients
from harness.contract.interop.plan import Plan, Setup, collab_plan, messaging_plan
from harness.contract.manifest import requirement
from harness.contract.verdicts import failure_summary

COLLAB_INTEROP_REQUIREMENT = PROFILE_REQUIREMENTS["collab"]["interop"]
HAPPY_PATHS = [c for c in all_cases() if c.interop and c.profile == "messaging"]
COLLAB_HAPPY_PATHS = [c for c in all_cases() if c.interop and c.profile == "collab"]


def _through_sdk(case, contract_target, case_app, votes, tmp_path):
    with start_blocking_portal() as portal:
        CaseRun(case, contract_target, case_app, tmp_path, votes, via="sdk", portal=portal).run()
    if votes.failures:
        pytest.fail(failure_summary(votes.failures), pytrace=False)


@requirement(INTEROP_REQUIREMENT)
@pytest.mark.parametrize("case", HAPPY_PATHS, ids=[f"{INTEROP_REQUIREMENT} > {c.id}" for c in HAPPY_PATHS])
def test_case_through_mcp_sdk(case, contract_target, case_app, votes, tmp_path):
    _through_sdk(case, contract_target, case_app, votes, tmp_path)


@requirement(COLLAB_INTEROP_REQUIREMENT)
@pytest.mark.parametrize("case", COLLAB_HAPPY_PATHS,
                         ids=[f"{COLLAB_INTEROP_REQUIREMENT} > {c.id}" for c in COLLAB_HAPPY_PATHS])
def test_collab_case_through_mcp_sdk(case, contract_target, case_app, votes, tmp_path):
    _through_sdk(case, contract_target, case_app, votes, tmp_path)


# -- every tool, success and error, through each official client ---------------------------------

Runner = Callable[[Plan, Path], list]


def _client_sees_every_answer(plan: Plan, run: Runner, workdir: Path) -> None:
    try:
        answers = run(plan, workdir)
    except clients.ClientMissing as exc:
        pytest.skip(f"not tested: {exc}")
    problems = clients.judge(plan, answers)
    assert not problems, f"{len(problems)} of {len(plan.calls)} planned calls went wrong:\n  " + "\n  ".join(problems)


def _answers_fit_the_advertised_schemas(plan: Plan, servers: Servers) -> None:
    answers, advertised = clients.run_raw(plan, servers)
    problems = clients.judge(plan, answers)
    for answer in answers:
        structured = (answer.result or {}).get("structuredContent")
        schema = advertised.get(answer.call.tool)
        if not answer.accepted or structured is None:
            continue
        try:
            errors = sorted(Draft202012Validator(schema).iter_errors(structured), key=lambda e: list(e.path))
        except (SchemaError, TypeError) as exc:
            problems.append(f"{answer.call.tool}: the advertised outputSchema is not a schema: {exc}")
            continue
        if errors:
            problems.append(f"{answer.call.id} ({answer.call.expectation}): structuredContent "
                            f"{json.dumps(structured, ensure_ascii=False)[:200]} does not validate against "
                            f"{answer.call.tool}'s advertised outputSchema: {errors[0].message[:300]}")
    assert not problems, "\n  ".join(["strict clients would refuse these answers:", *problems])


@requirement("tools:error:output-schema")
def test_every_answer_validates_against_the_advertised_output_schema(servers):
    _answers_fit_the_advertised_schemas(messaging_plan(Setup(servers)), servers)


@requirement("interop:python-sdk:every-tool")
def test_python_sdk_sees_every_answer(servers, tmp_path):
    _client_sees_every_answer(messaging_plan(Setup(servers)), clients.run_python_sdk, tmp_path)


@requirement("interop:typescript-sdk:every-tool")
def test_typescript_sdk_sees_every_answer(servers, tmp_path):
    _client_sees_every_answer(messaging_plan(Setup(servers)), clients.run_typescript_sdk, tmp_path)


@pytest.mark.long_running(20)  # one Inspector CLI run per tool
@requirement("interop:inspector-cli:every-tool")
def test_inspector_cli_sees_every_answer(servers, tmp_path):
    _client_sees_every_answer(messaging_plan(Setup(servers)).one_of_each(), clients.run_inspector_cli, tmp_path)


@requirement("collab:error:output-schema")
def test_collab_answers_validate_against_the_advertised_output_schema(tree_servers):
    _answers_fit_the_advertised_schemas(collab_plan(Setup(tree_servers, "collab")), tree_servers)


@requirement("collab:interop:python-sdk")
def test_collab_python_sdk_sees_every_answer(tree_servers, tmp_path):
    _client_sees_every_answer(collab_plan(Setup(tree_servers, "collab")), clients.run_python_sdk, tmp_path)


@requirement("collab:interop:typescript-sdk")
def test_collab_typescript_sdk_sees_every_answer(tree_servers, tmp_path):
    _client_sees_every_answer(collab_plan(Setup(tree_servers, "collab")), clients.run_typescript_sdk, tmp_path)


@pytest.mark.long_running(20)  # the same
@requirement("collab:interop:inspector-cli")
def test_collab_inspector_cli_sees_every_answer(tree_servers, tmp_path):
    _client_sees_every_answer(collab_plan(Setup(tree_servers, "collab")).one_of_each(), clients.run_inspector_cli,
                              tmp_path)
