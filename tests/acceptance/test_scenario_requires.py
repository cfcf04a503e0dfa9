"""Which Codex capabilities a scenario needs: declared in its file, implied by its steps and checks."""

from __future__ import annotations

import tomllib

import pytest

from harness.acceptance.scenario import discover, missing_capabilities, scenario_from_document
from harness.model.rules import ScenarioError
from tests.acceptance.test_scenario_loader import MINIMAL


def document(requires=None, **extra) -> dict:
    doc = tomllib.loads(MINIMAL)
    if requires is not None:
        doc["scenario"]["requires"] = requires
    doc.update(extra)
    return doc


def test_steps_and_checks_imply_capabilities_per_mode() -> None:
    scenario = scenario_from_document(document())
    assert scenario.requires == ()
    assert scenario.needs("attached") == ("idle_start",)  # a prompt step, a task_bound check

    modes = next(s for s in discover() if s.name == "modes")
    assert "resume" in modes.needs("background") and "resume" not in modes.needs("attached")
    smoke = next(s for s in discover() if s.name == "smoke")
    assert set(smoke.needs("attached")) == {"idle_start", "inject"}


def test_declared_capabilities_come_first_and_are_not_repeated() -> None:
    scenario = scenario_from_document(document(requires=["steer", "idle_start"]))
    assert scenario.needs("attached") == ("steer", "idle_start")
    assert missing_capabilities(scenario, "attached", ["idle_start"]) == ["steer"]
    assert missing_capabilities(scenario, "attached", ["idle_start", "steer", "inject"]) == []


def test_an_unknown_capability_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ScenarioError, match=r"unknown capability 'teleport' \(known: agent_message, .*fork, .*steer"):
        scenario_from_document(document(requires=["teleport"]))


@pytest.mark.parametrize("requires", [[], ["steer", "steer"], "steer", [""]])
def test_a_malformed_requires_is_refused_by_the_schema(requires) -> None:
    if requires == []:
        assert scenario_from_document(document(requires=requires)).requires == ()
        return
    with pytest.raises(ScenarioError, match="scenario/requires"):
        scenario_from_document(document(requires=requires))
