"""Fixture workspaces: each agent's own repository, whatever surrounds it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from harness.process.run_home import RunHome
from harness.codex.workspace import FixtureWorkspace, WorkspaceError, git_environment
from tests.patience import WAIT_S


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env if env is not None else git_environment(),
        capture_output=True, text=True, timeout=WAIT_S,
    )


def show_toplevel(cwd: Path) -> Path:
    # The user's own configuration, as Codex would see it; only GIT_* variables
    # that would point Git elsewhere are dropped.
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    result = git(cwd, "rev-parse", "--show-toplevel", env=env)
    assert result.returncode == 0, result.stderr
    return Path(result.stdout.strip())


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """An enclosing Git repository with one commit, as a developer's checkout would be."""
    outer = tmp_path / "checkout"
    outer.mkdir()
    assert git(outer, "init", "--quiet").returncode == 0
    (outer / "pyproject.toml").write_text("[project]\n")
    assert git(outer, "add", ".").returncode == 0
    assert git(outer, "commit", "--quiet", "-m", "outer").returncode == 0
    return outer


def test_a_workspace_in_a_run_home_inside_a_checkout_is_its_own_repository_root(checkout: Path) -> None:
    with RunHome(checkout / "runs") as home:
        agent = home.agent("alice")
        # Without a repository of its own, Git would find the checkout.
        assert show_toplevel(agent.codex_home) == checkout.resolve()

        workspace = FixtureWorkspace.create(agent.workspace, agent="alice")

        assert workspace.toplevel() == agent.workspace.resolve()
        nested = agent.workspace / "src" / "deep"
        nested.mkdir(parents=True)
        assert show_toplevel(nested) == agent.workspace.resolve()
    # And the checkout did not gain anything from it.
    assert git(checkout, "rev-list", "--count", "HEAD").stdout.strip() == "1"


def test_the_initial_commit_holds_a_readme_naming_the_agent(tmp_path: Path) -> None:
    workspace = FixtureWorkspace.create(tmp_path / "ws", agent="bob")

    assert git(workspace.path, "rev-list", "--count", "HEAD").stdout.strip() == "1"
    assert git(workspace.path, "rev-parse", "HEAD").stdout.strip() == workspace.head
    assert git(workspace.path, "ls-files").stdout.splitlines() == ["README.md"]
    assert git(workspace.path, "status", "--porcelain").stdout == ""
    assert git(workspace.path, "branch", "--show-current").stdout.strip() == "main"
    assert "bob" in (workspace.path / "README.md").read_text()
    # A local identity, for commits made later with another environment.
    assert git(workspace.path, "config", "--local", "user.name").stdout.strip() == "peerwire fixture"
    assert git(workspace.path, "config", "--local", "user.email").stdout.strip() == "fixture@peerwire.invalid"


def test_the_same_agent_gets_the_same_commit_id_in_every_run(tmp_path: Path) -> None:
    first = FixtureWorkspace.create(tmp_path / "run-1", agent="alice")
    second = FixtureWorkspace.create(tmp_path / "run-2", agent="alice")
    other = FixtureWorkspace.create(tmp_path / "run-3", agent="bob")
    assert first.head == second.head
    assert other.head != first.head


def test_git_variables_in_the_environment_do_not_redirect_it(
    checkout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As inside a Git hook of the enclosing checkout.
    monkeypatch.setenv("GIT_DIR", str(checkout / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(checkout))
    monkeypatch.setenv("GIT_INDEX_FILE", str(checkout / ".git" / "index"))

    workspace = FixtureWorkspace.create(checkout / "runs" / "ws", agent="alice")

    assert (workspace.path / ".git").is_dir()
    assert workspace.toplevel() == workspace.path.resolve()
    assert git(checkout, "rev-list", "--count", "HEAD").stdout.strip() == "1"
    assert git(checkout, "status", "--porcelain", "--untracked-files=no").stdout == ""


def test_user_git_configuration_cannot_break_the_fixture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    pre_commit = hooks / "pre-commit"
    pre_commit.write_text("#!/bin/sh\necho refused by hook >&2\nexit 1\n")
    pre_commit.chmod(0o755)
    config = tmp_path / "gitconfig"
    config.write_text(
        "[commit]\n\tgpgsign = true\n"
        f"[gpg]\n\tprogram = {tmp_path / 'no-such-gpg'}\n"
        f"[core]\n\thooksPath = {hooks}\n"
        "[init]\n\tdefaultBranch = trunk\n"
    )
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    # The configuration really breaks an ordinary commit.
    probe = tmp_path / "probe"
    probe.mkdir()
    hostile = {key: value for key, value in os.environ.items()}
    assert git(probe, "init", "--quiet", env=hostile).returncode == 0
    assert git(probe, "commit", "--allow-empty", "-m", "x", env=hostile).returncode != 0

    workspace = FixtureWorkspace.create(tmp_path / "ws", agent="alice")

    assert git(workspace.path, "branch", "--show-current").stdout.strip() == "main"
    assert git(workspace.path, "rev-list", "--count", "HEAD").stdout.strip() == "1"


def test_a_non_empty_directory_is_refused_and_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "ws"
    target.mkdir()
    (target / "notes.txt").write_text("someone's file")
    with pytest.raises(WorkspaceError, match="missing or an empty directory"):
        FixtureWorkspace.create(target, agent="alice")
    assert sorted(p.name for p in target.iterdir()) == ["notes.txt"]


def test_a_missing_git_is_reported(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="'no-such-git' not found"):
        FixtureWorkspace.create(tmp_path / "ws", agent="alice", git="no-such-git")
    assert not (tmp_path / "ws").exists()
