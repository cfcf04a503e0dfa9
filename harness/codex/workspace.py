"""Fixture workspaces: a fresh Git repository per agent.

Codex treats the Git repository around its working directory as the project
(root, trust, instructions). A workspace inside the run home, which may itself
sit inside a checkout, would otherwise inherit that checkout's repository root.
Each agent therefore works in its own repository: initialised empty, with a
local identity and one commit holding a small README.

Git runs isolated from the user's and the system's configuration, and from
``GIT_*`` variables in the environment (``GIT_DIR`` set by a hook would
otherwise redirect every command to another repository), so the fixture is
the same on every machine. The commit's author, committer and dates are fixed
too: the same content yields the same commit id in every run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.process.bounded import run_bounded

__all__ = ["FixtureWorkspace", "WorkspaceError", "git_environment"]

AUTHOR_NAME = "peerwire fixture"
AUTHOR_EMAIL = "fixture@peerwire.invalid"
# Fixed so commit ids depend on content alone.
COMMIT_DATE = "2026-01-01T00:00:00+00:00"
INITIAL_BRANCH = "main"

_GIT_TIMEOUT = 60.0


class WorkspaceError(Exception):
    """A fixture workspace could not be created or inspected."""


def git_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: ours) without ``GIT_*`` variables, blind to user and system Git config.

    Pinned author and committer identity and dates are added, so commits made
    with it are reproducible.
    """
    env = {key: value for key, value in (os.environ if base is None else base).items()
           if not key.upper().startswith("GIT_")}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_TERMINAL_PROMPT="0",
        GIT_AUTHOR_NAME=AUTHOR_NAME,
        GIT_AUTHOR_EMAIL=AUTHOR_EMAIL,
        GIT_AUTHOR_DATE=COMMIT_DATE,
        GIT_COMMITTER_NAME=AUTHOR_NAME,
        GIT_COMMITTER_EMAIL=AUTHOR_EMAIL,
        GIT_COMMITTER_DATE=COMMIT_DATE,
    )
    return env


@dataclass(frozen=True)
class FixtureWorkspace:
    """An agent's working directory: the root of its own Git repository."""

    path: Path
    head: str
    """The id of the initial commit."""

    @classmethod
    def create(cls, path: str | os.PathLike[str], *, agent: str, git: str = "git") -> FixtureWorkspace:
        """Make ``path`` a fresh repository with one commit and return it.

        ``path`` may be missing or an empty directory; anything else is refused
        with :class:`WorkspaceError`, so no one's files end up committed. The
        README names ``agent``. ``git`` is the Git executable to use.
        """
        root = Path(path).absolute()
        if root.exists() and (not root.is_dir() or any(root.iterdir())):
            raise WorkspaceError(f"workspace {root} must be missing or an empty directory")
        if shutil.which(git) is None:
            raise WorkspaceError(f"Git executable {git!r} not found; install Git or put it on PATH")
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        (root / "README.md").write_text(
            f"# Workspace of {agent}\n\nA fixture workspace for a peerwire acceptance run.\n",
            encoding="utf-8",
        )
        _git(git, root, "init", "--quiet", f"--initial-branch={INITIAL_BRANCH}")
        # Local identity as well as the pinned environment: Codex and the
        # tools it runs here commit with their own environment.
        _git(git, root, "config", "user.name", AUTHOR_NAME)
        _git(git, root, "config", "user.email", AUTHOR_EMAIL)
        _git(git, root, "config", "commit.gpgsign", "false")
        _git(git, root, "add", "README.md")
        _git(git, root, "commit", "--quiet", "--no-verify", "-m", f"Initial workspace of {agent}")
        head = _git(git, root, "rev-parse", "HEAD").strip()
        return cls(path=root, head=head)

    def toplevel(self, git: str = "git") -> Path:
        """The repository root Git finds from this workspace (symlinks resolved).

        The workspace itself, whatever repository encloses it.
        """
        return Path(_git(git, self.path, "rev-parse", "--show-toplevel").strip())


def _git(git: str, cwd: Path, *args: str) -> str:
    argv: Sequence[str] = [git, *args]
    try:
        result = run_bounded(
            argv,
            cwd=cwd,
            env=git_environment(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT,
        )
    except subprocess.TimeoutExpired as exc:
        raise WorkspaceError(f"`{' '.join(argv)}` in {cwd} did not finish within {_GIT_TIMEOUT:.0f} s") from exc
    if result.returncode != 0:
        raise WorkspaceError(
            f"`{' '.join(argv)}` in {cwd} failed with status {result.returncode}: {result.stderr.strip()}"
        )
    return result.stdout
