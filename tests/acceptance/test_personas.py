"""The persona matrix: every scenario under every valid persona passes on its evidence, and every invalid
persona fails exactly the check that names its fault.

A persona changes how the scripted model goes about a scenario (explicit reply, paraphrase, waiting by
receive, answering from injected context, replying blocked, looking agents up first, a corrected tool
error); the checks judge the contract, so none of that may fail a run. The invalid personas play faults
(claiming success without a call, answering before the reply arrived, replying twice, tasking the wrong
agent); a suite that let one pass, or failed it for another reason only, would be blind to it.

Every change runs the matrix's covering design (:mod:`.persona_design`): every persona against the
scenarios that make the decisions it varies, and every scenario under some persona. The rest of the matrix
is marked ``full`` and runs in ``make personas`` and ``make full``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.acceptance.execution import RunSettings, run_scenario
from harness.acceptance.progress import Progress
from harness.acceptance.scenario import discover
from harness.codex.install import locate_codex
from harness.model.personas import BEHAVIOURS, applies, discover_personas, load_persona, PersonaError

from .persona_design import (DECISIONS, VARIES, PersonaRun, covering_design, decisions, exercises, matrix,
                             requirements)

PERSONAS = discover_personas()
VALID = [p for p in PERSONAS if p.valid]
INVALID = [p for p in PERSONAS if not p.valid]
SCENARIOS = discover()
MATRIX = matrix(PERSONAS, SCENARIOS)
DESIGN = covering_design(PERSONAS, SCENARIOS)


def _run(scenario, mode, persona, tmp_path: Path) -> dict:
    settings = RunSettings(codex=locate_codex(), homes_root=tmp_path / "homes", artifacts_root=tmp_path / "artifacts",
                           persona=persona.name)
    key = scenario.key(mode, persona=persona.name)
    return run_scenario(scenario, mode, settings, progress=Progress(key, quiet=True))


def test_the_personas_cover_what_real_models_do_and_the_faults_to_catch() -> None:
    behaviours = {b for p in VALID for b in p.behaviours}
    assert behaviours >= {"explicit_reply", "paraphrase", "receive_to_wait", "injected_context", "blocked",
                          "list_agents_first", "tool_error_retry"}
    assert {p.fails for p in INVALID} == {"claims-backed-by-tool-calls", "reply-consumed-before-answering",
                                         "replied-once-per-task", "task-to-the-named-assignee"}
    # every scenario runs under every valid persona, except those of another profile
    messaging = [s for s in SCENARIOS if s.profile == "messaging"]
    assert all(applies(p, s.name, s.profile) for p in VALID for s in messaging)


def test_a_persona_file_is_checked_against_its_schema(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[persona]\nname = "x"\ndescription = "d"\nvalid = true\nbehaviours = ["dance"]\n')
    with pytest.raises(PersonaError, match="behaviours/0"):
        load_persona(bad)
    unnamed = tmp_path / "unnamed.toml"
    unnamed.write_text('[persona]\nname = "x"\ndescription = "d"\nvalid = false\nbehaviours = ["replies_twice"]\n')
    with pytest.raises(PersonaError, match="names the check it fails"):
        load_persona(unnamed)


def test_every_behaviour_declares_the_decisions_it_varies() -> None:
    assert set(VARIES) == set(BEHAVIOURS)
    assert {kind for kinds in VARIES.values() for kind in kinds} <= set(DECISIONS)


def test_the_decisions_of_a_scenario_are_read_from_its_rules() -> None:
    by_name = {s.name: s for s in SCENARIOS}
    # lifecycle's tasks come from the runner's own tool steps: no rule assigns one, and B answers none
    assert "assigns a task" not in decisions(by_name["lifecycle"])
    assert "answers a delivered task" not in decisions(by_name["lifecycle"])
    # task-reply-explicit's B replies with the tool before its final answer: no final answers an open task
    assert "answers a delivered task" not in decisions(by_name["task-reply-explicit"])
    assert "answers a delivered task" in decisions(by_name["task-reply-auto"])
    assert "waits with wait_agent" not in decisions(by_name["smoke"])
    receive_wait = next(p for p in PERSONAS if p.name == "receive-wait")
    assert not exercises(PersonaRun(by_name["smoke"], "attached", receive_wait)), "nothing to rewrite in smoke"


def test_the_covering_design_covers_every_persona_and_every_scenario_mode() -> None:
    ids = [run.id for run in DESIGN]
    assert len(ids) == len(set(ids)) and set(ids) <= {run.id for run in MATRIX}
    assert all(exercises(run) for run in DESIGN), "a run that exercises nothing of its persona is a default run"
    covered = {need for run in DESIGN for need in
               [("scenario", run.scenario.key(run.mode)),
                *(("persona", run.persona.name, kind) for kind in exercises(run))]}
    assert covered >= requirements(PERSONAS, SCENARIOS)
    # every persona meets every decision it varies that a scenario makes, so every persona runs ...
    assert {run.persona.name for run in DESIGN} == {p.name for p in PERSONAS}
    # ... and every scenario-mode of the matrix runs under a persona other than its own rules
    assert {run.scenario.key(run.mode) for run in DESIGN} == {run.scenario.key(run.mode) for run in MATRIX}
    assert len(DESIGN) * 3 < len(MATRIX), (len(DESIGN), len(MATRIX))


def _case(run: PersonaRun):
    in_design = any(run.id == chosen.id for chosen in DESIGN)
    return pytest.param(run.scenario, run.mode, run.persona, id=run.id,
                        marks=() if in_design else (pytest.mark.full,))


@pytest.mark.codex
@pytest.mark.personas
@pytest.mark.parametrize(("scenario", "mode", "persona"), [_case(run) for run in MATRIX])
def test_persona_matrix(scenario, mode, persona, tmp_path: Path) -> None:
    result = _run(scenario, mode, persona, tmp_path)
    failed = {check["id"]: check["summary"] for check in result["checks"] if check["verdict"] != "pass"}
    assert result["persona"] == persona.name and result["artifacts_dir"] == f"{scenario.key(mode, persona=persona.name)}/"
    if persona.valid:
        assert result["passed"] and not failed, failed
        return
    # the fault is named by its own check, whatever else its run broke
    assert not result["passed"]
    assert persona.fails in failed, f"{persona.name} did not fail {persona.fails}: {failed}"
