"""The contract runner's pre-flight: can this run be made at all, and if not, why, in one line.

Before any test runs, :func:`check` asks what the suite itself needs and what the
target must do before any requirement means anything: the options select
something, the suite's Python packages and the official npm clients the selection
runs are installed, every server program exists, the provisioner imports, starts
and stops, and the server answers ``initialize`` within ``--startup-timeout``.
Each failure is a :class:`PreflightError`: one line naming the cause and the fix,
and an exit status of its own (:data:`EXIT_TARGET`, :data:`EXIT_SUITE`,
:data:`EXIT_USAGE`), never the verdict's 1: a run that could not be made says
nothing about compliance. What a check starts it stops, and its temporary home
goes with it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from harness import npm

from .limits import DEFAULT_STARTUP_S
from .stdio import NoResponse, ServerExited, StdioServer

EXIT_TARGET = 2
"""The implementation under test could not be started: a missing program, a server that exits or never answers
``initialize``, a provisioner that does not import or start."""
EXIT_SUITE = 3
"""What the suite itself runs on is missing: a Python package of the ``suite`` extra, Node, an npm client."""
EXIT_USAGE = 4
"""The options are unusable: a bad value, or a selection with no requirement in it (pytest's usage status)."""

SUITE_MODULES = {"pytest": "pytest", "xdist": "pytest-xdist", "pytest_timeout": "pytest-timeout", "anyio": "anyio",
                 "hypothesis": "hypothesis", "hypothesis_jsonschema": "hypothesis-jsonschema", "mcp": "mcp",
                 "psutil": "psutil"}
"""Module -> the distribution of the ``suite`` extra that provides it."""

NPM_CLIENTS = {
    "interop:typescript-sdk:every-tool": npm.TS_SDK,
    "collab:interop:typescript-sdk": npm.TS_SDK,
    "interop:inspector-cli:every-tool": npm.INSPECTOR,
    "collab:interop:inspector-cli": npm.INSPECTOR,
}
"""Requirement -> the pinned npm client its test runs (on Node)."""

PROBE_CALLER = "preflight"
STDERR_LINES = 5
"""How many of a failed server's last stderr lines the pre-flight line quotes."""


class PreflightError(RuntimeError):
    """The run cannot be made: ``str()`` is the one line to print, ``status`` the exit status."""

    def __init__(self, line: str, status: int):
        super().__init__(line)
        self.status = status


@dataclass(frozen=True)
class Plan:
    """What a run is to do, as the pre-flight needs it."""

    server_cmd: tuple[str, ...]
    collab_server_cmd: tuple[str, ...] | None
    provisioner: str | None
    profiles: tuple[str, ...]
    selected: tuple[str, ...]
    """The ids of the requirements the selection holds."""
    startup_s: float = DEFAULT_STARTUP_S
    tool_names: tuple[str, ...] = ()
    """The tools --tool-call names: the server must list each."""


def plan(server_cmd: str | None, provisioner: str | None, collab_server_cmd: str | None, *,
         profiles: str | None, level: str, patterns: Sequence[str], call_tools: str | None = None,
         tool_calls: Sequence[str] = (), startup_s: float | None = None, baseline: str | None = None) -> Plan:
    """The run the options describe, checked as the plugin will check them; :class:`PreflightError` (usage)
    when they describe none."""
    from .baseline import BaselineError, load_baseline
    from .manifest import Level, ManifestError, Selection, manifest, parse_profiles
    from .target import Target, TargetError

    try:
        target = Target.from_options(server_cmd, provisioner, collab_server_cmd, call_tools=call_tools,
                                     tool_calls=tool_calls)
        chosen = target.select_profiles(parse_profiles(profiles))
        selection = Selection(level=Level.parse(level), patterns=tuple(patterns), profiles=chosen,
                              offers=target.offers())
        requirements = manifest()
        load_baseline(Path(baseline) if baseline else None)
    except TargetError as exc:
        if "cannot import" in str(exc):
            raise PreflightError(f"{exc}; is the module installed in this Python environment?", EXIT_TARGET) from None
        raise PreflightError(str(exc), EXIT_USAGE) from None
    except (ManifestError, BaselineError, ValueError) as exc:
        raise PreflightError(str(exc), EXIT_USAGE) from None
    except Exception as exc:  # the provisioner's module raised while it was imported: its failure, not ours
        raise PreflightError(f"--provisioner {provisioner}: importing it raised {type(exc).__name__}: "
                             f"{_one_line(str(exc))}", EXIT_TARGET) from None
    if startup_s is not None and startup_s <= 0:
        raise PreflightError(f"--startup-timeout {startup_s:g}: give a number of seconds above 0", EXIT_USAGE)
    selected = tuple(r.id for r in requirements if selection.includes(r) and not r.outside_suite)
    if not selected:
        asked = " ".join(f"--requirement {p}" for p in patterns)
        raise PreflightError(
            f"nothing to run: {asked + ' with ' if asked else ''}profiles {', '.join(chosen)} and level up to "
            f"{selection.level.name} select no requirement the suite runs; --requirement takes an id, a glob "
            "(wire:*) or a prefix (send), as contracts/requirements.toml names them", EXIT_USAGE)
    return Plan(server_cmd=target.server_cmd, provisioner=target.provisioner, profiles=chosen, selected=selected,
                collab_server_cmd=target.collab_server_cmd if "collab" in chosen else None,
                startup_s=startup_s if startup_s is not None else DEFAULT_STARTUP_S,
                tool_names=tuple(dict.fromkeys(c.name for c in target.consent.calls)))


def check(run: Plan, *, environ: dict[str, str] | None = None) -> None:
    """Every pre-flight check of ``run``, cheapest first; :class:`PreflightError` at the first that fails."""
    check_suite_packages()
    check_npm_clients(run.selected, environ)
    for option, argv in (("--server-cmd", run.server_cmd), ("--collab-server-cmd", run.collab_server_cmd)):
        if argv:
            check_program(option, argv, environ)
    check_startup(run)


def check_suite_packages() -> None:
    missing = [dist for module, dist in SUITE_MODULES.items() if importlib.util.find_spec(module) is None]
    if missing:
        raise PreflightError(f"the contract suite needs the Python package(s) {', '.join(missing)}, which the extra "
                             "'suite' installs: pip install 'peerwire[suite]'", EXIT_SUITE)


def check_npm_clients(selected: Sequence[str], environ: dict[str, str] | None = None) -> None:
    """The pinned npm clients the selected requirements run, and Node, are installed."""
    needed = sorted({NPM_CLIENTS[r] for r in selected if r in NPM_CLIENTS})
    if not needed:
        return
    path = (environ if environ is not None else os.environ).get("PATH")
    if shutil.which("node", path=path) is None:
        raise PreflightError("the official TypeScript clients need Node.js, and there is no `node` on PATH: install "
                             f"Node.js 20 or later, then `{npm.install_hint(needed)}`; or leave "
                             f"{', '.join(r for r in selected if r in NPM_CLIENTS)} out (--requirement)", EXIT_SUITE)
    problems = []
    for package in needed:
        folder = npm.find(package, environ)
        if folder is None:
            problems.append(f"{package} is not installed")
            continue
        version = _installed_version(folder / package / "package.json")
        if version != npm.pin(package):
            problems.append(f"{package} {version} is installed in {folder}, not the pinned {npm.pin(package)}")
    if problems:
        raise PreflightError(f"{'; '.join(problems)} (looked in {npm.where_looked(environ)}): run "
                             f"`{npm.install_hint(needed)}`", EXIT_SUITE)


def _installed_version(manifest: Path) -> str | None:
    try:
        return str(json.loads(manifest.read_text("utf-8"))["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def check_program(option: str, argv: Sequence[str], environ: dict[str, str] | None = None) -> None:
    """``argv[0]`` names a program that can be run: on PATH, or a file that is executable."""
    program = argv[0]
    path = (environ if environ is not None else os.environ).get("PATH")
    if os.sep in program or (os.altsep and os.altsep in program):
        if not Path(program).is_file():
            raise PreflightError(f"{option}: {program} does not exist; give the server's path or a program on "
                                 "PATH", EXIT_TARGET)
        if not os.access(program, os.X_OK):
            raise PreflightError(f"{option}: {program} is not executable: chmod +x it, or run it through its "
                                 "interpreter (e.g. python3 server.py)", EXIT_TARGET)
    elif shutil.which(program, path=path) is None:
        raise PreflightError(f"{option}: no program {program!r} on PATH: install it, activate the environment that "
                             "has it, or give its full path", EXIT_TARGET)


def check_startup(run: Plan) -> None:
    """The provisioner (if any) starts, the server started as one of its callers answers ``initialize`` within
    the start-up bound, and the provisioner stops; nothing is left running or on disk."""
    from .endpoints import CLIENT_INFO, PROTOCOL_VERSION
    from .interface import adapt, load_class

    with tempfile.TemporaryDirectory(prefix="peerwire-preflight-") as scratch:
        root = Path(scratch)
        env = dict(os.environ)
        provisioner = None
        try:
            if run.provisioner is not None:
                step = "its constructor"
                try:
                    made = load_class(run.provisioner)(root / "home")
                    step = "the interface check"
                    provisioner = adapt(made)
                    step = "start()"
                    provisioner.start()
                    step = f"register({PROBE_CALLER!r})"
                    caller = provisioner.register(PROBE_CALLER)
                    step = "caller_env()"
                    env.update(provisioner.caller_env(caller))
                except Exception as exc:  # whatever the implementation's code raises is its failure to start
                    raise PreflightError(f"--provisioner {run.provisioner}: {step} raised "
                                         f"{type(exc).__name__}: {_one_line(str(exc))}; fix the provisioner, or "
                                         "run it alone to see the full error", EXIT_TARGET) from None
            _initialize(run, env, root / "server.stderr", CLIENT_INFO, PROTOCOL_VERSION)
        finally:
            if provisioner is not None:
                try:
                    provisioner.stop()
                except Exception:
                    pass  # a stop that fails after a failed start would hide the first cause


def _initialize(run: Plan, env: dict[str, str], stderr: Path, client_info: dict, version: str) -> None:
    command = " ".join(run.server_cmd)
    try:
        server = StdioServer(run.server_cmd, env, stderr=stderr)
    except OSError as exc:
        raise PreflightError(f"--server-cmd {command!r} cannot be started: {exc.strerror or exc}", EXIT_TARGET) \
            from None
    try:
        server.call("initialize", {"protocolVersion": version, "capabilities": {}, "clientInfo": client_info},
                    timeout=run.startup_s)
        if run.tool_names:
            server.notify("notifications/initialized")
            _check_tool_names(run, server.call("tools/list", {}, timeout=run.startup_s))
    except ServerExited:
        if server.fault is not None:  # it flooded stdout with what is not JSON-RPC, and was stopped for it
            raise PreflightError(f"--server-cmd {command!r}: {server.fault}; no test was run", EXIT_TARGET) from None
        raise PreflightError(f"--server-cmd {command!r} {_exit_text(server)} before answering initialize"
                             f"{_stderr_text(stderr)}", EXIT_TARGET) from None
    except NoResponse:
        if server.exited_within(0.2):
            raise PreflightError(f"--server-cmd {command!r} {_exit_text(server)} before answering initialize"
                                 f"{_stderr_text(stderr)}", EXIT_TARGET) from None
        raise PreflightError(f"--server-cmd {command!r} did not answer initialize within {run.startup_s:g}s "
                             "(--startup-timeout): is it an MCP server speaking over stdio, one JSON-RPC message "
                             f"a line? A slow start needs a larger --startup-timeout{_stderr_text(stderr)}",
                             EXIT_TARGET) from None
    finally:
        server.close(grace=1.0)


def _check_tool_names(run: Plan, answer: dict) -> None:
    """Every tool --tool-call names is one the server lists (a misspelt name would only skip a requirement)."""
    result = answer.get("result")
    tools = result.get("tools") if isinstance(result, dict) else None
    if not isinstance(tools, list):
        return  # a server that cannot list its tools fails the requirements about it, not the pre-flight
    offered = [t.get("name") for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str)]
    missing = [name for name in run.tool_names if name not in offered]
    if missing:
        paged = " (first page of tools/list)" if result.get("nextCursor") else ""
        raise PreflightError(f"--tool-call {', '.join(missing)}: the server offers no such tool; its tools{paged}: "
                             f"{', '.join(offered) or 'none'}", EXIT_USAGE)


def _exit_text(server: StdioServer) -> str:
    ended = server.exit_description(2.0)
    return "closed its stdout" if ended == "it is still running" else ended.removeprefix("it ")


def _stderr_text(stderr: Path) -> str:
    try:
        lines = [ln.strip() for ln in stderr.read_text("utf-8", errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    if not lines:
        return "; its stderr was empty"
    return "; its last stderr lines: " + _one_line(" | ".join(lines[-STDERR_LINES:]), 600)


def _one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"
