"""peerwire as another project gets it: the built wheel in a fresh virtualenv, used from an empty folder.

One test, in steps, because each step needs the one before (a wheel, a virtualenv with it and
the ``suite`` and ``accept`` extras): ``peerwire mcp serve`` lists the seven tools, the contract
suite runs a short selection against the installed reference (the TypeScript SDK's client
among it), and the smoke scenario runs with the checkout's pinned Codex given by ``--codex``.

It fails if any Python process of that virtualenv opens, lists, enters or runs anything in
this checkout, or has it on ``sys.path``: an audit hook (:func:`sys.addaudithook`), installed
into the virtualenv by a ``.pth`` file, writes every such access to a log that must stay empty.
The checkout's ``node_modules`` is the one exception: it stands for the npm install an adopter
makes (``PEERWIRE_NODE_MODULES``, ``--codex``), and holds no source of this project.

The dependencies come from a wheelhouse kept in the user's cache and keyed by the declared
requirements: the first run downloads it from the registry, later runs install offline.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from pathlib import Path

import pytest

from harness.npm import NODE_MODULES_ENV
from peerwire.contract import TOOL_ORDER
from tests.patience import RUN_S, TEST_S, WAIT_S

ROOT = Path(__file__).resolve().parents[1]
NODE_MODULES = ROOT / "node_modules"
CODEX = NODE_MODULES / ".bin" / "codex"
EXTRAS = ("suite", "accept")
DATA_FOLDERS = {"contracts": "contracts", "scenarios": "scenarios", "fixtures": "fixtures", "docs": "docs"}
"""``peerwire_data.<name>`` -> the checkout folder it ships, whole."""
NOT_SHIPPED = {".venv", "node_modules", "reports", "build", "dist", ".git", "__pycache__", ".pytest_cache",
               ".hypothesis"}

pytestmark = [pytest.mark.slow, pytest.mark.codex]

GUARD = '''\
"""Records every access of this process to a guarded folder: installed by the installed-form test."""
import os
import sys
import tempfile

_TREE = os.environ.get("PEERWIRE_TEST_GUARDED_TREE")
_LOG = os.environ.get("PEERWIRE_TEST_GUARD_LOG")
_ALLOWED = [p for p in os.environ.get("PEERWIRE_TEST_GUARD_ALLOWED", "").split(os.pathsep) if p]
_EVENTS = {"open": 0, "os.listdir": 0, "os.scandir": 0, "os.chdir": 0, "subprocess.Popen": 0, "os.exec": 0,
           "os.posix_spawn": 0}


def _within(path, folder):
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _guarded(path):
    if path is None or isinstance(path, int):
        return None
    try:
        path = os.fsdecode(path)
    except TypeError:
        return None
    for candidate in {os.path.abspath(path), os.path.realpath(path)}:
        if _within(candidate, _TREE) and not any(_within(candidate, allowed) for allowed in _ALLOWED):
            return candidate
    return None


if _TREE and _LOG:
    _out = open(_LOG, "a", buffering=1, encoding="utf-8")
    _busy = []

    def _record(what, path):
        _out.write(f"{os.getpid()} {what} {path} in {' '.join(map(str, sys.argv[:3]))}\\n")

    for _entry in sys.path:
        if _guarded(_entry or os.getcwd()):
            _record("sys.path", _entry)

    def _hook(event, args):
        if event not in _EVENTS or _busy:
            return
        _busy.append(1)
        try:
            paths = [args[0]]
            if event == "subprocess.Popen" and isinstance(args[1], (list, tuple)) and args[1]:
                paths.append(args[1][0])
            for path in paths:
                found = _guarded(path)
                if found:
                    _record(event, found)
        except Exception as exc:  # the hook must never break the process it watches
            _record("hook-error", repr(exc))
        finally:
            _busy.pop()

    sys.addaudithook(_hook)
'''


def run(argv: list[str], *, what: str, timeout: float, **kwargs) -> subprocess.CompletedProcess[str]:
    """Run a step to completion; a failure or an overrun fails the test with the step's output."""
    started = time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                              **kwargs)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{what}: still running after {timeout:.0f} s\n{exc.stdout or ''}\n{exc.stderr or ''}"[-4000:])
    print(f"{what}: {time.monotonic() - started:.1f} s")
    assert done.returncode == 0, f"{what} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def declared_requirements() -> list[str]:
    """What the wheel and its extras need, and what building it needs, as pyproject.toml declares them."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extras = project["project"]["optional-dependencies"]
    return sorted({*project["build-system"]["requires"], *project["project"]["dependencies"],
                   *(r for extra in EXTRAS for r in extras[extra])})


def wheelhouse() -> Path:
    """Wheels of every declared requirement, downloaded once per set of requirements and kept in the cache."""
    requirements = declared_requirements()
    key = hashlib.sha256(json.dumps([requirements, sys.implementation.cache_tag, platform.machine()])
                         .encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "peerwire" / "installed-test"
    return cached(cache / key, lambda staging: run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(staging), *requirements],
        what="download the wheelhouse", timeout=RUN_S))


def build_python(house: Path) -> Path:
    """A Python with the build requirements (setuptools, wheel) from the wheelhouse, kept beside it."""
    build_requires = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["build-system"]["requires"]

    def make(staging: Path) -> None:
        run([sys.executable, "-m", "venv", "--without-pip", str(staging)], what="create the build env", timeout=WAIT_S)
        run([sys.executable, "-m", "pip", "--python", str(staging / "bin" / "python"), "install", "--quiet",
             "--no-index", "--find-links", str(house), *build_requires], what="install the build env", timeout=RUN_S)

    return cached(house.with_name(f"{house.name}.build"), make) / "bin" / "python"


def cached(folder: Path, make) -> Path:
    """``folder``, made by ``make(staging)`` in a staging folder and renamed into place unless it exists."""
    if not folder.is_dir():
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
        try:
            make(staging)
            try:
                staging.rename(folder)
            except OSError:
                pass  # another run made it first: theirs serves as well
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return folder


def build_wheel(tmp_path: Path, house: Path) -> Path:
    """The wheel, built offline from a copy of the checkout (a build writes build/ and *.egg-info where it runs).

    The build backend is called in one process, as a build frontend calls it, with the build requirements
    pyproject.toml declares (:func:`build_python`).
    """
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_SHIPPED, "*.egg-info"))
    dist = tmp_path / "dist"
    run([str(build_python(house)), "-c", "import sys; from setuptools import build_meta; build_meta.build_wheel(sys.argv[1])",
         str(dist)], what="build the wheel", timeout=RUN_S, cwd=source)
    (wheel,) = dist.glob("peerwire-*.whl")
    return wheel


def shipped_data(wheel: Path) -> dict[str, set[str]]:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    return {package: {n.removeprefix(f"peerwire_data/{package}/") for n in names
                      if n.startswith(f"peerwire_data/{package}/")} for package in (*DATA_FOLDERS, "ci")}


def checkout_files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def install(tmp_path: Path, wheel: Path, house: Path) -> Path:
    """A fresh virtualenv outside the checkout with the wheel and its extras, offline; its bin folder."""
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], what="create the virtualenv", timeout=WAIT_S)
    python = venv / "bin" / "python"
    # Not compiled ahead: each process compiles what it imports, a fraction of the dependencies.
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-compile", "--no-index",
         "--find-links", str(house), f"{wheel}[{','.join(EXTRAS)}]"], what="install the wheel", timeout=RUN_S)
    site = Path(run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                    what="find site-packages", timeout=WAIT_S).stdout.strip())
    (site / "peerwire_source_guard.py").write_text(GUARD, encoding="utf-8")
    (site / "peerwire_source_guard.pth").write_text("import peerwire_source_guard\n", encoding="utf-8")
    return venv / "bin"


def guarded_env(tmp_path: Path, log: Path) -> dict[str, str]:
    """What an adopter's CI has: a PATH without this checkout, its own HOME and temp, the npm install named."""
    home, temp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    temp.mkdir()
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep)
            if p and not Path(p).resolve().is_relative_to(ROOT.resolve())]
    return {"PATH": os.pathsep.join(path), "HOME": str(home), "TMPDIR": str(temp), "LANG": "C.UTF-8",
            NODE_MODULES_ENV: str(NODE_MODULES),
            "PEERWIRE_TEST_GUARDED_TREE": str(ROOT.resolve()), "PEERWIRE_TEST_GUARD_LOG": str(log),
            "PEERWIRE_TEST_GUARD_ALLOWED": str(NODE_MODULES.resolve())}


def list_tools(peerwire: Path, cwd: Path, env: dict[str, str]) -> list[str]:
    """``peerwire mcp serve``: initialize, then tools/list, with no home and no app."""
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    done = subprocess.run([str(peerwire), "mcp", "serve"], input="".join(json.dumps(r) + "\n" for r in requests),
                          capture_output=True, text=True, timeout=WAIT_S, cwd=cwd, env=env)
    answers = {a.get("id"): a for a in map(json.loads, done.stdout.splitlines())}
    assert 2 in answers and "result" in answers[2], f"no tools/list result: {done.stdout}\n{done.stderr}"
    return [tool["name"] for tool in answers[2]["result"]["tools"]]


@pytest.mark.timeout(TEST_S)  # the first run downloads the wheelhouse; later runs take a minute or two
def test_the_wheel_alone_serves_runs_the_suite_and_a_scenario_from_an_empty_folder(tmp_path: Path) -> None:
    house = wheelhouse()
    wheel = build_wheel(tmp_path, house)
    shipped = shipped_data(wheel)
    for package, folder in DATA_FOLDERS.items():
        assert shipped[package] == checkout_files(ROOT / folder), f"the wheel lacks part of {folder}/"
    assert shipped["ci"] == {"__init__.py", "durations.json"}

    bin_dir = install(tmp_path, wheel, house)
    log = tmp_path / "source-reads.log"
    env = guarded_env(tmp_path, log)
    work = tmp_path / "empty"
    work.mkdir()
    # The guard sees a read of the checkout (else an empty log would prove nothing); then it starts afresh.
    run([str(bin_dir / "python"), "-c", f"open({str(ROOT / 'pyproject.toml')!r}).close()"],
        what="the guard's own check", timeout=WAIT_S, cwd=work, env=env)
    assert f"open {ROOT.resolve() / 'pyproject.toml'}" in log.read_text(encoding="utf-8")
    log.write_text("", encoding="utf-8")

    paths = json.loads(run([str(bin_dir / "python"), "-c", "import sys, json, harness, peerwire, peerwire_data.contracts;"
                            "print(json.dumps([*sys.path, harness.__file__, peerwire.__file__]))"],
                           what="import the packages", timeout=WAIT_S, cwd=work, env=env).stdout)
    assert all(bin_dir.parent in Path(p).parents for p in paths[-2:]), paths

    assert list_tools(bin_dir / "peerwire", work, env) == list(TOOL_ORDER)

    run([str(bin_dir / "peerwire-harness"), "contract", "-n", "0", "--report-dir", "out/contract",
         "--requirement", "wire:ping", "--requirement", "send:receipt:admitted",
         "--requirement", "interop:typescript-sdk:every-tool"],
        what="the contract suite against the installed reference", timeout=RUN_S, cwd=work, env=env)
    compliance = json.loads((work / "out" / "contract" / "compliance.json").read_text("utf-8"))
    results = {r["id"]: r["result"] for r in compliance["requirements"]}
    assert [results[r] for r in ("wire:ping", "send:receipt:admitted", "interop:typescript-sdk:every-tool")] == [
        "pass"] * 3
    assert (work / "out" / "contract" / "junit.xml").is_file()

    run([str(bin_dir / "peerwire-harness"), "accept", "--scenario", "smoke", "--codex", str(CODEX),
         "--workers", "1", "--report-dir", "out/accept", "--runs-root", str(tmp_path / "runs")],
        what="the smoke scenario", timeout=RUN_S, cwd=work, env=env)
    (report,) = (work / "out" / "accept").glob("*/report.json")
    assert all(s["passed"] for s in json.loads(report.read_text("utf-8"))["scenarios"])

    reads = log.read_text(encoding="utf-8").splitlines()
    assert reads == [], "the installed package touched the checkout:\n" + "\n".join(reads[:40])
