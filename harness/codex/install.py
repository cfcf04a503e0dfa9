"""The Codex CLI the acceptance runner drives: where it is, which version it is.

Selection order: an explicit path (the runner's ``--codex PATH``), then the
``PEERWIRE_CODEX`` environment variable, then the pinned install,
``node_modules/.bin/codex`` in the first ``node_modules`` folder
:mod:`harness.npm` finds (``$PEERWIRE_NODE_MODULES``, the current project's,
or the one beside the Python environment: a checkout's, which ``npm ci``
creates from ``package.json`` / ``package-lock.json``).

The selected executable must report the expected version, by default the one
peerwire pins (:func:`harness.npm.pin`, equal to a checkout's ``package.json``):
scenarios and recorded fixtures assume that version's protocol, so a mismatch
stops the run before any agent starts.

Other releases (to see what a Codex upgrade would change) are installed from
the npm registry into a cache outside the checkout, one folder per version
(:func:`install_release`), and never touch the pinned install.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from harness import npm
from harness.process.bounded import run_bounded

__all__ = [
    "CACHE_ENV",
    "ENV_VAR",
    "PINNED",
    "CodexInstallError",
    "CodexInstallation",
    "KNOWN_LAUNCHERS",
    "NativeLaunch",
    "CodexNotFoundError",
    "CodexReleaseError",
    "CodexVersionError",
    "CodexVersionMismatchError",
    "cache_root",
    "install_release",
    "locate_codex",
    "native_launch",
    "parse_codex_version",
    "pinned_executable",
    "pinned_version",
    "read_codex_version",
]

ENV_VAR = "PEERWIRE_CODEX"
CACHE_ENV = "PEERWIRE_CODEX_CACHE"
PACKAGE = npm.CODEX
VERSION_TIMEOUT = 30.0
INSTALL_TIMEOUT = 900.0

# `codex --version` prints e.g. "codex-cli 0.171.0" or "codex-cli 0.154.0-alpha.6".
_VERSION_LINE = re.compile(r"^codex-cli\s+(\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.+-]+)?)\s*$", re.MULTILINE)
_EXACT_VERSION = re.compile(r"\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.+-]+)?")


class CodexInstallError(Exception):
    """The Codex CLI cannot be used as selected."""


class CodexNotFoundError(CodexInstallError):
    """No Codex executable where the selection points."""


class CodexVersionError(CodexInstallError):
    """The version of the Codex executable cannot be determined."""


class CodexVersionMismatchError(CodexVersionError):
    """The Codex executable reports another version than expected."""

    def __init__(self, executable: Path, found: str, expected: str) -> None:
        self.executable = executable
        self.found = found
        self.expected = expected
        super().__init__(
            f"Codex at {executable} is version {found}, but {expected} is expected. "
            f"Select a Codex {expected} (--codex PATH or {ENV_VAR}), or install it: `npm install "
            f"{PACKAGE}@{expected}` in your project (in a peerwire checkout, `npm ci` restores the pinned install)."
        )


class CodexReleaseError(CodexInstallError):
    """A Codex release cannot be installed from the npm registry (no npm, no registry, no such release)."""


class _Pinned(enum.Enum):
    VERSION = "the version peerwire pins"

    def __repr__(self) -> str:
        return "PINNED"


#: Default of ``locate_codex(expected_version=...)``: the version peerwire pins.
PINNED = _Pinned.VERSION


@dataclass(frozen=True)
class CodexInstallation:
    """A located, version-checked Codex CLI.

    ``executable`` is absolute but not symlink-resolved: npm's ``.bin/codex``
    is a link whose directory, not its target's, is the one meant for PATH.
    ``source`` says what selected it: ``--codex``, ``PEERWIRE_CODEX`` or
    ``pinned install``.
    """

    executable: Path
    version: str
    source: str

    @property
    def bin_dir(self) -> Path:
        """The directory to put first on children's PATH: it holds the selected ``codex``."""
        return self.executable.parent

    @property
    def program(self) -> Path:
        """What starts this Codex: the native binary npm's launcher would replace itself with, when the
        launcher is one :func:`native_launch` knows, else :attr:`executable` (the launcher itself)."""
        native = native_launch(self.executable)
        return native.binary if native is not None else self.executable

    def child_env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """A copy of ``base`` (default: our environment) with :attr:`bin_dir` first on PATH, and the environment
        npm's launcher gives the binary when :attr:`program` skips that launcher.

        Other occurrences of that directory are dropped from PATH; the rest
        keeps its order. ``base`` is not modified.
        """
        env = _with_path_first(os.environ if base is None else base, self.bin_dir)
        native = native_launch(self.executable)
        if native is not None:
            for name in _MANAGED_BY:
                env.pop(name, None)
            env.update(native.env)
        return env


KNOWN_LAUNCHERS = frozenset({
    "0e0c66f50074965a40cbd12f625b0a35963baf41bbd8c201a93e32fddbe2e073",  # @openai/codex 0.171.0
})
"""SHA-256 of npm launchers (``@openai/codex/bin/codex.js``) whose whole effect :func:`native_launch` reproduces:
pick the platform package's binary, set ``CODEX_MANAGED_PACKAGE_ROOT`` and ``CODEX_MANAGED_BY_NPM``, and exec the
binary in place of Node. Starting the binary directly spares each Codex start a Node start-up (about 0.1 s of
CPU); a release with any other launcher is started through its launcher. A pin bump adds its launcher here once
it has been read (tests/harness/test_codex_install.py fails until then)."""

_MANAGED_BY = ("CODEX_MANAGED_BY_NPM", "CODEX_MANAGED_BY_BUN", "CODEX_MANAGED_BY_PNPM", "CODEX_MANAGED_BY_VITE_PLUS")
_TARGETS = {("linux", "x86_64"): ("x86_64-unknown-linux-musl", "codex-linux-x64"),
            ("linux", "aarch64"): ("aarch64-unknown-linux-musl", "codex-linux-arm64"),
            ("darwin", "x86_64"): ("x86_64-apple-darwin", "codex-darwin-x64"),
            ("darwin", "arm64"): ("aarch64-apple-darwin", "codex-darwin-arm64")}
"""(platform, machine) -> the Rust target and the npm platform package, as the launcher maps them (POSIX only:
on Windows the launcher stays the parent of the binary, so it is always used)."""


@dataclass(frozen=True)
class NativeLaunch:
    """The binary npm's launcher would exec, and the variables it would set."""

    binary: Path
    env: dict[str, str]


@functools.cache
def native_launch(executable: Path) -> NativeLaunch | None:
    """How to start the Codex behind the npm launcher ``executable`` without Node, or None: not a launcher in
    :data:`KNOWN_LAUNCHERS`, an install another package manager owns (pnpm, Bun: the launcher would name it), a
    platform without a native package, or no binary where the launcher looks."""
    target = _TARGETS.get((sys.platform, platform.machine()))
    try:
        script = Path(executable).resolve(strict=True)
        known = hashlib.sha256(script.read_bytes()).hexdigest() in KNOWN_LAUNCHERS
    except OSError:
        return None
    package_root = script.parent.parent  # node_modules/@openai/codex, as the launcher's realpath finds it
    node_modules = package_root.parent.parent
    if not known or target is None or (node_modules / ".modules.yaml").exists() or ".bun" in package_root.parts:
        return None
    triple, platform_package = target
    # Where Node's require.resolve finds the platform package from the launcher, then the launcher's fallback.
    for vendor in (package_root / "node_modules" / "@openai" / platform_package / "vendor",
                   node_modules / "@openai" / platform_package / "vendor", package_root / "vendor"):
        binary = vendor / triple / "bin" / "codex"
        if binary.is_file() and os.access(binary, os.X_OK):
            return NativeLaunch(binary, {"CODEX_MANAGED_PACKAGE_ROOT": str(package_root), "CODEX_MANAGED_BY_NPM": "1"})
    return None


def pinned_version(root: str | os.PathLike[str] | None = None) -> str:
    """The Codex version pinned: by peerwire (default), or by ``package.json`` in the project ``root``.

    Raises :class:`CodexInstallError` if the pin cannot be read or names a range
    instead of one exact version.
    """
    if root is None:
        where, read = "peerwire's npm pins (npm-pins.json)", npm.pins
    else:
        manifest = Path(root) / "package.json"
        where = str(manifest)

        def read() -> dict[str, str]:
            return json.loads(manifest.read_text(encoding="utf-8"))["dependencies"]
    try:
        spec = read()[PACKAGE]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CodexInstallError(f"cannot read the pinned Codex version ({PACKAGE} in {where}): {exc!r}") from exc
    if not isinstance(spec, str) or not _EXACT_VERSION.fullmatch(spec):
        raise CodexInstallError(f"{where} must pin one exact {PACKAGE} version, not {spec!r}")
    return spec


def pinned_executable(root: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """Where the pinned Codex is installed: ``node_modules/.bin/codex`` under the project ``root``, or by
    default in the first ``node_modules`` :mod:`harness.npm` finds with one (else the first it looks at),
    ``environ`` (default: ours) giving ``PEERWIRE_NODE_MODULES``.

    The path is returned whether or not it exists.
    """
    if root is not None:
        return _codex_in(Path(root).absolute() / "node_modules")
    folders = npm.search_path(environ)
    return next((path for path in map(_codex_in, folders) if path.is_file()), _codex_in(folders[0]))


def _codex_in(node_modules: Path) -> Path:
    bin_dir = node_modules / ".bin"
    if sys.platform == "win32":
        # npm writes a .cmd shim there (and a shell script for POSIX shells).
        for name in ("codex.cmd", "codex.exe"):
            if (bin_dir / name).is_file():
                return bin_dir / name
        return bin_dir / "codex.cmd"
    return bin_dir / "codex"


def parse_codex_version(output: str) -> str:
    """The version in ``codex --version`` output (``codex-cli 0.171.0`` -> ``0.171.0``).

    Other lines (warnings) are skipped. Raises :class:`CodexVersionError`,
    quoting the output, if no line has that form.
    """
    match = _VERSION_LINE.search(output)
    if match is None:
        raise CodexVersionError(f"no 'codex-cli <version>' line in the output of `codex --version`: {output!r}")
    return match.group(1)


def read_codex_version(executable: str | os.PathLike[str], *, timeout: float = VERSION_TIMEOUT) -> str:
    """Run ``executable --version`` and return the version it reports.

    Codex writes helper links into its home even for ``--version``, so it runs
    with a scratch ``CODEX_HOME``, never the user's. Raises
    :class:`CodexVersionError` if it cannot run, fails, hangs past ``timeout``
    seconds or prints something else.
    """
    path = Path(executable)
    # Its directory first on PATH, as for the agents: npm's shims find their
    # neighbours through it on some platforms.
    env = _with_path_first(os.environ, path.parent)
    with tempfile.TemporaryDirectory(prefix="peerwire-codex-probe-") as scratch_home:
        env["CODEX_HOME"] = scratch_home
        try:
            result = run_bounded(
                [str(path), "--version"],
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as exc:
            raise CodexVersionError(f"`{path} --version` did not finish within {timeout:.0f} s") from exc
        except OSError as exc:
            raise CodexVersionError(f"cannot run {path}: {exc.strerror or exc}") from exc
    if result.returncode != 0:
        raise CodexVersionError(
            f"`{path} --version` failed with status {result.returncode}: {result.stderr.strip()}"
        )
    return parse_codex_version(result.stdout)


def locate_codex(
    explicit: str | os.PathLike[str] | None = None,
    *,
    expected_version: str | None | _Pinned = PINNED,
    environ: Mapping[str, str] | None = None,
    root: str | os.PathLike[str] | None = None,
) -> CodexInstallation:
    """Select the Codex CLI, check its version, and describe it.

    ``explicit`` (``--codex PATH``) wins over ``PEERWIRE_CODEX`` in
    ``environ`` (default: our environment), which wins over the pinned install
    (:func:`pinned_executable` under ``root``, by default where :mod:`harness.npm`
    finds one). An explicit value or variable
    without a directory part is also looked up on PATH. An empty variable
    counts as unset.

    ``expected_version`` is the version the executable must report: by
    default the one peerwire pins; None accepts any version (the one
    found is still recorded). Raises :class:`CodexNotFoundError` when the
    selection points at nothing executable, :class:`CodexVersionMismatchError`
    on another version, and :class:`CodexVersionError` when the version cannot
    be read.
    """
    environ = os.environ if environ is None else environ
    if explicit is not None:
        source, candidate = "--codex", os.fspath(explicit)
        executable = _find_executable(candidate)
        if executable is None:
            raise CodexNotFoundError(f"--codex {candidate}: no executable Codex there")
    elif environ.get(ENV_VAR):
        source, candidate = ENV_VAR, environ[ENV_VAR]
        executable = _find_executable(candidate)
        if executable is None:
            raise CodexNotFoundError(
                f"{ENV_VAR}={candidate}: no executable Codex there. Fix or unset {ENV_VAR} "
                f"to use the pinned install."
            )
    else:
        source, candidate = "pinned install", str(pinned_executable(root, environ))
        executable = _find_executable(candidate)
        if executable is None:
            if root is not None:
                looked, install = f"no {candidate}", f"`npm ci` (or `make setup`) in {Path(root).absolute()}"
            else:
                looked = f"no {candidate}; looked in {npm.where_looked(environ)}"
                install = (f"`{npm.install_hint([PACKAGE])}` in your project (in a peerwire checkout: `npm ci`, "
                           f"which `make setup` runs)")
            raise CodexNotFoundError(
                f"the pinned Codex CLI is not installed ({looked}). Run {install} to install the version "
                f"peerwire pins, or select another Codex with --codex PATH or {ENV_VAR}."
            )

    version = read_codex_version(executable)
    expected = pinned_version(root) if expected_version is PINNED else expected_version
    if expected is not None and version != expected:
        raise CodexVersionMismatchError(executable, found=version, expected=str(expected))
    return CodexInstallation(executable=executable, version=version, source=source)


def _find_executable(candidate: str) -> Path | None:
    path = Path(candidate)
    if path.is_file() and os.access(path, os.X_OK):
        return Path(os.path.abspath(path))
    if not any(separator and separator in candidate for separator in (os.sep, os.altsep)):
        # A bare name ("codex"): whatever PATH offers.
        found = shutil.which(candidate)
        if found is not None:
            return Path(os.path.abspath(found))
    return None


def _with_path_first(base: Mapping[str, str], directory: Path) -> dict[str, str]:
    env = dict(base)
    key = _path_key(env)
    first = str(directory)
    # Empty entries are dropped too: POSIX reads one as the current directory.
    rest = [entry for entry in env.get(key, "").split(os.pathsep) if entry and entry != first]
    env[key] = os.pathsep.join([first, *rest])
    return env


def _path_key(env: Mapping[str, str]) -> str:
    if sys.platform == "win32":
        # Environment names are case-insensitive there; keep the spelling in use.
        for key in env:
            if key.upper() == "PATH":
                return key
    return "PATH"


# -- other releases, in a cache outside the checkout ------------------------------------

# npm's error codes, read from its output: what the user has to fix.
_NO_SUCH_RELEASE = re.compile(r"\b(E404|ETARGET|No matching version found)\b")
_UNREACHABLE = re.compile(r"\b(ENOTFOUND|ECONNREFUSED|ECONNRESET|ETIMEDOUT|EAI_AGAIN|ENETUNREACH|EHOSTUNREACH"
                          r"|ERR_SOCKET_TIMEOUT|network)\b")
_NPM_NOISE = re.compile(r"^(code|syscall|errno|at|type|address|port|requiredBy)\b|^[{}]|^A complete log|^\w+: ")


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    """Where releases other than the pinned one are installed, one folder per version.

    ``PEERWIRE_CODEX_CACHE`` when set, else ``$XDG_CACHE_HOME/peerwire/codex``,
    else ``~/.cache/peerwire/codex``. The folder need not exist yet.
    """
    environ = os.environ if environ is None else environ
    if environ.get(CACHE_ENV):
        return Path(environ[CACHE_ENV]).expanduser().absolute()
    base = Path(environ["XDG_CACHE_HOME"]) if environ.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base.expanduser().absolute() / "peerwire" / "codex"


def install_release(
    version: str,
    *,
    cache: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    timeout: float = INSTALL_TIMEOUT,
    progress: Callable[[str], None] | None = None,
) -> CodexInstallation:
    """The Codex CLI of release ``version``, installed from the npm registry on first use.

    The release lives in ``<cache>/<version>/`` (``cache`` defaults to
    :func:`cache_root`), laid out like the project's own install
    (``node_modules/.bin/codex``), and is reused while it reports ``version``.
    A new install is made in a staging folder and renamed into place, under a
    per-version lock, so concurrent callers install once and nobody sees half
    an install. ``environ`` (default: ours) is npm's environment, e.g. to
    select another registry. ``progress`` receives one line per step.

    Raises :class:`CodexInstallError` when ``version`` is not one exact
    version, and :class:`CodexReleaseError`, with a one-line message, when npm
    is missing, the registry is unreachable, the release does not exist, or
    npm fails otherwise.
    """
    if not _EXACT_VERSION.fullmatch(version):
        raise CodexInstallError(f"{version!r} is not one exact Codex version (e.g. 0.160.1)")
    environ = dict(os.environ if environ is None else environ)
    root = Path(cache).absolute() if cache is not None else cache_root(environ)
    say = progress or (lambda _line: None)
    target = root / version
    root.mkdir(parents=True, exist_ok=True)
    with _exclusive(root / f".{version}.lock"):
        cached = _cached(target, version)
        if cached is not None:
            say(f"Codex {version}: cached in {target}")
            return cached
        if target.exists():
            say(f"Codex {version}: the cached install in {target} is broken; reinstalling")
            shutil.rmtree(target)
        npm = shutil.which("npm", path=environ.get(_path_key(environ)))
        if npm is None:
            raise CodexReleaseError(f"cannot install Codex {version}: npm is not on PATH "
                                    f"(install Node.js and npm, as for the pinned Codex)")
        say(f"Codex {version}: installing {PACKAGE}@{version} from the npm registry into {target}")
        staging = Path(tempfile.mkdtemp(prefix=f".{version}.", dir=root))
        try:
            _npm_install(npm, staging, version, environ, timeout)
            staging.rename(target)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
        installed = _cached(target, version)
        if installed is None:
            raise CodexReleaseError(f"npm installed {PACKAGE}@{version} into {target}, but its codex does not "
                                    f"report version {version}")
        return installed


def _cached(target: Path, version: str) -> CodexInstallation | None:
    try:
        found = locate_codex(pinned_executable(target), expected_version=version, environ={})
    except CodexInstallError:
        return None
    return replace(found, source=f"release cache ({target})")


def _npm_install(npm: str, prefix: Path, version: str, environ: dict[str, str], timeout: float) -> None:
    argv = [npm, "install", "--prefix", str(prefix), f"{PACKAGE}@{version}",
            "--no-audit", "--no-fund", "--loglevel=error"]
    try:
        result = run_bounded(argv, env=environ, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise CodexReleaseError(f"npm install {PACKAGE}@{version} did not finish within {timeout:.0f} s") from exc
    except OSError as exc:
        raise CodexReleaseError(f"cannot run npm ({npm}): {exc.strerror or exc}") from exc
    if result.returncode == 0:
        return
    output = f"{result.stderr}\n{result.stdout}"
    detail = _npm_error_line(output)
    if _NO_SUCH_RELEASE.search(output):
        raise CodexReleaseError(f"Codex {version} is not a published release of {PACKAGE} (npm: {detail})")
    if _UNREACHABLE.search(output):
        registry = environ.get("npm_config_registry") or environ.get("NPM_CONFIG_REGISTRY") or "the npm registry"
        raise CodexReleaseError(f"cannot install Codex {version}: {registry} is unreachable (npm: {detail})")
    raise CodexReleaseError(f"npm install {PACKAGE}@{version} failed with status {result.returncode}: {detail}")


def _npm_error_line(output: str) -> str:
    # npm prints "npm error code X", "syscall"/"errno" lines, the message (a FetchError, or
    # "notarget No matching version ..."), a stack, then log-file hints: the message is what helps.
    for line in output.splitlines():
        line = line.removeprefix("npm error").removeprefix("npm ERR!").strip()
        line = re.sub(r"^(notarget|404|FetchError:)\s+", "", line)
        if not line or _NPM_NOISE.match(line):
            continue
        return line
    return "no error message"


@contextlib.contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if missing), waiting for another holder."""
    with path.open("a+b") as lock_file:
        if sys.platform == "win32":
            import msvcrt

            lock_file.seek(0)
            msvcrt.locking(lock_file.fileno(), msvcrt.LK_LOCK, 1)
        else:
            import fcntl

            fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX)
        yield  # closing the file releases the lock
