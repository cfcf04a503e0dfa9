"""Pairs of agent kinds: --agents and --acp-agent, which scenarios run as which pair, and a pair's identity.

A scenario run's identity includes its pair (A's kind, B's), so a mixed pair's
failure never hides behind the Codex pair's pass; two Codex agents, the
default, keep the identity runs had before pairs existed.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from harness.acceptance.options import UsageError, parse
from harness.acceptance.scenario import PairChoice, discover, scenario_from_document, select
from harness.acceptance.worker import settings_from_json, settings_to_json
from harness.evidence.identity import RunIdentity
from harness.lab.kinds import AgentSpec, KindError, kinds_of, parse_acp_agent, parse_pair

MIXED = ("smoke", "information", "task-reply-auto", "task-reply-explicit", "interrupt", "negative")
"""The scenarios the issue names for mixed pairs: each declares kinds codex and acp."""


# -- --agents and --acp-agent -------------------------------------------------------------------------------


def test_the_default_is_two_codex_agents_for_every_scenario():
    options = parse([], environ={})
    assert options.pairs == (PairChoice(("codex", "codex")),) and options.acp_agents == {}


def test_pairs_repeat_and_narrow_to_scenarios():
    options = parse(["--agents", "codex,codex", "--agents", "codex,opencode@task-reply-auto",
                     "--agents", "opencode,opencode@smoke+task-reply"], environ={})
    assert options.pairs == (PairChoice(("codex", "codex")), PairChoice(("codex", "opencode"), ("task-reply-auto",)),
                             PairChoice(("opencode", "opencode"), ("smoke", "task-reply")))


@pytest.mark.parametrize("value, problem", [
    ("codex", "give two kinds"), ("codex,opencode,codex", "give two kinds"), ("codex,", "give two kinds"),
    ("codex,claude", "unknown agent kind 'claude'"), ("acp:mine,codex", "no --acp-agent mine=COMMAND"),
    ("codex,opencode@", "name scenarios after @"), ("codex,opencode@smoke+", "name scenarios after @"),
])
def test_a_pair_that_names_no_agent_is_a_usage_error(value, problem):
    with pytest.raises(UsageError, match=problem):
        parse(["--agents", value], environ={})


def test_opencode_runs_on_the_scripted_model_only():
    with pytest.raises(UsageError, match="opencode runs on the scripted model"):
        parse(["--provider", "openai", "--agents", "codex,opencode"], environ={})


def test_an_acp_agent_is_named_once_split_like_a_shell_and_used_by_a_pair():
    options = parse(["--acp-agent", "mine=my-agent --acp --home 'a b'", "--agents", "codex,acp:mine"], environ={})
    assert options.acp_agents == {"mine": ("my-agent", "--acp", "--home", "a b")}
    assert options.pairs == (PairChoice(("codex", "acp:mine")),)
    # With a real provider too: the ACP agent talks to its own provider whatever the others' is.
    assert parse(["--provider", "openai", "--acp-agent", "mine=x", "--agents", "acp:mine,codex"],
                 environ={}).pairs == (PairChoice(("acp:mine", "codex")),)
    with pytest.raises(UsageError, match="no --agents pair runs it"):
        parse(["--acp-agent", "mine=my-agent"], environ={})
    with pytest.raises(UsageError, match="given twice"):
        parse(["--acp-agent", "mine=a", "--acp-agent", "mine=b", "--agents", "codex,acp:mine"], environ={})


@pytest.mark.parametrize("value", ["mine", "=cmd", "mine=", "mine=  ", "my agent=cmd", "a/b=cmd", "mine=\"open"])
def test_an_acp_agent_value_must_be_name_equals_a_command(value):
    with pytest.raises(KindError):
        parse_acp_agent(value)


def test_each_agent_of_a_scenario_takes_its_kind_from_the_pair_in_order():
    a, b = parse_pair("opencode,acp:mine", {"mine": ("m", "acp")})
    assert (a, b) == (AgentSpec("opencode"), AgentSpec("acp:mine", ("m", "acp")))
    assert (a.provider, b.provider, a.on_run_model, b.on_run_model) == ("acp", "acp", True, False)
    assert kinds_of(("A", "B", "C"), (a, b)) == {"A": a, "B": b, "C": AgentSpec("codex")}


# -- which scenarios run as which pair ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scenarios():
    return discover()


def keys(selection) -> list[str]:
    return [scenario.key(mode) for scenario, mode in selection.runs]


def test_every_named_scenario_runs_as_every_pair(scenarios):
    pairs = [PairChoice(pair) for pair in (("codex", "opencode"), ("opencode", "codex"), ("opencode", "opencode"))]
    selection = select(scenarios, names=list(MIXED), pairs=pairs)
    assert sorted(keys(selection)) == sorted(f"{name}.attached.{a}-{b}" for name in MIXED for a, b in
                                             (p.pair for p in pairs))
    assert {scenario.pair for scenario, _ in selection.runs} == {p.pair for p in pairs}


def test_a_scenario_of_codex_agents_only_is_skipped_as_a_mixed_pair_saying_why(scenarios):
    selection = select(scenarios, pairs=[PairChoice(("codex", "opencode"))])
    assert not any(scenario.name in ("collab", "lifecycle", "modes") for scenario, _ in selection.runs)
    assert "collab as codex,opencode: its agents can be codex only ([scenario] kinds)" in selection.skipped
    with pytest.raises(ValueError, match="modes as opencode,codex: its agents can be codex only"):
        select(scenarios, names=["modes"], pairs=[PairChoice(("opencode", "codex"))])


def test_the_accept_selection_is_every_codex_pair_and_one_mixed_run(scenarios):
    selection = select(scenarios, pairs=[PairChoice(), PairChoice(("codex", "opencode"), ("task-reply-auto",))])
    codex = [key for key in keys(selection) if "codex-" not in key]
    assert codex == keys(select(scenarios)) and "task-reply-auto.attached" in codex
    assert [key for key in keys(selection) if "codex-" in key] == ["task-reply-auto.attached.codex-opencode"]


def test_a_pairs_scenarios_narrow_what_scenario_selects_and_runs_are_not_repeated(scenarios):
    pairs = [PairChoice(("codex", "opencode"), ("task-reply",)), PairChoice(("codex", "opencode"))]
    assert keys(select(scenarios, names=["task-reply-auto", "smoke"], pairs=pairs)) == [
        "task-reply-auto.attached.codex-opencode", "smoke.attached.codex-opencode"]
    assert keys(select(scenarios, names=["smoke"], pairs=[PairChoice(("codex", "opencode"), ("negative",))])) == []
    with pytest.raises(ValueError, match="no scenario named nonesuch"):
        select(scenarios, pairs=[PairChoice(("codex", "opencode"), ("nonesuch",))])


def test_the_attached_tui_mode_is_codex_only(scenarios):
    with pytest.raises(ValueError, match="attached_tui attaches Codex TUIs only"):
        select(scenarios, names=["task-reply-auto"], mode="attached_tui", pairs=[PairChoice(("codex", "opencode"))])
    assert keys(select(scenarios, names=["task-reply-auto"], mode="attached_tui")) == ["task-reply-auto.attached_tui"]


# -- a pair's identity ---------------------------------------------------------------------------------------


def test_two_codex_agents_keep_the_identity_runs_had_before_pairs():
    before = RunIdentity("smoke", "attached", None, "scripted", None)
    assert RunIdentity("smoke", "attached", None, "scripted", None, "codex,codex") == before
    assert (before.slug(), before.label()) == ("smoke.attached", "smoke · attached · scripted")
    assert RunIdentity.of({"name": "smoke", "mode": "attached", "pair": None}) == \
        RunIdentity.of({"name": "smoke", "mode": "attached", "pair": "codex,codex"})


def test_a_pair_is_part_of_every_name_of_a_run():
    mixed = RunIdentity("smoke", "attached", None, "scripted", 2, "opencode,codex")
    assert mixed.slug() == "smoke.attached.t2.opencode-codex"
    assert mixed.label() == "smoke · attached · scripted · opencode→codex · trial 2"
    assert mixed.to_json()["pair"] == "opencode,codex"
    others = {RunIdentity("smoke", "attached", pair=p) for p in ("codex,opencode", "opencode,codex",
                                                                   "opencode,opencode", None)}
    assert len({i.key() for i in others}) == len({i.slug() for i in others}) == 4
    assert RunIdentity.of({"identity": mixed.to_json()}) == mixed


def test_a_shard_plan_names_a_mixed_run_by_its_pair(scenarios):
    smoke = next(s for s in scenarios if s.name == "smoke")
    assert replace(smoke, pair=("codex", "opencode")).key("attached", trial=3) == "smoke.attached.t3.codex-opencode"
    assert smoke.key("attached") == "smoke.attached"


def test_a_worker_gets_the_acp_agents_it_may_start(tmp_path):
    from harness.acceptance.execution import RunSettings
    from harness.codex.install import CodexInstallation

    settings = RunSettings(codex=CodexInstallation(tmp_path / "codex", "0.171.0", "pinned install"),
                           homes_root=tmp_path, artifacts_root=tmp_path, acp_agents={"mine": ("m", "acp")})
    assert settings_from_json(settings_to_json(settings)).acp_agents == {"mine": ("m", "acp")}


# -- steps for a kind ---------------------------------------------------------------------------------------------


def step_scenario(**step):
    return scenario_from_document({
        "scenario": {"name": "s", "description": "d", "kinds": ["codex", "acp"]},
        "rules": {agent: [{"id": "r", "when": [{"user_text": {"contains": "x"}}],
                           "emit": [{"message": {"phase": "final_answer", "text": "y"}}]}] for agent in "AB"},
        "steps": [{"do": "await_record", "record": "r", "state": "provider_visible", **step}],
        "checks": [{"id": "c", "check": "nothing_admitted"}]})


@pytest.mark.parametrize("step, kinds, runs", [
    ({"needs": {"B": "inject"}}, {"B": "codex"}, True),
    ({"needs": {"B": "inject"}}, {"B": "opencode"}, False),
    ({"needs": {"B": "inject"}}, {}, True),  # an agent not named is Codex
    ({"lacks": {"B": "inject"}}, {"B": "opencode"}, True),
    ({"lacks": {"B": "inject"}}, {"B": "acp:mine"}, True),
    ({"lacks": {"B": "inject"}}, {"B": "codex"}, False),
    ({"needs": {"A": "start", "B": "inject"}}, {"A": "opencode", "B": "codex"}, True),
    ({"needs": {"A": "model_log"}}, {"A": "acp:mine"}, False),
])
def test_a_step_runs_only_for_the_kinds_it_fits(step, kinds, runs):
    (loaded,) = step_scenario(**step).steps
    assert loaded.fits(kinds) is runs


def test_a_step_naming_an_unknown_capability_or_agent_is_refused():
    from harness.model.rules import ScenarioError

    with pytest.raises(ScenarioError, match="needs"):
        step_scenario(needs={"B": "telepathy"})
    with pytest.raises(ScenarioError, match="does not start"):
        step_scenario(needs={"Z": "inject"})


def test_every_mixed_scenario_declares_both_kinds(scenarios):
    for scenario in scenarios:
        assert ("acp" in scenario.kinds) == (scenario.name in MIXED), scenario.name
