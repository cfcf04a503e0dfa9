"""Which delivery capabilities one Codex installation has: detected, then proven live.

Detection asks two witnesses: the version the CLI reports and the methods and
fields its generated app-server schema offers (:mod:`harness.codex.protocol`),
both judged against the declarations next to the adapter
(:mod:`peerwire.codex.capabilities`). A capability that either witness rules
out is unsupported and is never attempted.

Eligibility is not evidence, so a live probe follows before anything is
enabled: on a throwaway Codex home talking to the scripted model, it starts
``codex app-server`` and checks, in order,

* connection: ``initialize`` answers and reports the installed version;
* attachment: ``thread/start`` opens a thread (and, where the version reports
  it, the peerwire MCP server of that home starts);
* input, per eligible capability: an injected item reaches the next model
  request (inject), and so does a native agent message, as one (agent_message); a turn runs to a final answer (idle_start); a turn held by
  the model accepts a steer fenced by its id and refuses one fenced by another
  (steer), then ends interrupted (interrupt); the history reads back
  (history_read), forks (fork), and resumes in a new app-server (resume);
  an app-server listening on a socket lets a second client (standing in for
  a TUI's ``--remote`` connection) start a thread that the owner observes,
  names and subscribes to (attached_tui).

A capability is enabled when it is eligible, connection and attachment
passed, and every check of its own passed. :class:`CapabilityReport` holds all
of it; the acceptance runner and ``runner.py drift`` print and report it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from peerwire import collab
from peerwire.codex.adapter import inject_item, is_stale_turn
from peerwire.codex.app_server import AppServerClient, AppServerError, JsonRpcError
from peerwire.codex.listen_bridge import WebSocket
from peerwire.codex.capabilities import (Assessment, Capability, Fact, declared_facts, evaluate,
                                         version_from_user_agent)
from peerwire.home import HOME_ENV, SESSION_ENV

from harness.codex.home import MODEL_KEY_VALUE, ScriptedProvider, project_agent
from harness.codex.install import CodexInstallError, CodexInstallation, locate_codex
from harness.codex.launch import private_home
from harness.codex.protocol import ProtocolSchema, ProtocolSchemaError
from harness.codex.workspace import FixtureWorkspace
from harness.evidence.responses import item_text
from harness.model.rules import script_from_document
from harness.model.server import ScriptedModel

T = TypeVar("T")

REPORT_NAME = "capabilities.json"
PROBE_AGENT = "probe"
STEP_TIMEOUT_S = 120.0
"""One step of the live probe: a safety net far above what a step takes with the machine busy (an
app-server's initialize, the slowest, took about 5 s at a load average of 12); a step that hits it fails its
capability's check."""
MCP_SERVER = "peerwire"
# The probe's model: it answers only prompts carrying these markers.
_TURN, _HOLD, _STEER = "[probe-turn]", "[probe-hold]", "[probe-steer]"
_FINAL = "probe ok"


def _final(text: str) -> dict[str, Any]:
    return {"message": {"phase": "final_answer", "text": text}}


def probe_model_document() -> dict[str, Any]:
    def on(rule_id: str, marker: str, text: str, **extra: Any) -> dict[str, Any]:
        return {"id": rule_id, "when": [{"user_text": {"last": True, "contains": marker}}],
                "emit": [_final(text)], **extra}

    return {"scenario": {"name": "capability-probe", "description": "The capability probe's model."},
            # The steer joins the held turn, and Codex asks again with the steer as its newest input: that answer
            # is held too, or the turn could complete before the interrupt lands (it did on a busy machine).
            "rules": {PROBE_AGENT: [on("steered", _STEER, "steered", hold="probe"), on("held", _HOLD, "held", hold="probe"),
                                    on("turn", _TURN, _FINAL)]}}


@dataclass(frozen=True)
class ProbeCheck:
    """One live check: ``capability`` is None for the connection and attachment checks."""

    name: str
    capability: Capability | None
    passed: bool
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "capability": self.capability.value if self.capability else None,
                "passed": self.passed, "detail": self.detail}


@dataclass
class CapabilityReport:
    """Detection and probe of one Codex installation, and what is enabled as a result."""

    version: str
    assessment: Assessment
    offered: frozenset[Fact] = frozenset()
    schema_error: str | None = None
    checks: list[ProbeCheck] = field(default_factory=list)
    tool_surface: str | None = None
    """How the model saw the peerwire MCP tools in the probe's model request (e.g. ``namespace mcp__peerwire``):
    not a delivery capability, but what a scripted model's tool calls must address."""

    def enabled(self) -> list[Capability]:
        common = [c for c in self.checks if c.capability is None]
        if not common or not all(c.passed for c in common):
            return []
        out = []
        for capability in self.assessment.supported():
            own = [c for c in self.checks if c.capability == capability]
            if own and all(c.passed for c in own):
                out.append(capability)
        return out

    def why_not(self, capability: Capability) -> str | None:
        """Why ``capability`` is not enabled (None when it is)."""
        if capability in self.enabled():
            return None
        if not self.assessment.allows(capability):
            return self.assessment.verdicts[capability].reason
        failed = [c for c in self.checks if not c.passed and c.capability in (None, capability)]
        if failed:
            return f"the live probe failed: {failed[0].name}: {failed[0].detail}"
        return "the live probe did not check it"

    def enabled_names(self) -> list[str]:
        return [c.value for c in self.enabled()]

    def to_json(self) -> dict[str, Any]:
        enabled = set(self.enabled())
        return {"version": self.version, "schema_error": self.schema_error,
                "capabilities": {c.value: {"eligible": self.assessment.allows(c), "enabled": c in enabled,
                                           "reason": self.why_not(c) or self.assessment.verdicts[c].reason}
                                 for c in Capability},
                "optional_fields": self.assessment.to_json()["optional_fields"],
                "offered": [{"method": f.method, "path": f.path} for f in sorted(self.offered, key=str)],
                "probe": [c.to_json() for c in self.checks], "tool_surface": self.tool_surface}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CapabilityReport:
        """The report :meth:`to_json` wrote; the verdicts are evaluated again from its version and facts."""
        offered = frozenset(Fact(f["method"], f["path"]) for f in data["offered"])
        checks = [ProbeCheck(c["name"], Capability(c["capability"]) if c["capability"] else None, c["passed"],
                             c["detail"]) for c in data["probe"]]
        schema_error = data["schema_error"]
        return cls(data["version"], evaluate(data["version"], offered), offered, schema_error, checks,
                   data.get("tool_surface"))

    def run_summary(self) -> dict[str, Any]:
        """What a run report says of it: the enabled capabilities, why each other one is not, the tool surface."""
        enabled = self.enabled()
        return {"enabled": [c.value for c in enabled],
                "not_enabled": {c.value: self.why_not(c) or "" for c in Capability if c not in enabled},
                "tool_surface": self.tool_surface}

    def summary(self) -> str:
        """One line: every capability with ✓ (enabled) or ✗."""
        enabled = set(self.enabled())
        return " ".join(f"{c.value} {'✓' if c in enabled else '✗'}" for c in Capability)


def detect(codex: CodexInstallation, scratch: Path) -> tuple[Assessment, frozenset[Fact], str | None]:
    """The verdict of version and schema on every capability, the facts offered, and why there was no schema."""
    try:
        schema = ProtocolSchema.generate(codex, scratch / "schema")
    except ProtocolSchemaError as error:
        # Without a schema nothing can be shown to exist: every capability is judged on an empty offer.
        return evaluate(codex.version, offered=set()), frozenset(), str(error)
    offered = frozenset(schema.offered(declared_facts()))
    return evaluate(codex.version, offered=offered), offered, None


def establish(codex: CodexInstallation, evidence: Path, *,
              progress: Callable[[str], None] | None = None) -> CapabilityReport:
    """Detect, then probe, the capabilities of ``codex``.

    The probe's transcripts, model request log and :data:`REPORT_NAME` are
    written to ``evidence`` (created if missing); the throwaway Codex home,
    workspace and schema live in a temporary folder removed afterwards.
    """
    say = progress or (lambda _line: None)
    evidence.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="peerwire-capabilities-") as scratch:
        report = asyncio.run(_establish(codex, evidence, Path(scratch), say))
    (evidence / REPORT_NAME).write_text(json.dumps(report.to_json(), indent=1, ensure_ascii=False), "utf-8")
    return report


async def _establish(codex: CodexInstallation, evidence: Path, scratch: Path,
                     say: Callable[[str], None]) -> CapabilityReport:
    """Detection and the probe's start-up overlap (Codex generates its schema while the probe's model,
    workspace and first app-server come up); no check runs before detection made it eligible."""
    detecting = asyncio.ensure_future(asyncio.to_thread(detect, codex, scratch))

    async def eligibility() -> Assessment | None:
        assessment, _, schema_error = await detecting
        eligible = assessment.supported()
        say(f"Codex {codex.version}: eligible by version and schema: "
            f"{', '.join(c.value for c in eligible) or 'nothing'}{f' ({schema_error})' if schema_error else ''}")
        return assessment if eligible else None

    try:
        checks, tool_surface = await _probe(codex, eligibility(), evidence, scratch / "home")
    finally:
        assessment, offered, schema_error = await detecting
    if checks:
        failed = [c for c in checks if not c.passed]
        say(f"Codex {codex.version}: live probe: {len(checks) - len(failed)}/{len(checks)} checks passed"
            + "".join(f"; {c.name}: {c.detail}" for c in failed))
    return CapabilityReport(codex.version, assessment, offered, schema_error, checks, tool_surface)


# -- the live probe ---------------------------------------------------------------------------------


class _Probe:
    def __init__(self, assessment: Assessment | None = None):
        self.assessment = assessment or Assessment.unchecked()
        self.checks: list[ProbeCheck] = []
        self.tool_surface: str | None = None

    def record(self, name: str, capability: Capability | None, passed: bool, detail: str) -> bool:
        self.checks.append(ProbeCheck(name, capability, passed, detail))
        return passed

    def eligible(self, capability: Capability) -> bool:
        return self.assessment.allows(capability)

    async def attempt(self, name: str, capability: Capability, step: Awaitable[T]) -> T | None:
        """``step``'s result; None, with a failed check of ``capability`` recorded, when Codex refused or timed out."""
        try:
            return await step
        except (AppServerError, TimeoutError) as error:  # JsonRpcError and AppServerExited included
            self.record(name, capability, False, f"{type(error).__name__}: {error}"[:500])
            return None

    def extra(self, method: str, **fields: str) -> dict[str, str]:
        return {k: v for k, v in fields.items() if self.assessment.accepts_field(method, k)}


async def _probe(codex: CodexInstallation, eligibility: Awaitable[Assessment | None], evidence: Path,
                 home: Path) -> tuple[list[ProbeCheck], str | None]:
    """The live checks of what ``eligibility`` (detection, awaited once the first app-server is starting)
    makes eligible; none when it makes nothing eligible."""
    probe = _Probe()
    codex_home = home / "codex_home"
    codex_home.mkdir(mode=0o700, parents=True)
    workspace = FixtureWorkspace.create(home / "workspace", agent=PROBE_AGENT)
    (home / "core").mkdir()
    model = ScriptedModel(script_from_document(probe_model_document(), source="capability-probe"),
                          log_path=evidence / "model-requests.jsonl").start()
    # The reference core's MCP server, pointing at a home where no app runs: it starts, and answers nothing.
    projection = project_agent(codex_home, workspace.path, server=[sys.executable, "-m", "peerwire", "mcp", "serve"],
                               server_env={HOME_ENV: str(home / "core"), SESSION_ENV: "probe-has-no-session"},
                               base_url=model.base_url(PROBE_AGENT))
    env = {**codex.child_env(os.environ), **private_home(home / "home"), ScriptedProvider.env_key: MODEL_KEY_VALUE}

    async def start(generation: int) -> AppServerClient:
        return await AppServerClient.start(codex=codex.program, codex_home=codex_home, cwd=workspace.path,
                                           env=env, transcript_path=evidence / f"probe.g{generation}.appserver.jsonl",
                                           stderr_path=evidence / f"probe.g{generation}.stderr.log",
                                           timeout=STEP_TIMEOUT_S)

    async def attached_tui(recorder: _Probe) -> None:
        await _attached_tui(recorder, codex, codex_home, workspace.path, env, evidence)

    try:
        await _run_probe(probe, codex, start, workspace.path, model, eligibility, attached_tui)
    finally:
        projection.restore()
        model.stop()
    return probe.checks, probe.tool_surface


async def _run_probe(probe: _Probe, codex: CodexInstallation, start: Callable[[int], Any], cwd: Path,
                     model: ScriptedModel, eligibility: Awaitable[Assessment | None],
                     attached_tui: Callable[[_Probe], Awaitable[None]]) -> None:
    starting = asyncio.ensure_future(start(1))
    try:
        assessment = await eligibility
    except BaseException:
        await _discard(starting)
        raise
    try:
        client = await starting
    except (AppServerError, OSError, TimeoutError) as error:
        if assessment is not None:
            probe.record("connection", None, False, f"app-server did not complete initialize: {error}"[:500])
        return
    if assessment is None:  # nothing to prove: the app-server that started in case closes unused
        await client.close()
        return
    probe.assessment = assessment
    try:
        reported = version_from_user_agent((client.initialize_result or {}).get("userAgent"))
        if not probe.record("connection", None, reported == codex.version,
                            f"initialize answered; the server reports version {reported}"):
            return
        thread_id = await _attachment(probe, client, cwd)
        if thread_id is None:
            return
        await _inputs(probe, client, thread_id, model)
    except (AppServerError, TimeoutError) as error:
        probe.record("probe", None, False, f"{type(error).__name__}: {error}"[:500])
        return
    finally:
        await client.close()
    # Two more app-servers, independent of each other, so side by side: a thread can be resumed once it has
    # a rollout, which its first turn wrote; an attached TUI's owner listens on a socket of its own (only
    # once connection and attachment passed). Their checks are recorded in this order whichever ends first.
    resume, tui = _Probe(probe.assessment), _Probe(probe.assessment)
    later = []
    if probe.eligible(Capability.RESUME) and probe.eligible(Capability.IDLE_START):
        later.append(_resume(resume, start, thread_id))
    if probe.eligible(Capability.ATTACHED_TUI) and not any(c.capability is None and not c.passed
                                                          for c in probe.checks):
        later.append(attached_tui(tui))
    await asyncio.gather(*later)
    probe.checks += resume.checks + tui.checks


async def _discard(starting: asyncio.Future) -> None:
    """Close an app-server that was starting for a probe that will not run."""
    try:
        client = await starting
    except (AppServerError, OSError, TimeoutError, asyncio.CancelledError):
        return
    await client.close()


async def _attached_tui(probe: _Probe, codex: CodexInstallation, codex_home: Path, cwd: Path,
                        env: dict[str, str], evidence: Path) -> None:
    """The owner's app-server listens on a socket; a second client there (standing in for the TUI's
    ``--remote`` connection) starts a thread; the owner observes it, names it and subscribes to it."""
    where = Path(tempfile.mkdtemp(prefix="pw-probe-"))  # short: a socket path has ~100 bytes
    socket = where / "tui.sock"
    try:
        owner = await AppServerClient.start(
            codex=[sys.executable, "-m", "peerwire.codex.listen_bridge", os.fspath(codex.program)],
            args=["--listen", f"unix://{socket}"], codex_home=codex_home, cwd=cwd, env=env,
            transcript_path=evidence / "probe.tui-owner.appserver.jsonl",
            stderr_path=evidence / "probe.tui-owner.stderr.log", timeout=STEP_TIMEOUT_S)
    except (AppServerError, OSError, TimeoutError) as error:
        probe.record("attached tui", Capability.ATTACHED_TUI, False,
                     f"the app-server did not listen on a socket: {error}"[:500])
        shutil.rmtree(where, ignore_errors=True)
        return
    tui = None
    try:
        tui = await WebSocket.connect_unix(os.fspath(socket))
        for message in ({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "probe-tui",
                                                                                     "version": "0"}}},
                        {"method": "initialized"},
                        {"id": 2, "method": "thread/start", "params": {"cwd": os.fspath(cwd)}}):
            await tui.send_text(json.dumps({"jsonrpc": "2.0", **message}))
        started = None
        async with asyncio.timeout(STEP_TIMEOUT_S):
            while started is None:
                answer = json.loads(await tui.receive_text() or "null")
                if answer is None:
                    raise AppServerError("the listen socket closed the second client's connection")
                if isinstance(answer, dict) and answer.get("id") == 2:
                    started = ((answer.get("result") or {}).get("thread") or {}).get("id")
                    if started is None:
                        raise AppServerError(f"the second client's thread/start failed: {answer}")
        seen = await owner.wait_for_notification("thread/started", lambda p: p["thread"]["id"] == started,
                                                  timeout=STEP_TIMEOUT_S)
        await owner.thread_set_name(started, PROBE_AGENT, timeout=STEP_TIMEOUT_S)
        resumed = (await owner.thread_resume(started, timeout=STEP_TIMEOUT_S))["thread"]["id"]
        probe.record("attached tui", Capability.ATTACHED_TUI, resumed == started,
                     f"a second client on the listen socket started thread {started}; the owner observed it "
                     f"(notification {seen.index}), named it and subscribed (thread/resume answered {resumed})")
    except (AppServerError, OSError, TimeoutError, ValueError, KeyError) as error:
        probe.record("attached tui", Capability.ATTACHED_TUI, False, f"{type(error).__name__}: {error}"[:500])
    finally:
        if tui is not None:
            tui.close()
        await owner.close()
        shutil.rmtree(where, ignore_errors=True)


async def _attachment(probe: _Probe, client: AppServerClient, cwd: Path) -> str | None:
    since = len(client.received)
    result = await client.thread_start(cwd=cwd, timeout=STEP_TIMEOUT_S)
    thread_id = (result.get("thread") or {}).get("id")
    if not probe.record("attachment", None, isinstance(thread_id, str), f"thread/start opened thread {thread_id}"):
        return None
    if probe.eligible(Capability.MCP_STARTUP_STATUS):
        note = await client.wait_for_notification(
            "mcpServer/startupStatus/updated",
            lambda p: p.get("name") == MCP_SERVER and p.get("status") in ("ready", "failed"),
            since=since, timeout=STEP_TIMEOUT_S)
        ready = note.params.get("status") == "ready"
        probe.record("attachment: MCP server", None, ready,
                     f"the {MCP_SERVER} MCP server is {note.params.get('status')}"
                     + (f": {note.params.get('error')}" if not ready else ""))
        probe.record("mcp startup status", Capability.MCP_STARTUP_STATUS, True,
                     "mcpServer/startupStatus/updated reported the server")
    return thread_id


async def _inputs(probe: _Probe, client: AppServerClient, thread_id: str, model: ScriptedModel) -> None:
    """One input check per eligible capability; a failure counts against that capability only."""
    nonce = secrets.token_hex(8)
    injected: str | None = None
    native: dict[str, Any] | None = None
    if probe.eligible(Capability.INJECT):
        injected = await probe.attempt("inject", Capability.INJECT, client.thread_inject_items(
            thread_id, [inject_item(f"[probe-inject] {nonce}")], timeout=STEP_TIMEOUT_S))
    if probe.eligible(Capability.AGENT_MESSAGE):
        sent = collab.agent_message(f"{collab.ROOT}/probe", collab.ROOT, "[probe-agent-message]", nonce)
        if await probe.attempt("agent message", Capability.AGENT_MESSAGE, client.thread_inject_items(
                thread_id, [sent], timeout=STEP_TIMEOUT_S)) is not None:
            native = sent
    if probe.eligible(Capability.IDLE_START):
        turn = await probe.attempt("idle start", Capability.IDLE_START, _turn(
            client, thread_id, f"{_TURN} {nonce}",
            probe.extra("turn/start", clientUserMessageId=f"probe-{nonce}", turnTrigger="operator")))
        request = next((e for e in model.exchanges if e.agent == PROBE_AGENT and nonce in _texts(e)), None)
        probe.tool_surface = tool_surface(request.body) if request is not None else None
        if turn is not None:
            turn_id, completed, final = turn
            probe.record("idle start", Capability.IDLE_START,
                         completed == "completed" and final == _FINAL and request is not None,
                         f"turn {turn_id} ended {completed} with final answer {final!r}; "
                         f"the prompt {'reached' if request else 'did not reach'} the model")
        if injected is not None:
            seen = request is not None and f"[probe-inject] {nonce}" in _texts(request)
            probe.record("inject", Capability.INJECT, seen, "thread/inject_items was acknowledged and the item "
                         f"{'was' if seen else 'was not'} in the next model request")
        if native is not None:
            # It must reach the model as an agent message with both ends, not folded into a user message.
            arrived = [item for item in (request.input_items() if request is not None else [])
                       if isinstance(item, dict) and item.get("type") == "agent_message"
                       and {k: item.get(k) for k in ("author", "recipient", "content")}
                       == {k: native[k] for k in ("author", "recipient", "content")}]
            probe.record("agent message", Capability.AGENT_MESSAGE, len(arrived) == 1,
                         f"an agent_message from {native['author']} to {native['recipient']} was acknowledged and "
                         f"{'reached' if arrived else 'did not reach'} the next model request as an agent_message")
    elif injected is not None:
        probe.record("inject", Capability.INJECT, True, "thread/inject_items was acknowledged (no turn to read it)")
    if probe.eligible(Capability.HISTORY_READ):
        read = await probe.attempt("history read", Capability.HISTORY_READ,
                                   client.thread_read(thread_id, include_turns=True, timeout=STEP_TIMEOUT_S))
        if read is not None:
            turns = (read.get("thread") or {}).get("turns")
            probe.record("history read", Capability.HISTORY_READ, isinstance(turns, list) and len(turns) > 0,
                         f"thread/read returned {len(turns or [])} turns")
    if probe.eligible(Capability.FORK):
        forked = await probe.attempt("fork", Capability.FORK, client.thread_fork(thread_id, timeout=STEP_TIMEOUT_S))
        if forked is not None:
            child = (forked.get("thread") or {}).get("id")
            probe.record("fork", Capability.FORK, isinstance(child, str) and child != thread_id,
                         f"thread/fork opened thread {child}")
    held = [c for c in (Capability.STEER, Capability.INTERRUPT) if probe.eligible(c)]
    if held:
        await probe.attempt(" and ".join(c.value for c in held), held[0], _held_turn(probe, client, thread_id, model))


async def _held_turn(probe: _Probe, client: AppServerClient, thread_id: str, model: ScriptedModel) -> None:
    """A turn the model holds open: a steer fenced by another turn is refused, one fenced by it joins it;
    then it is interrupted (or, without that capability, released by the model)."""
    since = len(client.received)
    started = await client.turn_start(thread_id, f"{_HOLD} keep this turn open", timeout=STEP_TIMEOUT_S)
    turn_id = started["turn"]["id"]
    await client.wait_for_notification("turn/started", lambda p: p["turn"]["id"] == turn_id, since=since,
                                       timeout=STEP_TIMEOUT_S)
    if probe.eligible(Capability.STEER):
        try:
            await client.turn_steer(thread_id, f"not-{turn_id}", f"{_STEER} fenced by another turn",
                                    timeout=STEP_TIMEOUT_S)
            fenced = "a steer fenced by another turn id was accepted"
        except JsonRpcError as error:
            fenced = None if is_stale_turn(error) else f"refused with [{error.code}] {error.message}"
        accepted = await probe.attempt("steer", Capability.STEER, client.turn_steer(
            thread_id, turn_id, f"{_STEER} fenced by this turn",
            extra=probe.extra("turn/steer", clientUserMessageId="probe-steer"), timeout=STEP_TIMEOUT_S))
        if accepted is not None:
            joined = accepted.get("turnId") == turn_id
            probe.record("steer", Capability.STEER, fenced is None and joined,
                         fenced or f"a steer fenced by another turn was refused as stale; one fenced by {turn_id} "
                                   f"{'joined it' if joined else 'answered ' + repr(accepted)}")
    interrupted = probe.eligible(Capability.INTERRUPT) and await probe.attempt(
        "interrupt", Capability.INTERRUPT, client.turn_interrupt(thread_id, turn_id, timeout=STEP_TIMEOUT_S)) is not None
    if not interrupted:
        model.release("probe")
    status = await _completion(client, turn_id, since)
    if interrupted:
        probe.record("interrupt", Capability.INTERRUPT, status == "interrupted",
                     f"turn/interrupt of held turn {turn_id}: it ended {status}")


async def _turn(client: AppServerClient, thread_id: str, text: str,
                extra: dict[str, str]) -> tuple[str, str | None, str | None]:
    since = len(client.received)
    started = await client.turn_start(thread_id, text, extra=extra, timeout=STEP_TIMEOUT_S)
    turn_id = started["turn"]["id"]
    status = await _completion(client, turn_id, since)
    finals = [n.params["item"].get("text") for n in client.received[since:] if n.method == "item/completed"
              and n.params.get("turnId") == turn_id and (n.params.get("item") or {}).get("phase") == "final_answer"]
    return turn_id, status, finals[-1] if finals else None


async def _completion(client: AppServerClient, turn_id: str, since: int) -> str | None:
    note = await client.wait_for_notification("turn/completed", lambda p: p["turn"]["id"] == turn_id,
                                              since=since, timeout=STEP_TIMEOUT_S)
    return note.params["turn"].get("status")


async def _resume(probe: _Probe, start: Callable[[int], Any], thread_id: str) -> None:
    try:
        client = await start(2)
    except (AppServerError, OSError, TimeoutError) as error:
        probe.record("resume", Capability.RESUME, False, f"a second app-server did not start: {error}"[:500])
        return
    try:
        result = await client.thread_resume(thread_id, timeout=STEP_TIMEOUT_S)
        resumed = (result.get("thread") or {}).get("id")
        probe.record("resume", Capability.RESUME, resumed == thread_id,
                     f"thread/resume in a new app-server answered thread {resumed}")
    except (AppServerError, TimeoutError) as error:
        probe.record("resume", Capability.RESUME, False, f"thread/resume failed: {error}"[:500])
    finally:
        await client.close()


def tool_surface(body: Any) -> str | None:
    """How a model request offers the peerwire MCP tools: ``namespace NAME`` or ``functions PREFIX*``."""
    tools = body.get("tools") if isinstance(body, dict) else None
    for tool in tools or []:
        name = str(tool.get("name") or "")
        if tool.get("type") == "namespace" and name.startswith(f"mcp__{MCP_SERVER}"):
            return f"namespace {name}"
        if name.startswith(f"mcp__{MCP_SERVER}__"):
            return f"functions mcp__{MCP_SERVER}__*"
    return None


def _texts(exchange: Any) -> str:
    return "\n".join(item_text(item) for item in exchange.input_items() if isinstance(item, dict))


# -- as a process of the acceptance runner's job -------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m harness.codex.capability_probe --codex PATH --expected-version V [--version-read V] EVIDENCE_DIR``.

    Detects and probes, writes ``EVIDENCE_DIR/capabilities.json`` and prints
    progress to stderr. Exit status 0 when the report was written (whatever it
    says), 2 when the Codex cannot be used.
    """
    parser = argparse.ArgumentParser(prog="python -m harness.codex.capability_probe",
                                     description="Detect and probe the delivery capabilities of a Codex CLI.")
    parser.add_argument("--codex", metavar="PATH")
    parser.add_argument("--expected-version", metavar="V")
    parser.add_argument("--version-read", metavar="V",
                        help="the version the caller has just read from this --codex (the acceptance runner): "
                             "not read again")
    parser.add_argument("evidence", type=Path, metavar="EVIDENCE_DIR")
    args = parser.parse_args(argv)
    if args.version_read and args.codex and (args.expected_version in (None, args.version_read)):
        # One `codex --version` per run: the runner located and checked this executable a moment ago.
        codex = CodexInstallation(Path(args.codex).absolute(), args.version_read, "--codex")
    else:
        try:
            codex = locate_codex(args.codex, expected_version=args.expected_version)
        except CodexInstallError as error:
            print(f"capabilities: {error}", file=sys.stderr)
            return 2
    establish(codex, args.evidence, progress=lambda line: print(f"capabilities: {line}", file=sys.stderr))
    return 0


if __name__ == "__main__":
    sys.exit(main())
