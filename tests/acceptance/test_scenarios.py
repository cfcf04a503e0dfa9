"""Every shipped scenario, run once per mode against the pinned Codex and the scripted model."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.acceptance.execution import RunSettings, run_scenario
from harness.acceptance.progress import Progress
from harness.acceptance.scenario import discover
from harness.codex.install import locate_codex

RUNS = [(scenario, mode) for scenario in discover() for mode in scenario.modes]


@pytest.mark.codex
@pytest.mark.parametrize(("scenario", "mode"), RUNS, ids=[scenario.key(mode) for scenario, mode in RUNS])
def test_scenario_passes_on_its_evidence(scenario, mode, tmp_path: Path) -> None:
    settings = RunSettings(codex=locate_codex(), homes_root=tmp_path / "homes", artifacts_root=tmp_path / "artifacts")

    result = run_scenario(scenario, mode, settings, progress=Progress(scenario.key(mode), quiet=True))

    failed = {check["id"]: check["summary"] for check in result["checks"] if check["verdict"] != "pass"}
    assert result["passed"], failed
    assert not failed
    # The scenario's own verdicts cite the records and lines they rest on (absence checks cite nothing).
    declared = {spec.id for spec in scenario.checks if spec.applies(mode) and spec.check != "nothing_admitted"}
    assert all(any(check["evidence"].values()) for check in result["checks"] if check["id"] in declared)
    artifacts = tmp_path / "artifacts" / result["artifacts_dir"]
    assert (artifacts / "core-export.json").is_file()
    assert list((artifacts / "appserver").glob("*.appserver.jsonl"))
    assert list((artifacts / "rollouts").rglob("rollout-*.jsonl"))
    assert not (tmp_path / "homes" / scenario.key(mode)).exists(), "a passing run's home is removed"
