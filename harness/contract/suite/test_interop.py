"""The happy-path cases again, through the official MCP Python SDK's stdio client.

The SDK validates each structured result against the tool's advertised output
schema; a server the SDK cannot talk to fails here even if the raw client copes.
Each profile's happy paths vote for that profile's interop requirement.
"""

from __future__ import annotations

import pytest
from anyio.from_thread import start_blocking_portal

from harness.contract.cases import all_cases
from harness.contract.driver import INTEROP_REQUIREMENT, PROFILE_REQUIREMENTS, CaseRun
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
