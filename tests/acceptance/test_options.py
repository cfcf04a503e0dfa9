"""The runner's command line: defaults, the real-provider opt-in and its credential handling."""

from __future__ import annotations

import io
import json
import os
import stat
from pathlib import Path

import pytest
import tomlkit

from harness.evidence.secrets import SecretScan
from harness.acceptance.options import AUTH_HOME_ENV, DEFAULT_WORKERS, UsageError, parse
from harness.acceptance.preflight import preflight
from harness.acceptance.run import main
from harness.codex.home import AgentSettings, PeerwireServer, Projection, copy_authorization

AUTH = {"OPENAI_API_KEY": None, "tokens": {"access_token": "at-0123456789abcdef", "refresh_token": "rt-fedcba9876"}}
USER_CONFIG = 'model = "gpt-5"\nmodel_provider = "openai"\n\n[model_providers.openai]\nname = "OpenAI"\n'


@pytest.fixture
def auth_home(tmp_path: Path) -> Path:
    home = tmp_path / "authorized"
    home.mkdir()
    (home / "auth.json").write_text(json.dumps(AUTH), encoding="utf-8")
    (home / "config.toml").write_text(USER_CONFIG, encoding="utf-8")
    return home


def test_defaults_run_everything_with_the_scripted_model() -> None:
    options = parse([], environ={})
    assert options.scenarios == () and options.mode is None and options.provider == "scripted"
    assert options.approve_tools is True and options.auth_home is None and options.keep_home is False
    assert options.report_dir.name == "reports" and options.workers == DEFAULT_WORKERS


def test_repeatable_scenarios_and_explicit_choices(tmp_path: Path) -> None:
    options = parse(["--scenario", "smoke", "--scenario", "task-reply", "--mode", "background", "--keep-home",
                     "--runs-root", str(tmp_path), "--no-approve-tools", "--workers", "1"], environ={})
    assert options.scenarios == ("smoke", "task-reply")
    assert (options.mode, options.keep_home, options.runs_root, options.approve_tools, options.workers) == (
        "background", True, tmp_path, False, 1)


def test_a_real_provider_takes_its_home_from_the_environment_and_approves_the_tools(auth_home: Path) -> None:
    options = parse(["--provider", "openai"], environ={AUTH_HOME_ENV: str(auth_home)})
    assert options.auth_home == auth_home and options.approve_tools is True
    assert parse(["--provider", "openai"], environ={}).auth_home is None  # the preflight names it


def _preflight(provider: str = "openai", environ: dict | None = None, approve_tools: bool = True,
               codex_problem: str | None = None) -> list[str]:
    return preflight(provider=provider, auth_home_env=AUTH_HOME_ENV, environ=environ or {},
                     approve_tools=approve_tools, codex_problem=codex_problem)


def test_the_preflight_names_every_missing_piece_one_line_each(tmp_path: Path, auth_home: Path) -> None:
    assert _preflight(environ={AUTH_HOME_ENV: str(auth_home)}) == []
    assert _preflight("scripted") == []
    # no auth home, tools unapproved, another Codex: three lines, each naming its piece
    problems = _preflight(approve_tools=False, codex_problem="found codex-cli 0.170.0, expected 0.171.0")
    assert [line.split(":")[0] for line in problems] == ["auth home", "tool approvals", "Codex version"]
    assert AUTH_HOME_ENV in problems[0] and "0.170.0" in problems[2]
    assert [line.split(":")[0] for line in _preflight(environ={AUTH_HOME_ENV: str(tmp_path / "nowhere")})] == [
        "auth home"]
    # a home without its credential and without a model: both named
    empty = tmp_path / "empty"
    empty.mkdir()
    problems = _preflight(environ={AUTH_HOME_ENV: str(empty)})
    assert [line.split(":")[0] for line in problems] == ["auth.json", "model"]
    # a custom provider id without its table is named too
    (auth_home / "config.toml").write_text('model = "m"\nmodel_provider = "corp"\n', encoding="utf-8")
    assert [line.split(":")[0] for line in _preflight(environ={AUTH_HOME_ENV: str(auth_home)})] == ["model"]
    assert "[model_providers.corp]" in _preflight(environ={AUTH_HOME_ENV: str(auth_home)})[0]


def test_the_runner_stops_before_any_agent_on_a_failed_preflight(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv(AUTH_HOME_ENV, raising=False)
    err = io.StringIO()
    status = main(["--provider", "openai", "--no-approve-tools", "--runs-root", str(tmp_path / "runs"),
                   "--report-dir", str(tmp_path / "reports")], stderr=err)
    assert status == 2
    lines = err.getvalue().splitlines()
    assert "2 problems, no agent was started" in lines[0]
    assert [line.strip().split(":")[0] for line in lines[1:]] == ["auth home", "tool approvals"]
    assert not (tmp_path / "runs").exists() and not (tmp_path / "reports").exists()


def test_agent_homes_get_the_credential_privately_and_keep_the_users_provider(tmp_path: Path,
                                                                              auth_home: Path) -> None:
    codex_home = tmp_path / "agent"
    codex_home.mkdir()
    copy_authorization(auth_home, codex_home)
    assert stat.S_IMODE(os.stat(codex_home / "auth.json").st_mode) == 0o600
    assert json.loads((codex_home / "auth.json").read_text()) == AUTH

    server = PeerwireServer(command="python", env={"PEERWIRE_HOME": str(tmp_path / "core"), "PEERWIRE_SESSION_ID": "s"})
    with Projection(codex_home, AgentSettings(workspace=tmp_path, peerwire=server, provider=None)):
        projected = tomlkit.parse((codex_home / "config.toml").read_text())
        assert projected["model_provider"] == "openai" and projected["model"] == "gpt-5"
        assert "peerwire" in projected["mcp_servers"]
    assert (codex_home / "config.toml").read_text() == USER_CONFIG


def test_credentials_never_stay_in_artifacts(tmp_path: Path, auth_home: Path) -> None:
    folder = tmp_path / "artifacts"
    (folder / "rollouts" / "A").mkdir(parents=True)
    (folder / "rollouts" / "A" / "clean.jsonl").write_text('{"type": "session_meta"}\n')
    (folder / "appserver").mkdir()
    (folder / "appserver" / "A.g1.appserver.jsonl").write_text('{"token": "at-0123456789abcdef"}\n')
    (folder / "auth.json").write_text("{}")

    scan = SecretScan.collect({}, auth_home=auth_home)

    assert sorted(scan.secrets.values()) == ["at-0123456789abcdef", "rt-fedcba9876"]
    assert scan.holders(folder) == [folder / "appserver" / "A.g1.appserver.jsonl", folder / "auth.json"]


@pytest.mark.codex
def test_a_codex_of_another_version_stops_the_run_naming_both_versions(tmp_path: Path) -> None:
    err = io.StringIO()
    status = main(["--expected-version", "0.1.0", "--runs-root", str(tmp_path)], stderr=err)
    assert status == 2
    assert "0.1.0" in err.getvalue() and "0.171.0" in err.getvalue()
    assert not any(tmp_path.iterdir()), "nothing was started"


def test_junit_names_a_file_made_absolute(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert parse(["--junit", "out/acceptance.xml"], environ={}).junit == tmp_path / "out" / "acceptance.xml"
    assert parse([], environ={}).junit is None


def test_a_shard_is_k_of_n(tmp_path: Path) -> None:
    options = parse(["--shard", "2/4", "--durations", str(tmp_path / "d.json")], environ={})
    assert (options.shard.index, options.shard.count, options.durations) == (2, 4, tmp_path / "d.json")
    assert parse([], environ={}).shard is None
    for bad in ("0/4", "5/4", "2"):
        with pytest.raises(UsageError, match="--shard"):
            parse(["--shard", bad], environ={})


@pytest.mark.codex
def test_a_shard_with_nothing_to_run_still_reports_and_passes(tmp_path: Path) -> None:
    """One scenario run, two shards: shard 2 is empty. It starts no agent, yet writes its report, so a
    merge can tell a shard with nothing to do from a missing one."""
    err = io.StringIO()
    status = main(["--scenario", "negative", "--shard", "2/2", "--runs-root", str(tmp_path / "runs"),
                   "--report-dir", str(tmp_path / "reports")], stderr=err)
    assert status == 0, err.getvalue()
    assert "shard 2/2: 0 of 1 scenario runs" in err.getvalue()
    (folder,) = (tmp_path / "reports").iterdir()
    run = json.loads((folder / "report.json").read_text())["run"]
    assert run["passed"] is True and run["totals"]["scenarios"] == 0
    assert (run["shard"]["index"], run["shard"]["cases"], run["shard"]["plan"]) == (2, [], {"negative.attached": 1})
    assert run["suite"]["name"] == "peerwire acceptance" and len(run["suite"]["scenarios_sha256"]) == 64


def test_the_untrusted_workspace_diagnostic_runs_exactly_one_scenario() -> None:
    assert parse([], environ={}).trust_workspaces is True
    options = parse(["--untrusted-workspace", "--scenario", "smoke"], environ={})
    assert options.trust_workspaces is False and options.scenarios == ("smoke",)
    for argv in (["--untrusted-workspace"], ["--untrusted-workspace", "--scenario", "smoke", "--scenario", "modes"]):
        with pytest.raises(UsageError, match="exactly one --scenario"):
            parse(argv, environ={})
