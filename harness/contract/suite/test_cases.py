"""Every case in ``contracts/cases/``, through the suite's own stdio client."""

from __future__ import annotations

import pytest

from harness.contract.cases import all_cases
from harness.contract.driver import CaseRun
from harness.contract.verdicts import failure_summary

CASES = all_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.test_id for c in CASES])
def test_case(case, contract_target, case_app, case_sessions, votes, tmp_path):
    CaseRun(case, contract_target, case_app, tmp_path, votes, sessions=case_sessions).run()
    if votes.failures:
        pytest.fail(failure_summary(votes.failures), pytrace=False)
