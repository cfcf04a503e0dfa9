"""Locating the Codex CLI: selection order, version checks, the children's PATH.

Tests marked ``codex`` run the real pinned binary. The others use tiny
executables written to tmp_path that print a version line: they test our
selection and parsing, not Codex.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.codex.install import (
    ENV_VAR,
    CodexInstallError,
    CodexNotFoundError,
    CodexVersionError,
    CodexVersionMismatchError,
    locate_codex,
    native_launch,
    parse_codex_version,
    pinned_executable,
    pinned_version,
)
from harness.npm import NODE_MODULES_ENV, pin
from tests.patience import WAIT_S

ROOT = Path(__file__).resolve().parents[2]

posix_scripts = pytest.mark.skipif(
    sys.platform == "win32", reason="the stand-in executables are POSIX shell scripts"
)


def write_executable(path: Path, *, stdout: str = "", stderr: str = "", status: int = 0) -> Path:
    """A stand-in ``codex`` that prints the given output and exits with ``status``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "#!/bin/sh\n"
        f"printf '%s' '{stdout}'\n"
        f"printf '%s' '{stderr}' >&2\n"
        f"exit {status}\n"
    )
    path.chmod(0o755)
    return path


def fake_project(root: Path, *, pinned: str, installed: str | None) -> Path:
    """A project root pinning ``pinned``, with a pinned install reporting ``installed`` (None: not installed)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "package.json").write_text(json.dumps({"dependencies": {"@openai/codex": pinned}}))
    if installed is not None:
        write_executable(root / "node_modules" / ".bin" / "codex", stdout=f"codex-cli {installed}\n")
    return root


# -- parsing -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "version"),
    [
        ("codex-cli 0.171.0\n", "0.171.0"),
        ("codex-cli 0.154.0-alpha.6\n", "0.154.0-alpha.6"),
        ("WARNING: proceeding anyway\ncodex-cli 1.2.3\n", "1.2.3"),
        ("codex-cli 1.2.3", "1.2.3"),
    ],
)
def test_the_version_is_read_from_the_codex_cli_line(output: str, version: str) -> None:
    assert parse_codex_version(output) == version


@pytest.mark.parametrize(
    "output", ["", "codex 0.171.0\n", "codex-cli\n", "codex-cli latest\n", "xcodex-cli 1.2.3\n"]
)
def test_output_without_a_version_line_is_an_error_quoting_it(output: str) -> None:
    with pytest.raises(CodexVersionError) as failure:
        parse_codex_version(output)
    assert repr(output) in str(failure.value)


# -- the pinned version --------------------------------------------------------------


def test_the_pinned_version_comes_from_package_json(tmp_path: Path) -> None:
    fake_project(tmp_path, pinned="1.4.2", installed=None)
    assert pinned_version(tmp_path) == "1.4.2"


@pytest.mark.parametrize("spec", ["^0.171.0", "latest", "~1.0.0", None])
def test_a_version_range_is_not_a_pin(tmp_path: Path, spec: str | None) -> None:
    (tmp_path / "package.json").write_text(json.dumps({"dependencies": {"@openai/codex": spec}}))
    with pytest.raises(CodexInstallError, match="exact"):
        pinned_version(tmp_path)


def test_a_missing_package_json_is_reported_with_its_path(tmp_path: Path) -> None:
    with pytest.raises(CodexInstallError) as failure:
        pinned_version(tmp_path)
    assert str(tmp_path / "package.json") in str(failure.value)


def test_by_default_the_pin_is_the_one_peerwire_ships() -> None:
    assert pinned_version() == pin("@openai/codex")


@posix_scripts
def test_by_default_the_pinned_install_is_the_nearest_node_modules_with_a_codex(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = fake_project(tmp_path / "project", pinned="1.0.0", installed="1.0.0")
    inner = tmp_path / "project" / "sub" / "node_modules"  # a node_modules without Codex is passed over
    inner.mkdir(parents=True)
    monkeypatch.chdir(inner.parent)
    assert pinned_executable(environ={}) == project / "node_modules" / ".bin" / "codex"
    chosen = locate_codex(environ={}, expected_version=None)
    assert (chosen.executable, chosen.source) == (project / "node_modules" / ".bin" / "codex", "pinned install")

    elsewhere = fake_project(tmp_path / "elsewhere", pinned="2.0.0", installed="2.0.0")
    chosen = locate_codex(environ={NODE_MODULES_ENV: str(elsewhere / "node_modules")}, expected_version=None)
    assert (chosen.executable, chosen.version) == (elsewhere / "node_modules" / ".bin" / "codex", "2.0.0")


def test_a_missing_pinned_install_outside_a_checkout_says_what_to_npm_install(tmp_path: Path) -> None:
    empty = tmp_path / "modules"
    empty.mkdir()
    with pytest.raises(CodexNotFoundError) as failure:
        locate_codex(environ={NODE_MODULES_ENV: str(empty)})
    message = str(failure.value)
    assert f"npm install @openai/codex@{pin('@openai/codex')}" in message
    assert f"{NODE_MODULES_ENV}={empty}" in message and "--codex PATH" in message


# -- selection -----------------------------------------------------------------------


@posix_scripts
def test_an_explicit_path_wins_over_the_variable_and_the_pinned_install(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "project", pinned="1.0.0", installed="1.0.0")
    from_env = write_executable(tmp_path / "env-bin" / "codex", stdout="codex-cli 2.0.0\n")
    explicit = write_executable(tmp_path / "explicit-bin" / "codex", stdout="codex-cli 3.0.0\n")
    environ = {ENV_VAR: str(from_env)}

    chosen = locate_codex(explicit, environ=environ, root=root, expected_version=None)
    assert (chosen.executable, chosen.version, chosen.source) == (explicit, "3.0.0", "--codex")

    chosen = locate_codex(environ=environ, root=root, expected_version=None)
    assert (chosen.executable, chosen.version, chosen.source) == (from_env, "2.0.0", ENV_VAR)

    chosen = locate_codex(environ={ENV_VAR: ""}, root=root, expected_version=None)
    assert chosen.executable == root / "node_modules" / ".bin" / "codex"
    assert (chosen.version, chosen.source) == ("1.0.0", "pinned install")


@posix_scripts
def test_by_default_the_version_must_be_the_pinned_one(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "project", pinned="1.0.0", installed="1.0.0")
    assert locate_codex(environ={}, root=root).version == "1.0.0"

    other = write_executable(tmp_path / "bin" / "codex", stdout="codex-cli 9.9.9\n")
    with pytest.raises(CodexVersionMismatchError) as mismatch:
        locate_codex(other, environ={}, root=root)
    assert (mismatch.value.found, mismatch.value.expected) == ("9.9.9", "1.0.0")
    assert "9.9.9" in str(mismatch.value) and "1.0.0" in str(mismatch.value)
    assert str(other) in str(mismatch.value)


@posix_scripts
def test_an_explicit_expected_version_is_checked(tmp_path: Path) -> None:
    fake = write_executable(tmp_path / "bin" / "codex", stdout="codex-cli 0.170.9\n")
    with pytest.raises(CodexVersionMismatchError, match=r"0\.170\.9.*0\.171\.0"):
        locate_codex(fake, expected_version="0.171.0", environ={})
    assert locate_codex(fake, expected_version="0.170.9", environ={}).version == "0.170.9"


def test_a_missing_pinned_install_says_to_run_npm_ci(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "project", pinned="1.0.0", installed=None)
    with pytest.raises(CodexNotFoundError) as failure:
        locate_codex(environ={}, root=root)
    message = str(failure.value)
    assert "npm ci" in message and "make setup" in message
    assert str(pinned_executable(root)) in message


def test_a_missing_explicit_path_names_the_option_and_path(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "codex"
    with pytest.raises(CodexNotFoundError, match="--codex") as failure:
        locate_codex(missing, environ={})
    assert str(missing) in str(failure.value)


def test_a_variable_pointing_nowhere_names_the_variable(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "codex"
    with pytest.raises(CodexNotFoundError, match=ENV_VAR) as failure:
        locate_codex(environ={ENV_VAR: str(missing)})
    assert str(missing) in str(failure.value)


@posix_scripts
def test_a_codex_that_fails_reports_its_status_and_stderr(tmp_path: Path) -> None:
    broken = write_executable(tmp_path / "bin" / "codex", stderr="cannot load native binary", status=3)
    with pytest.raises(CodexVersionError, match="status 3: cannot load native binary"):
        locate_codex(broken, environ={}, expected_version=None)


@posix_scripts
def test_a_bare_name_is_looked_up_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = write_executable(tmp_path / "bin" / "codex-nightly", stdout="codex-cli 5.0.0\n")
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.chdir(tmp_path)  # nothing of that name here
    chosen = locate_codex("codex-nightly", environ={}, expected_version=None)
    assert chosen.executable == fake


# -- the children's PATH ---------------------------------------------------------------


@posix_scripts
def test_children_find_the_selected_codex_first_on_path(tmp_path: Path) -> None:
    selected = write_executable(tmp_path / "selected" / "codex", stdout="codex-cli 7.0.0\n")
    shadowing = write_executable(tmp_path / "shadowing" / "codex", stdout="codex-cli 6.0.0\n")
    base = {"PATH": os.pathsep.join([str(shadowing.parent), str(selected.parent), "/usr/bin", "/bin"]),
            "KEEP": "me"}
    installation = locate_codex(selected, environ={}, expected_version=None)

    env = installation.child_env(base)

    assert env["PATH"].split(os.pathsep) == [str(selected.parent), str(shadowing.parent), "/usr/bin", "/bin"]
    assert env["KEEP"] == "me"
    assert base["PATH"].split(os.pathsep)[0] == str(shadowing.parent)  # base untouched
    assert installation.bin_dir == selected.parent
    # A child resolving `codex` by name gets the selected one.
    result = subprocess.run(["sh", "-c", "codex --version"], env=env, capture_output=True, text=True, timeout=WAIT_S)
    assert result.stdout == "codex-cli 7.0.0\n"


# -- the real pinned binary ---------------------------------------------------------------


@pytest.mark.codex
def test_the_pinned_install_reports_the_pinned_version() -> None:
    installation = locate_codex(environ={})

    assert installation.source == "pinned install"
    assert installation.executable == ROOT / "node_modules" / ".bin" / (
        "codex.cmd" if sys.platform == "win32" else "codex"
    )
    assert installation.version == pinned_version()


@pytest.mark.codex
def test_a_child_started_elsewhere_runs_the_pinned_codex_by_name(tmp_path: Path) -> None:
    installation = locate_codex(environ={})
    env = installation.child_env()
    env["CODEX_HOME"] = str(tmp_path / "codex-home")
    (tmp_path / "codex-home").mkdir()

    assert shutil.which("codex", path=env["PATH"]) == str(installation.executable)
    result = subprocess.run(
        ["codex", "--version"] if sys.platform != "win32" else [str(installation.executable), "--version"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=WAIT_S,
    )
    assert result.returncode == 0, result.stderr
    assert parse_codex_version(result.stdout) == pinned_version()


# -- starting the binary without npm's launcher ----------------------------------------------

needs_node = pytest.mark.skipif(shutil.which("node") is None or sys.platform == "win32",
                                reason="runs npm's launcher with Node (POSIX: on Windows the launcher is always used)")


def launcher_install(root: Path, launcher: Path, *, binary_prints_env: bool = True) -> Path:
    """An npm-shaped install under ``root``: ``launcher`` (npm's codex.js) as ``@openai/codex``, and a stand-in
    platform binary that prints its argv and the variables the launcher sets; returns ``.bin/codex``."""
    real_package = launcher.resolve().parent.parent
    package = root / "node_modules" / "@openai" / "codex"
    (package / "bin").mkdir(parents=True)
    shutil.copy(real_package / "package.json", package / "package.json")
    shutil.copy(launcher.resolve(), package / "bin" / "codex.js")
    (package / "bin" / "codex.js").chmod(0o755)
    # Written out from the launcher's own table (not the code's), so a wrong table in the code still fails.
    triple, platform_package = {("linux", "x86_64"): ("x86_64-unknown-linux-musl", "codex-linux-x64"),
                                ("linux", "aarch64"): ("aarch64-unknown-linux-musl", "codex-linux-arm64"),
                                ("darwin", "x86_64"): ("x86_64-apple-darwin", "codex-darwin-x64"),
                                ("darwin", "arm64"): ("aarch64-apple-darwin", "codex-darwin-arm64"),
                                }[(sys.platform, os.uname().machine)]
    vendor = root / "node_modules" / "@openai" / platform_package
    (vendor / "package.json").parent.mkdir(parents=True)
    (vendor / "package.json").write_text(json.dumps({"name": f"@openai/{platform_package}", "version": "0.0.0"}))
    binary = vendor / "vendor" / triple / "bin" / "codex"
    binary.parent.mkdir(parents=True)
    binary.write_text('#!/bin/sh\necho "binary=$0 args=$*"\nenv | grep "^CODEX_MANAGED_" | sort\n')
    binary.chmod(0o755)
    bin_link = root / "node_modules" / ".bin" / "codex"
    bin_link.parent.mkdir()
    bin_link.symlink_to(Path("..") / "@openai" / "codex" / "bin" / "codex.js")
    return bin_link


@pytest.mark.codex
@needs_node
def test_the_pinned_launcher_is_known_and_its_binary_is_the_pinned_codex(tmp_path: Path) -> None:
    """A Codex pin bump fails here until its launcher has been read and its digest added to KNOWN_LAUNCHERS."""
    installation = locate_codex(environ={})
    native = native_launch(installation.executable)
    assert native is not None, f"{installation.executable.resolve()} is not a launcher peerwire knows"
    assert installation.program == native.binary != installation.executable
    env = installation.child_env({"PATH": "/usr/bin:/bin", "CODEX_MANAGED_BY_PNPM": "1"})
    assert {k: v for k, v in env.items() if k.startswith("CODEX_MANAGED_")} == native.env
    home = tmp_path / "codex-home"
    home.mkdir()
    done = subprocess.run([str(installation.program), "--version"], env={**env, "CODEX_HOME": str(home)},
                          capture_output=True, text=True, timeout=WAIT_S)
    assert done.returncode == 0 and parse_codex_version(done.stdout) == installation.version, done.stderr


@pytest.mark.codex
@needs_node
def test_starting_the_binary_directly_is_what_the_launcher_does(tmp_path: Path) -> None:
    """npm's launcher, run by Node, picks the same binary and sets the same variables as native_launch."""
    launcher = launcher_install(tmp_path / "project", locate_codex(environ={}).executable)
    native = native_launch(launcher)
    assert native is not None
    env = {"PATH": os.environ["PATH"], "CODEX_MANAGED_BY_BUN": "1"}  # the launcher drops what another manager set
    through_launcher = subprocess.run([str(launcher), "app-server", "--x"], env=env, capture_output=True,
                                      text=True, timeout=WAIT_S)
    direct_env = {**env, **native.env}
    direct_env.pop("CODEX_MANAGED_BY_BUN")
    direct = subprocess.run([str(native.binary), "app-server", "--x"], env=direct_env, capture_output=True,
                            text=True, timeout=WAIT_S)
    assert through_launcher.returncode == 0, through_launcher.stderr
    assert through_launcher.stdout == direct.stdout
    assert f"binary={native.binary} args=app-server --x" in direct.stdout


@needs_node
def test_an_unknown_launcher_or_another_managers_install_is_started_through_its_launcher(tmp_path: Path) -> None:
    launcher = launcher_install(tmp_path / "known", locate_codex(environ={}, expected_version=None).executable)
    assert native_launch(launcher) is not None
    edited = launcher_install(tmp_path / "edited", launcher)
    script = edited.resolve()
    script.write_text(script.read_text(encoding="utf-8") + "\n// one more line\n", encoding="utf-8")
    assert native_launch(edited) is None
    pnpm = launcher_install(tmp_path / "pnpm", launcher)
    (tmp_path / "pnpm" / "node_modules" / ".modules.yaml").write_text("layoutVersion: 5\n")
    assert native_launch(pnpm) is None
    installation = locate_codex(write_executable(tmp_path / "plain" / "codex", stdout="codex-cli 1.2.3\n"),
                                environ={}, expected_version=None)
    assert installation.program == installation.executable
    assert not any(k.startswith("CODEX_MANAGED_") for k in installation.child_env({"PATH": "/bin"}))
