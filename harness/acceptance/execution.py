"""One scenario run: its own locked run home, a process job, the lab, the steps, the verdicts.

Order of a run, each a timed phase:

``start``    the run home is locked and a :class:`~harness.process.jobs.Job` (adopting
             orphans) is opened; the lab starts the scripted model, the core
             app (through the job, so the app-servers and MCP servers it spawns
             are the job's too), projects each agent's CODEX_HOME and attaches
             the owners;
``steps``    the scenario's steps drive the agents;
``stop``     the lab stops (app terminated, projections restored) and the job
             is closed: nothing the run started is left running;
``collect``  the evidence is copied into the scenario's artifacts folder;
``checks``   every declared check, plus the universal ones, is judged; a
             scenario with a ``[probe]`` also gets the collaboration probe's
             summary, computed from the model request log alone.

A step that fails, or a lab that does not start, does not skip the later
phases: what was recorded is still collected and judged, and the failure is
the verdict of the ``steps-completed`` check. The run home is kept (and its
path reported) when any check fails; otherwise it is removed unless kept on
request. Interrupts (KeyboardInterrupt, SystemExit from a signal handler)
tear down and propagate.
"""

from __future__ import annotations

import contextlib
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.codex.install import CodexInstallation
from harness.lab.live import CodexLab
from harness.evidence.core import ExportError
from harness.evidence.layout import EXPORT_FILE, MODEL_REQUESTS
from harness.evidence.usage import LABEL as USAGE_LABEL, total as usage_total, usage_of
from harness.model.personas import PersonaScript, select_personas
from harness.model.probe import ProbeObservation, observe_log
from harness.process.jobs import Job, install_signal_handlers
from harness.process.run_home import RunHome
from harness.evidence.secrets import TokenLedger

from . import artifacts
from .budget import RequestBudget
from .checks import SCRIPTED_ONLY, UNIVERSAL, Evidence, Verdict, judge
from harness.lab.driver import REFERENCE
from .observations import Observations, RunnerView
from .progress import Progress
from .scenario import TUI_MODE, Scenario
from .steps import StepRunner

# Seconds the job's processes get to exit on SIGTERM before SIGKILL.
JOB_GRACE_S = 5.0


@dataclass(frozen=True)
class RunSettings:
    """How to run scenarios: the same for every scenario of one acceptance run."""

    codex: CodexInstallation
    homes_root: Path
    """Where each scenario's run home is created."""
    artifacts_root: Path
    """Each scenario's artifacts go to ``<artifacts_root>/<scenario>.<mode>/``."""
    keep_home: bool = False
    approve_tools: bool = True
    provider: str = "scripted"
    auth_home: Path | None = None
    """The authorized Codex home of a real-provider run (``provider != "scripted"``)."""
    token_ledgers: Path | None = None
    """A private folder where each scenario run records the session tokens it issued, for the report's
    secret scan (see :class:`~harness.evidence.secrets.TokenLedger`); never among the artifacts."""
    driver: str = REFERENCE
    """The core under test: its acceptance driver, ``module:Class`` (:mod:`harness.lab.driver`)."""
    capabilities: tuple[str, ...] | None = None
    """The delivery capabilities the live probe enabled, passed to each owner; None: not probed (only the
    reported version limits delivery)."""
    persona: str | None = None
    """The scripted model's persona (``scenarios/personas/``), or None for the scenario's own rules."""
    max_requests: int | None = None
    """At most this many model requests per agent per scenario run (``--max-requests``); None: no cap."""
    trust_workspaces: bool = True
    """False for the untrusted start-up diagnostic (``--untrusted-workspace``): no fixture workspace is
    trusted, and nothing answers a trust prompt."""


def progress_label(scenario: Scenario, mode: str) -> str:
    return scenario.name if len(scenario.modes) == 1 else f"{scenario.name}/{mode}"


def run_scenario(scenario: Scenario, mode: str, settings: RunSettings, *, progress: Progress | None = None,
                 handle_signals: bool = False, trial: int | None = None) -> dict[str, Any]:
    """Run ``scenario`` in ``mode`` and return its result (the report's scenario entry).

    ``handle_signals`` (main thread only): SIGINT/SIGTERM close the job at
    once and exit with 128 + the signal number, after the run home is kept.
    """
    progress = progress or Progress(progress_label(scenario, mode))
    key = scenario.key(mode, persona=settings.persona, provider=settings.provider, trial=trial)
    phases: list[dict[str, Any]] = []
    started = time.monotonic()
    view = RunnerView(mode=mode, scripted=settings.provider == "scripted")
    failure: str | None = None
    steps: StepRunner | None = None
    destination = settings.artifacts_root / key

    @contextlib.contextmanager
    def phase(name: str) -> Iterator[None]:
        began = time.monotonic()
        try:
            yield
        finally:
            phases.append({"name": name, "s": round(time.monotonic() - began, 3)})

    with RunHome(settings.homes_root, run_id=key, keep=settings.keep_home) as home:
        job = Job(f"scenario {key}", grace=JOB_GRACE_S, adopt_orphans=True)
        restore = install_signal_handlers(job) if handle_signals else None
        ledger = TokenLedger(settings.token_ledgers, key) if settings.token_ledgers is not None else None
        script = PersonaScript(scenario.script, select_personas([settings.persona])[0])
        lab = CodexLab(home.path, script, scenario.agents, codex=settings.codex,
                       approve_tools=settings.approve_tools, job=job, auth_home=settings.auth_home,
                       profile=scenario.profile, driver=settings.driver, token_ledger=ledger,
                       capabilities=settings.capabilities, trust_workspaces=settings.trust_workspaces,
                       tui=mode == TUI_MODE)
        budget = (RequestBudget(lab, settings.max_requests, on_hit=lambda agent: progress.say(
            f"{agent} reached the cap of {settings.max_requests} model requests: stopping the agents"))
            if settings.max_requests else contextlib.nullcontext())
        try:
            try:
                with phase("start"):
                    progress.say(f"starting {len(scenario.agents)} Codex agents ({mode} mode)")
                    lab.start()
                    for peer in scenario.peers:
                        lab.register(peer.name, aliases=peer.aliases)
                    view.agents = {name: agent.agent_id for name, agent in lab.agents.items()}
                    for row in (lab.export() or {}).get("agents", []):
                        view.agents.setdefault(row["name"], row["agent_id"])
                    view.attachments[:] = lab.attachments
                    progress.say("agents attached: " + ", ".join(
                        f"{a['agent']} g{a['generation']}" for a in lab.attachments))
                    if lab.tui is not None:
                        progress.say(f"each agent's Codex TUI runs under tmux; watch one with "
                                     f"`tmux -L {lab.tui.server} attach -t {scenario.agents[-1]}`")
                with phase("steps"), budget:
                    steps = StepRunner(scenario, mode, lab, view, progress)
                    steps.run()
            except Exception as error:  # judged below; the run goes on to collect what it has
                failure = f"{type(error).__name__}: {error}"
                progress.say(f"FAILED: {failure}")
                if not isinstance(error, RuntimeError):
                    progress.say(traceback.format_exc().rstrip())
            finally:
                with phase("stop"):
                    lab.stop()
                    teardown = job.close()
                    if not teardown.clean:
                        failure = failure or f"processes survived the teardown: {teardown.survivors}"
        finally:
            if restore is not None:
                restore()
        with phase("collect"):
            artifacts.collect(lab, destination)
        with phase("checks"):
            probe = _probe(scenario, destination)
            verdicts, observations = _judge(scenario, mode, settings, view, destination, failure, probe)
            if isinstance(budget, RequestBudget):
                verdicts.insert(1, _budget_verdict(budget))
        passed = all(verdict.passed for verdict in verdicts)
        progress.say(f"checks {sum(v.passed for v in verdicts)}/{len(verdicts)} passed" +
                     ("" if passed else ": failed " + ", ".join(v.id for v in verdicts if not v.passed)))
        if not passed:
            home.mark_failed("checks failed: " + ", ".join(v.id for v in verdicts if not v.passed))
    result = {
        "name": scenario.name,
        "mode": mode,
        "persona": settings.persona,
        "provider": settings.provider,
        "trial": trial,
        "description": scenario.description,
        "passed": passed,
        "wall_s": round(time.monotonic() - started, 3),
        "phases": phases,
        "agents": _agents(view, scenario, observations),
        "inputs": {"prompts": steps.prompts_sent if steps else {}},
        "runner_tool_calls": steps.tool_calls if steps else [],
        "outputs": _outputs(observations, scenario),
        "checks": [verdict.as_dict() for verdict in verdicts],
        "usage": _usage(scenario, observations),
        "artifacts_dir": f"{key}/",
    }
    if probe is not None:
        result["probe"] = probe.summary
    if not passed:
        result["home"] = str(home.path)
    return result


def _probe(scenario: Scenario, destination: Path) -> ProbeObservation | None:
    if scenario.probe is None:
        return None
    # The tree's root is the first agent; its children are threads of its app-server and share its model route.
    return observe_log(destination / MODEL_REQUESTS, scenario.agents[0], scenario.probe)


def _judge(scenario: Scenario, mode: str, settings: RunSettings, view: RunnerView, destination: Path,
           failure: str | None, probe: ProbeObservation | None) -> tuple[list[Verdict], Observations | None]:
    verdicts = [Verdict("steps-completed", failure is None,
                        failure or f"all steps of the {mode} run completed", Evidence())]
    if settings.auth_home is not None:
        leaks = artifacts.credential_leaks(destination, artifacts.credential_values(settings.auth_home))
        for leak in leaks:
            leak.unlink()
        verdicts.append(Verdict("no-credentials-in-artifacts", not leaks,
                                f"removed {len(leaks)} artifacts holding credentials: "
                                f"{[str(p.relative_to(destination)) for p in leaks]}" if leaks else
                                "no artifact holds a value of the credential file", Evidence()))
    if not (destination / EXPORT_FILE).is_file():
        verdicts.append(Verdict("evidence-collected", False, "the core left no evidence export", Evidence()))
        return verdicts, None
    try:
        observations = Observations(destination, view, probe=probe)
    except ExportError as error:
        verdicts.append(Verdict("evidence-collected", False, f"the core's evidence export is unusable: {error}",
                                Evidence()))
        return verdicts, None
    specs = [spec for spec in scenario.checks if spec.applies(mode)]
    declared = {spec.id for spec in specs}
    universal = UNIVERSAL + (SCRIPTED_ONLY if view.scripted else ())
    specs += [spec for spec in universal if spec.id not in declared]
    verdicts += [judge(spec, observations) for spec in specs]
    return verdicts, observations


def _agents(view: RunnerView, scenario: Scenario, observations: Observations | None) -> dict[str, Any]:
    out = {}
    for name in scenario.agents:
        mine = [a for a in view.attachments if a["agent"] == name]
        out[name] = {"agent_id": view.agents.get(name),
                     "thread_ids": list(dict.fromkeys(a["thread_id"] for a in mine)),
                     "generations": [a["generation"] for a in mine]}
    for name in _children(observations):
        # A child of a collaboration tree: a thread of its root's app-server, known from the core's records.
        row = observations.agent_row(name)
        out[name] = {"agent_id": row["agent_id"], "thread_ids": observations.threads(name),
                     "generations": [row["generation"]] if row.get("generation") else []}
    return out


def _budget_verdict(budget: RequestBudget) -> Verdict:
    counts = ", ".join(f"{agent} {count}" for agent, count in sorted(budget.counts.items())) or "none"
    if budget.hit is not None:
        return Verdict("max-requests", False, f"{budget.hit} reached the cap of {budget.cap} model requests per "
                       f"agent (--max-requests); the run was stopped there (requests: {counts})", Evidence())
    return Verdict("max-requests", True, f"every agent stayed under the cap of {budget.cap} model requests "
                   f"(requests: {counts})", Evidence())


def _usage(scenario: Scenario, observations: Observations | None) -> dict[str, Any]:
    """Per agent, the model requests, token counts and efforts its rollouts record (see
    :mod:`harness.evidence.usage`), with their totals."""
    agents = {} if observations is None else {
        name: usage_of(observations.rollout(name)) for name in [*scenario.agents, *_children(observations)]}
    return {"label": USAGE_LABEL, "agents": agents, "totals": usage_total(agents)}


def _outputs(observations: Observations | None, scenario: Scenario) -> dict[str, list[str]]:
    if observations is None:
        return {}
    return {name: [line.text() for line in observations.final_messages(name)]
            for name in [*scenario.agents, *_children(observations)]}


def _children(observations: Observations | None) -> list[str]:
    """The tree agents the core registered during the run (not started by the runner)."""
    if observations is None:
        return []
    return [row["name"] for row in observations.agents if row.get("parent_agent_id")]
