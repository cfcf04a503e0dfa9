"""The official MCP clients, each running a :class:`~.plan.Plan`, and what they saw.

Every client turns each planned call into an :class:`Answer`: whether the
client accepted the server's answer (returned it to its caller rather than
raising) and, if so, the ``CallToolResult`` as the client's user gets it.
:func:`judge` compares the answers with the plan.

* :func:`run_python_sdk`: the MCP Python SDK's stdio client (``mcp``), in process.
* :func:`run_typescript_sdk`: ``ts_sdk_client.mjs`` on Node with the pinned
  ``@modelcontextprotocol/sdk``, one process for the whole plan.
* :func:`run_inspector_cli`: the pinned ``@modelcontextprotocol/inspector-cli``
  (what ``npx @modelcontextprotocol/inspector --cli`` runs), one process per
  call, as a person at a terminal uses it.

A client that is not installed raises :class:`ClientMissing` (the suite then
reports the requirement not tested, which fails a MUST).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from harness import npm
from harness.resources import typescript_client

from ..census import record_launch
from ..endpoints import SdkEndpoint, ToolOutcome
from ..fixtures import Servers
from .plan import CALL_TIMEOUT_S, Plan, PlannedCall

TS_SDK_PACKAGE = npm.TS_SDK
INSPECTOR_PACKAGE = npm.INSPECTOR
TS_CLIENT_SCRIPT = typescript_client()
INSPECTOR_WORKERS = 4
"""Inspector processes at once: each is a Node process plus a server process, mostly waiting on start-up."""


class ClientMissing(RuntimeError):
    """The client is not installed here (no Node, or ``npm ci`` has not run)."""


@dataclass(frozen=True)
class Answer:
    """What a client made of one planned call."""

    call: PlannedCall
    accepted: bool
    result: dict[str, Any] | None = None
    refusal: str | None = None
    """Why the client did not return a result: the error it raised, or that it never answered."""


def pinned_version(package: str) -> str:
    """The version peerwire pins for an npm package (:func:`harness.npm.pin`)."""
    return npm.pin(package)


def node_modules(package: str) -> Path:
    """The ``node_modules`` folder holding the pinned ``package``; :class:`ClientMissing` if absent or not the pin."""
    folder = npm.find(package)
    if folder is None:
        raise ClientMissing(f"{package} is not installed (looked in {npm.where_looked()}): run "
                            f"`{npm.install_hint(npm.GROUPS['suite'])}` (in a peerwire checkout: `npm ci`, make setup)")
    version = json.loads((folder / package / "package.json").read_text("utf-8"))["version"]
    if version != pinned_version(package):
        raise ClientMissing(f"{package} {version} is installed in {folder}, but peerwire pins "
                            f"{pinned_version(package)}: run `{npm.install_hint([package])}` (or `npm ci`)")
    return folder


def node() -> str:
    path = shutil.which("node")
    if path is None:
        raise ClientMissing("node is not on PATH; the official TypeScript clients need Node.js")
    return path


def shell() -> str:
    path = shutil.which("sh")
    if path is None:
        raise ClientMissing("no sh on PATH to start the server from the suite's working directory")
    return path


def judge(plan: Plan, answers: Sequence[Answer]) -> list[str]:
    """Every way the answers differ from the plan, one line each (empty when the client saw it all)."""
    problems = []
    seen = {a.call.id for a in answers}
    problems += [f"{c.id}: the client gave no answer at all" for c in plan.calls if c.id not in seen]
    for answer in answers:
        call = answer.call
        where = f"{call.id} ({call.tool} {_short(call.arguments)}, expected: {call.expectation})"
        if not answer.accepted:
            problems.append(f"{where}: the client refused the answer: {answer.refusal}")
            continue
        result = answer.result or {}
        structured = result.get("structuredContent")
        if call.error is None:
            if result.get("isError"):
                problems.append(f"{where}: the client saw a tool error: {_short(structured)}")
            elif not isinstance(structured, dict):
                problems.append(f"{where}: the client saw no structuredContent: {_short(result)}")
            continue
        code = structured.get("error", {}).get("code") if isinstance(structured, dict) else None
        if not isinstance(structured, dict) or not isinstance(structured.get("error"), dict):
            code = None
        if result.get("isError") is not True:
            problems.append(f"{where}: the client saw isError {result.get('isError')!r}, not true")
        elif code != call.error:
            problems.append(f"{where}: the client saw the code {code!r} in structuredContent: {_short(structured)}")
    return problems


def _short(value: Any, limit: int = 240) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"…({len(text)} chars)"


# -- the suite's raw client --------------------------------------------------------------------

def run_raw(plan: Plan, servers: Servers) -> tuple[list[Answer], dict[str, Any]]:
    """The plan through the suite's own raw client, and the output schemas the server advertised.

    The raw client validates nothing, so it shows what a strict client is
    given: each answer and the ``outputSchema`` it is judged against.
    """
    answers: list[Answer] = []
    advertised: dict[str, Any] = {}
    for session, env in plan.sessions.items():
        endpoint = servers.start(env=dict(env), profile=plan.profile)
        listed = endpoint.server.call("tools/list", {}, timeout=CALL_TIMEOUT_S).get("result") or {}
        for tool in listed.get("tools") or []:
            if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                advertised[tool["name"]] = tool.get("outputSchema")
        for call in plan.calls_of(session):
            outcome = endpoint.call_tool(call.tool, dict(call.arguments), timeout=CALL_TIMEOUT_S) \
                .outcome(CALL_TIMEOUT_S)
            answers.append(_answer(call, outcome))
    return answers, advertised


def _answer(call: PlannedCall, outcome: ToolOutcome) -> Answer:
    """What a client made of one call: the result it accepted, or why it refused the answer."""
    if outcome.result is not None:
        return Answer(call, True, outcome.result)
    error = outcome.protocol_error
    why = f"JSON-RPC error {error.get('code')}: {error.get('message')}" if error else outcome.failure
    return Answer(call, False, refusal=why)


# -- the Python SDK ---------------------------------------------------------------------------

def run_python_sdk(plan: Plan, workdir: Path) -> list[Answer]:
    """The plan through the MCP Python SDK's stdio client, one session (server process) at a time."""
    from anyio.from_thread import start_blocking_portal

    answers = []
    with start_blocking_portal() as portal:
        for session, env in plan.sessions.items():
            stderr = workdir / f"python-sdk.{session}.stderr.log"
            endpoint = SdkEndpoint.open(portal, plan.server_cmd, dict(env), stderr=stderr)
            try:
                for call in plan.calls_of(session):
                    outcome = endpoint.call_tool(call.tool, dict(call.arguments), timeout=CALL_TIMEOUT_S) \
                        .outcome(CALL_TIMEOUT_S + 5)
                    answers.append(_answer(call, outcome))
            finally:
                endpoint.close()
    return answers


# -- the TypeScript SDK -----------------------------------------------------------------------

def run_typescript_sdk(plan: Plan, workdir: Path) -> list[Answer]:
    """The plan through ``ts_sdk_client.mjs`` (the pinned TypeScript SDK's ``Client``) in one Node process."""
    modules = node_modules(TS_SDK_PACKAGE)
    document = {"sessions": [
        {"id": session, "command": list(plan.server_cmd), "env": dict(env),
         "connect_timeout_ms": int(CALL_TIMEOUT_S * 1000),
         "calls": [{"id": c.id, "tool": c.tool, "arguments": c.arguments, "timeout_ms": int(CALL_TIMEOUT_S * 1000)}
                   for c in plan.calls_of(session)]}
        for session, env in plan.sessions.items()]}
    plan_path = workdir / "typescript-sdk.plan.json"
    plan_path.write_text(json.dumps(document, ensure_ascii=False), "utf-8")
    bound = CALL_TIMEOUT_S * (len(plan.calls) + 2 * len(plan.sessions))
    # Node resolves the script's imports from the script's own folder up: a copy beside a link to the
    # node_modules found makes them that install's, wherever peerwire itself is installed.
    client_dir = Path(tempfile.mkdtemp(prefix="typescript-sdk-", dir=workdir))
    script = client_dir / TS_CLIENT_SCRIPT.name
    shutil.copyfile(TS_CLIENT_SCRIPT, script)
    (client_dir / "node_modules").symlink_to(modules, target_is_directory=True)
    record_launch("typescript-sdk", len(plan.sessions))  # the client starts one server per session
    # From the suite's own working directory, so the server command resolves as for every other client.
    out = _run([node(), str(script), str(plan_path)], timeout=bound, cwd=Path.cwd(),
               stderr=workdir / "typescript-sdk.stderr.log", what="the TypeScript SDK client")
    by_id = {c.id: c for c in plan.calls}
    answers = []
    for line in out.splitlines():
        event = json.loads(line)
        if event["call"] is None:
            if not event["accepted"]:
                raise RuntimeError(f"the TypeScript SDK client could not start session {event['session']!r}: "
                                   f"{event['error']}")
            continue
        call = by_id[event["call"]]
        if event["accepted"]:
            answers.append(Answer(call, True, event["result"]))
        else:
            error = event["error"]
            answers.append(Answer(call, False, refusal=f"it raised {error.get('code')}: {error.get('message')}"))
    return answers


# -- the Inspector CLI ------------------------------------------------------------------------

def run_inspector_cli(plan: Plan, workdir: Path) -> list[Answer]:
    """Each planned call as one ``mcp-inspector-cli ... --method tools/call`` process."""
    cli = node_modules(INSPECTOR_PACKAGE) / INSPECTOR_PACKAGE / "build" / "index.js"
    # The CLI looks for `../package.json` relative to its working directory before importing
    # its own; give it a directory whose parent has one, outside any checkout. The server it
    # starts changes back to the suite's working directory first, so that its command resolves
    # as for every other client.
    cwd = Path(tempfile.mkdtemp(prefix="inspector-", dir=workdir)) / "cwd"
    cwd.mkdir()
    (cwd.parent / "package.json").write_text("{}\n", "utf-8")
    command, *server_args = [shell(), "-c", 'cd "$1" && shift && exec "$@"', "server", str(Path.cwd()),
                             *plan.server_cmd]

    def one(call: PlannedCall) -> Answer:
        argv = [node(), str(cli), command, "--method", "tools/call", "--tool-name", call.tool]
        if call.arguments:
            # Each value as JSON: the CLI parses it back (so "5" stays a string and 5 a number).
            argv += ["--tool-arg", *(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in call.arguments.items())]
        argv += ["--", *server_args]
        try:
            out = _run(argv, timeout=CALL_TIMEOUT_S * 2, cwd=cwd, env=dict(plan.sessions[call.session]),
                       stderr=workdir / f"inspector.{call.id}.stderr.log", what=f"the Inspector CLI ({call.id})")
        except ClientFailed as exc:
            return Answer(call, False, refusal=str(exc))
        return Answer(call, True, json.loads(out))

    record_launch("inspector-cli", len(plan.calls))  # one CLI process, and one server, per call
    with ThreadPoolExecutor(INSPECTOR_WORKERS) as pool:
        first = list(pool.map(one, [c for c in plan.calls if c.after is None]))
        return first + list(pool.map(one, [c for c in plan.calls if c.after is not None]))


class ClientFailed(RuntimeError):
    """A client process that exited non-zero or ran over its bound; the message says why."""


def _run(argv: list[str], *, timeout: float, cwd: Path, stderr: Path, what: str,
         env: dict[str, str] | None = None) -> str:
    """Run a client to completion within ``timeout`` seconds; its stdout, or :class:`ClientFailed`.

    The client runs in a process group of its own, so the server it started
    goes with it if it has to be stopped.
    """
    with open(stderr, "wb") as err:
        process = subprocess.Popen(argv, cwd=cwd, env=env if env is not None else dict(os.environ),
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                                   start_new_session=True)
        try:
            out, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise ClientFailed(f"{what} did not finish within {timeout:g}s") from None
    if process.returncode != 0:
        message = stderr.read_text("utf-8", errors="replace").strip()[-1500:]
        raise ClientFailed(f"{what} exited {process.returncode}: {message or '(no message)'}")
    return out.decode("utf-8")
