"""Runs one contract case against a target and turns what happens into votes.

The driver registers the case's actors through the provisioner (names made
unique per run, so cases can share a home; a collab case's root actor as the
root of its tree), starts one server process per calling actor with the
command of the case's profile, performs the MCP handshake and runs the steps
in order. An actor any caller can play (:attr:`Case.shareable_actors`) is
instead given a shared session when the run offers one
(:mod:`harness.contract.isolation`), and plays as that session's caller. Each check becomes a vote; the first failed check ends the case,
because later steps usually build on it. Every call is bounded: by the step's
``within_ms``, or by the call's own timeout plus ``--call-timeout``; a step's
``not_before_ms`` says how long a call must at least have taken (a wait that
really waited).

Two checks apply to every call step, whatever the case verifies:
``tools:result:structured`` (a success conforms to the output schema) and
``tools:error:is-error`` (a failure is an ``isError`` result with a contract
error object); in the collab profile ``collab:result:structured`` and
``collab:error:is-error``, against ``contracts/collab``.
"""

from __future__ import annotations

import secrets
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from harness.contract.interface import Provisioner

from .cases import AwaitStep, CallStep, Case, ControlStep, Outcome, PendingStep
from .endpoints import Endpoint, PendingCall, RawEndpoint, SdkEndpoint, ToolOutcome
from .expectations import check
from .expressions import ActorIdentity, ExpressionError, Scope, evaluate
from .isolation import SharedSessions
from .limits import limits
from .schemas import error_result_violations, tool_contract
from .stdio import ServerExited
from .target import Target
from .verdicts import VoteRecorder


RESULT_REQUIREMENT = "tools:result:structured"
ERROR_REQUIREMENT = "tools:error:is-error"
INTEROP_REQUIREMENT = "interop:sdk:happy-path"
PROFILE_REQUIREMENTS = {
    "messaging": {"result": RESULT_REQUIREMENT, "error": ERROR_REQUIREMENT, "interop": INTEROP_REQUIREMENT},
    "collab": {"result": "collab:result:structured", "error": "collab:error:is-error",
               "interop": "collab:interop:sdk"},
}
"""The requirements every call step votes for, and the interop one, per profile."""

KILLED_WITHIN_S = 0.3
"""After a crash, how long a server process the provisioner killed takes to be gone (SIGKILL is not instant)."""
MAX_TIMEOUT_MS = 60_000
DEFAULT_TIMEOUT_MS = {"wait_agent": 60_000}
COLLAB_WAIT_DEFAULT_MS = 30_000
COLLAB_WAIT_MIN_MS = 10_000


class StepFailed(Exception):
    """Raised inside the driver to end a case at its first failed check."""


@dataclass
class _Running:
    step: CallStep
    pending: PendingCall


def call_bound_s(call: str, arguments: Any, profile: str = "messaging") -> float:
    """How long a call may take: its own timeout (capped at the contract's maximum) plus grace.

    The collab profile's wait_agent waits 30 s by default and at least 10 s.
    """
    timeout = arguments.get("timeout_ms") if isinstance(arguments, dict) else None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
        timeout = None
    if profile == "collab" and call == "wait_agent":
        timeout = COLLAB_WAIT_DEFAULT_MS if timeout is None else max(timeout, COLLAB_WAIT_MIN_MS)
    elif timeout is None:
        timeout = DEFAULT_TIMEOUT_MS.get(call, 0)
    return min(timeout, MAX_TIMEOUT_MS) / 1000 + limits().call_s


class CaseRun:
    """One run of one case. ``via`` is ``raw`` (the suite's client) or ``sdk`` (the MCP SDK)."""

    def __init__(self, case: Case, target: Target, provisioner: Provisioner, workdir: Path,
                 recorder: VoteRecorder, *, via: str = "raw", portal: Any = None,
                 sessions: SharedSessions | None = None):
        if via == "sdk" and portal is None:
            raise ValueError("the sdk client needs a blocking portal")
        self.sessions = sessions if via == "raw" else None
        """Where the case's actors that only need a caller lease a session (``None``: each actor its own)."""
        self.case = case
        self.target = target
        self.provisioner = provisioner
        self.workdir = workdir
        self.recorder = recorder
        self.via = via
        self.portal = portal
        self.profile = case.profile
        self.server_cmd = target.server_cmd_for(case.profile)
        self.structure = PROFILE_REQUIREMENTS[case.profile]
        self.nonce = secrets.token_hex(3)
        self.identities: dict[str, ActorIdentity] = {}
        self.envs: dict[str, dict[str, str]] = {}
        self.endpoints: dict[str, Endpoint] = {}
        self.results: dict[str, Any] = {}
        self.running: dict[str, _Running] = {}
        self.scope = Scope(actors=self.identities, values=case.values, results=self.results,
                           unique_name=self.unique_name)

    def unique_name(self, stem: str) -> str:
        return f"{stem}-{self.nonce}"

    # -- running --------------------------------------------------------------------

    def run(self) -> None:
        """Run every step until one fails; votes land in the recorder."""
        with ExitStack() as stack:
            stack.callback(self._close_endpoints)
            try:
                self._provision()
                for step in self.case.steps:
                    self._run_step(step)
            except StepFailed:
                pass

    def _provision(self) -> None:
        try:
            shared = self.case.shareable_actors if self.sessions is not None else frozenset()
            for key, spec in self.case.actors.items():
                name = self.unique_name(spec.stem)
                if key in shared:
                    assert self.sessions is not None
                    lease = self.sessions.lease(requirement=self.case.requirement)
                    self.endpoints[key] = lease
                    assert lease.caller is not None, "a shared home's session has a caller"
                    self.identities[key] = ActorIdentity(lease.caller.name, lease.caller.agent_id)
                elif spec.registered:
                    # collab_root is passed only when set: a provisioner without the profile need not know it.
                    root = {"collab_root": True} if spec.collab_root else {}
                    caller = self.provisioner.register(
                        name, aliases=tuple(self.unique_name(a) for a in spec.aliases), **root)
                    self.identities[key] = ActorIdentity(caller.name, caller.agent_id, caller.aliases)
                    self.envs[key] = self.provisioner.caller_env(caller)
                else:
                    self.identities[key] = ActorIdentity(name, "")
                    self.envs[key] = self.provisioner.stranger_env()
            callers = [s.actor for s in self.case.steps if isinstance(s, CallStep) and s.actor not in shared]
            for key in dict.fromkeys(callers):
                self.endpoints[key] = self._open(key)
            for key in dict.fromkeys(callers):
                self.endpoints[key].handshake()
        except Exception as exc:
            self._fail(self.case.requirement, "the provisioner registers the actors and their servers start",
                       step="setup", detail=f"{type(exc).__name__}: {exc}")

    def _open(self, key: str) -> Endpoint:
        env = self.target.server_env(self.envs[key])
        stderr = self.workdir / f"{key}.{self.via}.stderr.log"
        if self.via == "sdk":
            return SdkEndpoint.open(self.portal, self.server_cmd, env, stderr=stderr)
        return RawEndpoint.open(self.server_cmd, env, stderr=stderr)

    def _close_endpoints(self) -> None:
        for endpoint in self.endpoints.values():
            endpoint.close()

    def _run_step(self, step: CallStep | AwaitStep | PendingStep | ControlStep) -> None:
        if isinstance(step, ControlStep):
            self._control(step)
        elif isinstance(step, PendingStep):
            self._still_pending(step)
        elif isinstance(step, AwaitStep):
            running = self.running.pop(step.awaited)
            started = time.monotonic()
            bound = (step.outcome.within_ms / 1000 if step.outcome.within_ms
                     else call_bound_s(running.step.call, running.pending.arguments, self.profile))
            outcome = running.pending.outcome(bound)
            self._judge(step.awaited, step.id, running.step.call, outcome, step.outcome,
                        (time.monotonic() - started) * 1000)
        else:
            arguments = self._evaluate(step.arguments, step.outcome, step.id)
            try:
                pending = self.endpoints[step.actor].call_tool(
                    step.call, arguments, timeout=call_bound_s(step.call, arguments, self.profile))
            except ServerExited as exc:
                self._fail(self._attribute(step.outcome.requirement or self.case.requirement),
                           "the server is still there to take the call", step=step.id, detail=str(exc))
            if step.background:
                self.running[step.id] = _Running(step, pending)
                return
            bound = (step.outcome.within_ms / 1000 if step.outcome.within_ms
                     else call_bound_s(step.call, arguments, self.profile))
            outcome = pending.outcome(bound)
            self._judge(step.id, step.id, step.call, outcome, step.outcome, outcome.elapsed_ms)

    def _still_pending(self, step: PendingStep) -> None:
        running = self.running[step.awaited]
        req = self._attribute(step.requirement or running.step.outcome.requirement or self.case.requirement)
        check = f"{running.step.call} is still waiting {step.for_ms} ms later"
        early = running.pending.outcome(step.for_ms / 1000)
        if early.response is not None:
            self._fail(req, check, step=step.id, detail=f"it answered after {early.elapsed_ms:.0f} ms, before "
                       "anything it waits for happened", request=early.request, response=early.response)
        self.recorder.record(req, True, check, step=step.id)

    def _control(self, step: ControlStep) -> None:
        try:
            action: Callable[[], None] = self._crash if step.action == "crash" else getattr(self.provisioner, step.action)
            action()
        except Exception as exc:
            self._fail(self.case.requirement, f"the provisioner can {step.action.replace('_', ' ')}",
                       step=step.id, detail=f"{type(exc).__name__}: {exc}")

    def _crash(self) -> None:
        """The provisioner crashes whatever writes (given the case's server processes), then every session
        whose server died is launched again, as a client would reconnect."""
        pids = [e.server.process.pid for e in self.endpoints.values() if isinstance(e, RawEndpoint)]
        self.provisioner.crash(pids)
        for key, endpoint in list(self.endpoints.items()):
            if isinstance(endpoint, RawEndpoint) and endpoint.server.exited_within(KILLED_WITHIN_S):
                endpoint.close()
                self.endpoints[key] = self._open(key)
                self.endpoints[key].handshake()

    # -- judging ----------------------------------------------------------------------

    def _judge(self, result_key: str, label: str, tool: str, outcome: ToolOutcome, expected: Outcome,
               elapsed_ms: float) -> None:
        req = self._attribute(expected.requirement or self.case.requirement)
        evidence = {"request": outcome.request, "response": outcome.response}
        if outcome.response is None:
            self._fail(req, "the server responds", step=label, detail=outcome.failure, **evidence)
        if expected.within_ms is not None:
            took = f"responds within {expected.within_ms} ms"
            if elapsed_ms > expected.within_ms:
                self._fail(req, took, step=label, detail=f"took {elapsed_ms:.0f} ms", **evidence)
            self.recorder.record(req, True, took, step=label)
        if expected.not_before_ms is not None:
            # From the call's start: a wait must really have waited, however the case collected it.
            waited = f"responds no sooner than {expected.not_before_ms} ms"
            if outcome.elapsed_ms < expected.not_before_ms:
                self._fail(req, waited, step=label, detail=f"took {outcome.elapsed_ms:.0f} ms", **evidence)
            self.recorder.record(req, True, waited, step=label)
        if outcome.protocol_error is not None or outcome.result is None:
            error = outcome.protocol_error or {}
            self._fail(req, "tools/call returns a result", step=label,
                       detail=f"JSON-RPC error {error.get('code')}: {error.get('message')}", **evidence)
        result = outcome.result
        assert result is not None
        structured = result.get("structuredContent")
        flagged = result.get("isError") is True
        shaped = not error_result_violations(structured)
        if flagged or shaped:
            self._judge_error(req, label, result, structured, flagged, expected, evidence)
        elif expected.error:
            self._fail(req, f"fails with {expected.error}", step=label, detail="the call succeeded", **evidence)
        else:
            violations = (tool_contract(tool, self.profile).result_violations(structured) if structured is not None
                          else ["no structuredContent"])
            check_text = f"{tool}'s structuredContent conforms to its output schema"
            if violations:
                self._fail(self._attribute(self.structure["result"]), check_text, step=label,
                           detail="; ".join(violations[:5]), **evidence)
            self.recorder.record(self._attribute(self.structure["result"]), True, check_text, step=label)
            if not expected.expect:
                self.recorder.record(req, True, f"{tool} succeeds", step=label)
        self.results[result_key] = structured
        for expectation in expected.expect:
            evaluated = self._evaluate(expectation, expected, label)
            verdict = check(evaluated, structured, result)
            vote_req = self._attribute(expectation.get("requirement") or req)
            if not verdict.passed:
                self._fail(vote_req, verdict.check, step=label, detail=verdict.detail, **evidence)
            self.recorder.record(vote_req, True, verdict.check, step=label)

    def _judge_error(self, req: str, label: str, result: dict, structured: Any, flagged: bool,
                     expected: Outcome, evidence: dict) -> None:
        problems = error_result_violations(structured)
        if not flagged:
            problems.insert(0, f"isError is {result.get('isError', 'absent')!r}, not true")
        shape = "a tool error is an isError result with a contract error object"
        if problems:
            self._fail(self._attribute(self.structure["error"]), shape, step=label, detail="; ".join(problems[:5]),
                       **evidence)
        self.recorder.record(self._attribute(self.structure["error"]), True, shape, step=label)
        error = structured["error"]
        found = f"{error['code']}: {error['message']}"
        if not expected.error:
            self._fail(req, "succeeds", step=label, detail=f"failed with {found}", **evidence)
        if error["code"] != expected.error:
            self._fail(req, f"fails with {expected.error}", step=label, detail=f"failed with {found}", **evidence)
        self.recorder.record(req, True, f"fails with {expected.error}", step=label)
        for text in expected.error_mentions:
            mentions = f"the error message mentions {text!r}"
            if text not in error["message"]:
                self._fail(req, mentions, step=label, detail=f"message: {error['message']!r}", **evidence)
            self.recorder.record(req, True, mentions, step=label)

    # -- helpers -----------------------------------------------------------------------

    def _evaluate(self, value: Any, expected: Outcome, label: str) -> Any:
        try:
            return evaluate(value, self.scope)
        except ExpressionError as exc:
            self._fail(self._attribute(expected.requirement or self.case.requirement),
                       "the values this step needs exist", step=label, detail=str(exc))

    def _attribute(self, requirement: str) -> str:
        return self.structure["interop"] if self.via == "sdk" else requirement

    def _fail(self, requirement: str, check_text: str, *, step: str, detail: str | None = None,
              request: Any = None, response: Any = None) -> None:
        self.recorder.record(self._attribute(requirement), False, check_text, step=step, detail=detail,
                             request=request, response=response, exchange=self._exchange())
        raise StepFailed(check_text)

    def _exchange(self) -> list[dict] | None:
        """The last lines every actor's session sent and received, whatever their ids (raw sessions only)."""
        lines = []
        for actor, endpoint in self.endpoints.items():
            if isinstance(endpoint, RawEndpoint):
                lines += [{**entry, "server": actor} for entry in endpoint.server.exchange(limit=12)]
        return lines or None

