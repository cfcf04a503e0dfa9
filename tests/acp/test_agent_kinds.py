"""The capability table: a row per agent kind, a cell per feature, each backed by a test or a fixture."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.capabilities import AGENT_KINDS, ANY_ACP, FEATURES, PROVIDERS, TRACES, agent_kind, kind_of_provider
from peerwire.app import RUNTIMES
from peerwire.contract_data import providers

ROOT = Path(__file__).resolve().parents[2]
CELLS = [(kind, feature) for kind in AGENT_KINDS.values() for feature in FEATURES]


@pytest.mark.parametrize("kind, feature", CELLS, ids=lambda v: getattr(v, "name", v))
def test_every_cell_names_evidence_that_exists(kind, feature):
    cell = kind.cells[feature]
    assert cell.how and cell.evidence, f"{kind.name}.{feature} names no evidence"
    for evidence in cell.evidence:
        path, _, test = evidence.partition("::")
        assert (ROOT / path).is_file(), f"{kind.name}.{feature}: no {path}"
        if test:
            source = (ROOT / path).read_text("utf-8")
            assert re.search(rf"^(async )?def {re.escape(test)}\(", source, re.MULTILINE), \
                f"{kind.name}.{feature}: {path} has no test {test}"


def test_every_kind_is_driven_by_a_provider_the_app_runs():
    assert {kind.provider for kind in [*AGENT_KINDS.values(), ANY_ACP]} <= set(RUNTIMES)
    # The core's providers are the table's: every runtime it runs, and manual (no adapter), nothing else.
    assert providers() == PROVIDERS and set(PROVIDERS) == {*RUNTIMES, "manual"}
    assert [k.name for k in kind_of_provider("acp")] == ["opencode"]


def test_the_declared_limits_of_an_acp_agent():
    assert AGENT_KINDS["opencode"].limits().keys() == {"inject", "steer"}
    assert AGENT_KINDS["codex"].limits() == {}


def test_every_trace_cell_names_evidence_that_exists():
    for kind in [*AGENT_KINDS.values(), ANY_ACP]:
        for trace in TRACES:
            cell = kind.traces[trace]
            for evidence in cell.evidence:
                path, _, test = evidence.partition("::")
                assert (ROOT / path).is_file(), f"{kind.name}.{trace}: no {path}"
                if test:
                    source = (ROOT / path).read_text("utf-8")
                    assert re.search(rf"^(async )?def {re.escape(test)}\(", source, re.MULTILINE), \
                        f"{kind.name}.{trace}: {path} has no test {test}"


def test_any_acp_agent_has_the_acp_adapters_features_and_no_trace_of_its_own():
    mine = agent_kind("acp:mine")
    assert (mine.name, mine.provider) == ("acp:mine", "acp")
    assert mine.row() == AGENT_KINDS["opencode"].row() == ANY_ACP.row()
    assert not any(mine.can(trace) for trace in ("rollout", "call_meta", "model_log"))
    assert AGENT_KINDS["opencode"].can("model_log") and AGENT_KINDS["codex"].can("call_meta")
    for wrong in ("claude", "acp:", "ACP:x"):
        with pytest.raises(KeyError):
            agent_kind(wrong)
    with pytest.raises(ValueError, match="unknown capability"):
        mine.can("telepathy")


def test_the_readme_shows_the_capability_table_as_the_table_makes_it():
    from harness.report.capability_table import README_END, README_START, readme_table

    readme = (ROOT / "README.md").read_text("utf-8")
    shown = readme[readme.index(README_START):readme.index(README_END) + len(README_END)]
    assert shown == readme_table(), "README.md's capability table is stale: python -m harness.report.capability_table"
