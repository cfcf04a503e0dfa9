"""Scenario files: what loads, what is refused before anything starts, and which runs a selection makes."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest

from harness.acceptance.checks import JUDGEMENTS
from harness.acceptance.scenario import (SCENARIOS_DIR, discover, is_acceptance_scenario, scenario_from_document,
                                         select)
from harness.model.rules import ScenarioError

MINIMAL = """
[scenario]
name = "mini"
description = "A minimal scenario."

[prompts]
A = ["Hello there."]

[[rules.A]]
id = "greet"
hold = "h"
when = [{ user_text = { last = true, contains = "Hello" } }]
emit = [{ message = { phase = "final_answer", text = "Hi." } }]

[[steps]]
do = "prompt"
agent = "A"

[[steps]]
do = "await_turn"
turn = "A1"

[[checks]]
id = "bound"
check = "task_bound"
record = { kind = "task" }
"""


PROBE = {"child": "/root/worker", "question": "Which year?", "reply": "2026.", "child_final": "Aurora.",
         "final": "The helper reports: Aurora."}


def document(**changes) -> dict:
    doc = tomllib.loads(MINIMAL)
    for key, value in changes.items():
        doc[key] = value
    return doc


def test_every_shipped_scenario_loads_and_names_known_checks() -> None:
    scenarios = discover()
    names = {scenario.name for scenario in scenarios}
    assert {"smoke", "information", "task-reply-explicit", "task-reply-auto", "interrupt", "lifecycle", "modes",
            "negative", "collab"} <= names
    for scenario in scenarios:
        assert all(spec.check in JUDGEMENTS for spec in scenario.checks)
        assert scenario.description


def test_a_minimal_scenario_loads_with_defaults() -> None:
    scenario = scenario_from_document(document())
    assert scenario.agents == ("A",)
    assert scenario.modes == ("attached",)
    assert scenario.providers == ("scripted",)
    assert (scenario.profile, scenario.probe) == ("messaging", None)
    assert [step.do for step in scenario.steps] == ["prompt", "await_turn"]
    assert scenario.checks[0].params == {"record": {"kind": "task"}}


@pytest.mark.parametrize(("change", "problem"), [
    ({"checks": [{"id": "x", "check": "no_such_judgement"}]}, "unknown check 'no_such_judgement'"),
    ({"steps": [{"do": "prompt", "agent": "A"}, {"do": "prompt", "agent": "A"}]}, "no prompt left for A"),
    ({"steps": [{"do": "await_hold", "hold": "never-defined"}]}, "no rule defines hold 'never-defined'"),
    ({"steps": [{"do": "prompt", "agent": "Z"}]}, "agent 'Z' is not started"),
    ({"steps": [{"do": "teleport"}]}, "steps/0/do"),
    ({"steps": [{"do": "tool", "agent": "A", "tool": "send_message"}]}, "'arguments' is a required property"),
    ({"checks": [{"id": "a", "check": "nothing_admitted"}, {"id": "a", "check": "nothing_admitted"}]},
     "duplicate check id"),
    ({"scenario": {"name": "mini", "description": "d", "profile": "swarm"}}, "scenario/profile"),
    ({"probe": PROBE}, "the collaboration probe needs profile"),
    ({"scenario": {"name": "mini", "description": "d", "profile": "collab"}, "probe": {**PROBE, "child": "worker"}},
     "probe/child"),
    ({"steps": [{"do": "await_record", "record": {"recipient": "root/worker"}, "state": "provider_visible"}]},
     "steps/0/record"),
])
def test_inconsistent_scenarios_are_refused_when_loading(change: dict, problem: str) -> None:
    with pytest.raises(ScenarioError) as refused:
        scenario_from_document(document(**change), path=Path("bad.toml"))
    assert problem in str(refused.value)
    assert str(refused.value).startswith("bad.toml: ")


def test_files_without_steps_serve_other_tools_and_are_not_run(tmp_path: Path) -> None:
    (tmp_path / "probe.toml").write_text('[[rules.A]]\nid = "x"\nemit = []\n', encoding="utf-8")
    (tmp_path / "mini.toml").write_text(MINIMAL, encoding="utf-8")
    assert not is_acceptance_scenario(tmp_path / "probe.toml")
    assert [scenario.name for scenario in discover(tmp_path)] == ["mini"]


def test_selection_by_name_group_mode_and_provider() -> None:
    scenarios = discover(SCENARIOS_DIR)
    everything = select(scenarios)
    assert ("modes", "background") in {(s.name, m) for s, m in everything.runs}
    # attached_tui is opt-in: declared, but run only when asked for
    assert len(everything.runs) == sum(len([m for m in s.modes if m != "attached_tui"]) for s in scenarios)
    assert "attached_tui" not in {m for _, m in everything.runs}

    group = select(scenarios, names=["task-reply"])
    assert sorted(s.name for s, _ in group.runs) == ["task-reply-auto", "task-reply-explicit"]
    watched = select(scenarios, names=["task-reply"], mode="attached_tui")
    assert [(s.name, m) for s, m in watched.runs] == [("task-reply-auto", "attached_tui")]
    assert any("task-reply-explicit: has no attached_tui mode" in why for why in watched.skipped)

    background = select(scenarios, mode="background")
    assert [(s.name, m) for s, m in background.runs] == [("modes", "background")]
    assert any("smoke: has no background mode" in why for why in background.skipped)

    with pytest.raises(ValueError, match="no scenario named nonesuch"):
        select(scenarios, names=["nonesuch"])
    with pytest.raises(ValueError, match="has no background mode"):
        select(scenarios, names=["smoke"], mode="background")
    scripted_only = [dataclasses.replace(s, providers=("scripted",), scripted_only="a reason") if s.name == "collab"
                     else s for s in scenarios]
    with pytest.raises(ValueError, match="not meaningful with provider openai"):
        select(scripted_only, names=["collab"], provider="openai")


def test_every_scenario_runs_with_a_real_provider_or_says_why_not() -> None:
    for scenario in discover():
        assert ("openai" in scenario.providers) != (scenario.scripted_only is not None), scenario.name
    # Every scenario of every profile offers the real provider: its model inputs are logged through the
    # recording proxy as the scripted model logs them, so no check needs the scripted model.
    assert [s.name for s in discover() if s.scripted_only] == []
    assert {s.profile for s in discover() if "openai" in s.providers} == {"messaging", "collab"}


def test_the_collaboration_scenario_runs_the_tree_profile_with_its_probe() -> None:
    (collab,) = [scenario for scenario in discover() if scenario.name == "collab"]
    assert (collab.profile, collab.agents) == ("collab", ("root",))
    assert collab.probe is not None and collab.probe.child == "/root/worker" and collab.probe.parent == "/root"
    assert {"spawned_child", "child_thread", "tree_message", "injected_without_turn", "probe_succeeded"} <= {
        spec.check for spec in collab.checks}
    selector = scenario_from_document(document(
        scenario={"name": "mini", "description": "d", "profile": "collab"}, probe=PROBE,
        checks=[{"id": "x", "check": "tree_message", "record": {"kind": "information", "recipient": "/root/worker"},
                 "type": "MESSAGE"}]))
    assert selector.checks[0].params["record"]["recipient"] == "/root/worker"


def test_every_attached_tui_run_judges_both_terminals() -> None:
    """Attached mode with TUIs: every agent's terminal must stay on its owned session and display exchange activity,
    in every scenario that offers the mode (the lifecycle scenario among them)."""
    watched = {s.name: s for s in discover() if "attached_tui" in s.modes}
    assert {"task-reply-auto", "lifecycle"} <= set(watched)
    for scenario in watched.values():
        checks = [spec for spec in scenario.checks if spec.applies("attached_tui")]
        for check in ("tui_thread_adopted", "tui_stays_on_session"):
            judged = sorted(spec.params["agent"] for spec in checks if spec.check == check)
            assert judged == sorted(scenario.agents), (scenario.name, check, judged)
        shown = {spec.params["agent"] for spec in checks if spec.check == "tui_shows_exchange"}
        # each agent whose model takes part in the exchange shows it (lifecycle's A is the runner's tool calls)
        assert shown == {agent for agent in scenario.agents if scenario.script.rules.get(agent)}, (scenario.name, shown)
