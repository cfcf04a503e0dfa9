"""The capability table: a row per agent kind, a cell per feature, each backed by a test or a fixture."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from peerwire.agent_kinds import AGENT_KINDS, Feature, kind_of_provider
from peerwire.app import RUNTIMES

ROOT = Path(__file__).resolve().parents[2]
CELLS = [(kind, feature) for kind in AGENT_KINDS.values() for feature in Feature]


@pytest.mark.parametrize("kind, feature", CELLS, ids=lambda v: getattr(v, "name", getattr(v, "value", v)))
def test_every_cell_names_evidence_that_exists(kind, feature):
    cell = kind.cells[feature]
    assert cell.how and cell.evidence, f"{kind.name}.{feature.value} names no evidence"
    for evidence in cell.evidence:
        path, _, test = evidence.partition("::")
        assert (ROOT / path).is_file(), f"{kind.name}.{feature.value}: no {path}"
        if test:
            source = (ROOT / path).read_text("utf-8")
            assert re.search(rf"^(async )?def {re.escape(test)}\(", source, re.MULTILINE), \
                f"{kind.name}.{feature.value}: {path} has no test {test}"


def test_every_kind_is_driven_by_a_provider_the_app_runs():
    assert {kind.provider for kind in AGENT_KINDS.values()} <= set(RUNTIMES)
    assert [k.name for k in kind_of_provider("acp")] == ["opencode"]


def test_the_declared_limits_of_an_acp_agent():
    assert AGENT_KINDS["opencode"].limits().keys() == {"inject", "steer"}
    assert AGENT_KINDS["codex"].limits() == {}
