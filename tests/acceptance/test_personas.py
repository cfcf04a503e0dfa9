"""The persona matrix: every scenario under every valid persona passes on its evidence, and every invalid
persona fails exactly the check that names its fault.

A persona changes how the scripted model goes about a scenario (explicit reply, paraphrase, waiting by
receive, answering from injected context, replying blocked, looking agents up first, a corrected tool
error); the checks judge the contract, so none of that may fail a run. The invalid personas play faults
(claiming success without a call, answering before the reply arrived, replying twice, tasking the wrong
agent); a suite that let one pass, or failed it for another reason only, would be blind to it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.acceptance.execution import RunSettings, run_scenario
from harness.acceptance.progress import Progress
from harness.acceptance.scenario import OPT_IN_MODES, discover
from harness.codex.install import locate_codex
from harness.model.personas import applies, discover_personas, load_persona, PersonaError

PERSONAS = discover_personas()
VALID = [p for p in PERSONAS if p.valid]
INVALID = [p for p in PERSONAS if not p.valid]
SCENARIOS = discover()
# Opt-in modes (a watched TUI) add nothing a persona could show: the matrix runs the modes a run selects by default.
MATRIX = [(scenario, mode, persona) for persona in PERSONAS for scenario in SCENARIOS for mode in scenario.modes
          if mode not in OPT_IN_MODES and applies(persona, scenario.name, scenario.profile)]


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


@pytest.mark.codex
@pytest.mark.personas
@pytest.mark.parametrize(("scenario", "mode", "persona"), MATRIX,
                         ids=[f"{s.key(m)}-{p.name}" for s, m, p in MATRIX])
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
