"""``runner.py drift``: end to end against an older release, and its parts.

The end-to-end run installs (or reuses) the older release of ``older_codex``
and runs three live routes: one that works, one the release cannot do (skipped,
never attempted) and one whose exchange differs. Running all nine routes and
the smoke scenario is what ``make drift`` does; here the cost stays bounded.
"""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from harness.acceptance import drift_report
from harness.codex.capability_probe import establish
from harness.acceptance.drift import OBSERVED, ROUTE_NEEDS, Drift, exchange_outline
from harness.codex.install import locate_codex
from harness.lab.recorded import routes
from harness.codex.fixtures import FIXTURE_DIR, load
from peerwire.codex.surface import SURFACE
from tests.conftest import OLDER_RELEASE
from tests.patience import RUN_S

ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = RUN_S


def run_drift(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "runner.py"), "drift", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S)


def test_every_route_declares_what_it_needs_and_observed_notifications_are_declared() -> None:
    assert set(ROUTE_NEEDS) == set(routes.ROUTES) | set(routes.INPROCESS_ROUTES)
    declared = {use.method for use in SURFACE if use.kind == "notification"}
    assert set(OBSERVED) <= declared


def test_the_outline_keeps_what_the_adapter_observes() -> None:
    outline = exchange_outline(load(FIXTURE_DIR / "stale_steer.jsonl"))
    assert outline[:3] == ["session 1", "-> initialize", "<= initialize ok"]
    assert "<= turn/steer error -32600" in outline  # the refused steer
    assert "<- turn/completed completed" in outline
    assert not [line for line in outline if "configWarning" in line or "thread/tokenUsage" in line]
    # a final answer is shown with its phase and the start of its text
    assert any(line.startswith("<- item/completed agentMessage final_answer ") for line in outline)


@pytest.mark.parametrize("version", ["latest", "0.160"])
def test_a_version_that_is_not_exact_is_a_usage_error(version: str) -> None:
    result = run_drift("--codex-version", version)
    assert result.returncode == 2
    assert "not one exact Codex version" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.codex
@pytest.mark.heavy
def test_drift_against_an_older_release_end_to_end(older_codex, tmp_path: Path) -> None:
    result = run_drift("--codex-version", OLDER_RELEASE, "--report-dir", str(tmp_path),
                       "--route", "idle_start", "--route", "inject", "--route", "explicit_reply")
    assert result.returncode == 1, result.stderr  # something peerwire uses differs
    progress = [line for line in result.stderr.splitlines() if line.startswith("drift: [")]
    assert [line.split("]")[0] for line in progress] == [f"drift: [{n}/7" for n in range(1, 8)]
    (folder,) = tmp_path.glob(f"drift-{OLDER_RELEASE}-*")
    assert f"drift: report: {folder}" in result.stderr

    for path in [folder, *folder.rglob("*")]:
        assert stat.S_IMODE(path.stat().st_mode) == (0o700 if path.is_dir() else 0o600), path
    report = json.loads((folder / drift_report.JSON_NAME).read_text(encoding="utf-8"))
    methods = {m["method"]: m for m in report["methods"]}
    assert methods["thread/inject_items"]["verdict"] == "breaking"
    assert methods["thread/inject_items"]["changes"] == [f"{OLDER_RELEASE} has no request thread/inject_items"]
    assert methods["turn/interrupt"]["verdict"] == "unchanged"
    fixtures = {f["fixture"]: f for f in report["fixtures"]}
    assert not fixtures["inject"]["ok"] and all(f["ok"] for name, f in fixtures.items() if name != "inject")
    candidate = report["capabilities"]["candidate"]["capabilities"]
    assert not candidate["inject"]["enabled"] and candidate["idle_start"]["enabled"]
    # agent_message needs inject, and no release before the pinned one was checked for it; attached_tui is
    # declared since 0.171.0, the release where the listen socket and --remote were checked
    assert report["summary"]["capabilities_lost"] == ["inject", "agent_message", "attached_tui"]
    by_route = {r["name"]: r for r in report["routes"]}
    assert by_route["idle_start"]["status"] == "pass"
    assert by_route["inject"] == {**by_route["inject"], "status": "skipped",
                                  "detail": "needs inject: the app-server schema lacks thread/inject_items"}
    assert (folder / "fixtures" / "idle_start.jsonl").is_file() and not (folder / "fixtures" / "inject.jsonl").exists()
    # The older release offers the MCP tools as flat functions: the model's namespaced reply call never runs.
    assert by_route["explicit_reply"]["status"] == "fail"
    assert "-<- item/completed mcpToolCall reply completed" in by_route["explicit_reply"]["differences"]
    assert report["smoke"] == {"status": "skipped",
                               "detail": "needs inject: the app-server schema lacks thread/inject_items"}
    markdown = (folder / drift_report.MD_NAME).read_text(encoding="utf-8")
    assert "| `thread/inject_items` | request | breaking |" in markdown
    assert "| inject | ✓ | ✗ | the app-server schema lacks thread/inject_items |" in markdown
    assert markdown.count("```mermaid") == 2  # the two routes that ran


@pytest.mark.codex
@pytest.mark.heavy
def test_the_smoke_step_runs_the_scenario_with_the_examined_codex(tmp_path: Path) -> None:
    pinned = locate_codex()
    capabilities = establish(pinned, tmp_path / "capabilities")
    said: list[str] = []
    drift = Drift(pinned.version, report_dir=tmp_path, cache=None, route_names=[], smoke=True, say=said.append)
    folder = drift_report.new_folder(tmp_path, pinned.version)

    smoke = drift._smoke(pinned, capabilities, folder, tmp_path / "work")

    assert smoke["status"] == "pass", (smoke, said[-15:])
    assert smoke["exit_status"] == 0 and smoke["report"][0].startswith("smoke/")
    assert (folder / smoke["report"][0]).is_file()
    assert any(line.startswith("smoke: runner: 1/1 scenario runs passed") for line in said)
