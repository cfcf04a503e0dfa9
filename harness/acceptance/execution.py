"""One scenario run: its own locked run home, a process job, the lab, the steps, the verdicts.

Order of a run, each a timed phase:

``start``    the run home is locked and a :class:`~harness.process.jobs.Job` (adopting
             orphans) is opened; the lab starts the scripted model, the core
             app (through the job, so the app-servers and MCP servers it spawns
             are the job's too), projects each agent's CODEX_HOME and attaches
             the owners (given a capability verdict still to come, they wait for
             it: a run it rules out ends here, :class:`~.gate.RunSkipped`);
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
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.codex.install import CodexInstallation
from harness.lab.kinds import kinds_of, pair_name, spec
from harness.lab.live import CodexLab
from harness.names import AWAITING_CAPABILITIES
from harness.evidence.core import ExportError
from harness.evidence.layout import MODEL_REQUESTS
from harness.evidence.usage import usage_of
from harness.model.personas import PersonaScript, select_personas
from harness.model.probe import ProbeObservation, observe_log
from harness.process.jobs import Job, install_signal_handlers
from harness.process.run_home import RunHome
from harness.evidence.secrets import SecretScan, TokenLedger

from . import artifacts
from .budget import RequestBudget
from .checks import PROVIDER_ONLY, SCRIPTED_ONLY, UNIVERSAL, Evidence, Verdict, judge
from .gate import RunSkipped, Verdict as CapabilityVerdict, gate
from harness.lab.driver import REFERENCE
from .observations import Observations, RunnerView
from .progress import Progress
from .result import scenario_result
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
    acp_agents: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """The ACP agents ``--acp-agent NAME=COMMAND`` named: name -> command (a pair's ``acp:NAME``)."""


def progress_label(scenario: Scenario, mode: str) -> str:
    return scenario.name if len(scenario.modes) == 1 else f"{scenario.name}/{mode}"


@dataclass(frozen=True)
class ScenarioRun:
    """What every phase of one scenario run is given; fixed before the run starts."""

    scenario: Scenario
    mode: str
    settings: RunSettings
    trial: int | None
    progress: Progress

    @property
    def key(self) -> str:
        """The run's identity slug: its run home's and its artifacts folder's name."""
        s = self.settings
        return self.scenario.key(self.mode, persona=s.persona, provider=s.provider, trial=self.trial)

    @property
    def destination(self) -> Path:
        return self.settings.artifacts_root / self.key

    @property
    def scripted(self) -> bool:
        return self.settings.provider == "scripted"


@dataclass(frozen=True)
class Driven:
    """What the start, steps and stop phases leave: the runner's view, what the steps sent, and why the run
    stopped short (None: every step completed and nothing outlived the teardown)."""

    view: RunnerView
    prompts: dict[str, list[str]]
    tool_calls: list[dict[str, Any]]
    failure: str | None


@dataclass(frozen=True)
class Judged:
    """What the checks phase leaves: every verdict, the observations they read (None when the evidence was
    unusable) and the collaboration probe's summary."""

    verdicts: list[Verdict]
    observations: Observations | None
    probe: ProbeObservation | None

    @property
    def passed(self) -> bool:
        """No verdict failed, and one passed at least (a skip is neither)."""
        return any(verdict.passed for verdict in self.verdicts) and not self.failed

    @property
    def failed(self) -> list[str]:
        return [verdict.id for verdict in self.verdicts if verdict.failed]

    @property
    def skipped(self) -> list[str]:
        return [verdict.id for verdict in self.verdicts if verdict.skipped is not None]


class PhaseClock:
    """Times each phase of a run, in the order they ran (``phases``: ``[{"name", "s"}]``)."""

    def __init__(self) -> None:
        self.began = time.monotonic()
        self.phases: list[dict[str, Any]] = []

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        began = time.monotonic()
        try:
            yield
        finally:
            self.phases.append({"name": name, "s": round(time.monotonic() - began, 3)})

    def carve(self, name: str, before: str, seconds: float) -> None:
        """Count ``seconds`` of the last phase ``before`` as a phase ``name`` of its own, just ahead of it."""
        if seconds <= 0:
            return
        at = max(n for n, phase in enumerate(self.phases) if phase["name"] == before)
        self.phases[at]["s"] = round(max(0.0, self.phases[at]["s"] - seconds), 3)
        self.phases.insert(at, {"name": name, "s": round(seconds, 3)})

    @property
    def wall_s(self) -> float:
        return time.monotonic() - self.began


def run_scenario(scenario: Scenario, mode: str, settings: RunSettings, *, progress: Progress | None = None,
                 handle_signals: bool = False, trial: int | None = None,
                 verdict: Callable[[], CapabilityVerdict] | None = None) -> dict[str, Any]:
    """Run ``scenario`` in ``mode`` and return its result (the report's scenario entry).

    ``handle_signals`` (main thread only): SIGINT/SIGTERM close the job at
    once and exit with 128 + the signal number, after the run home is kept.
    ``verdict``: the capability probe's verdict, awaited before the owners
    attach (:mod:`.gate`); it takes the place of ``settings.capabilities``.
    Raises :class:`~.gate.RunSkipped` (nothing kept) when the verdict rules
    the run out.
    """
    run = ScenarioRun(scenario, mode, settings, trial, progress or Progress(progress_label(scenario, mode)))
    clock = PhaseClock()
    skipped: RunSkipped | None = None
    with RunHome(settings.homes_root, run_id=run.key, keep=settings.keep_home) as home:
        job = Job(f"scenario {run.key}", grace=JOB_GRACE_S, adopt_orphans=True)
        lab = open_lab(run, home.path, job, verdict)
        budget = request_budget(run, lab)
        restore = install_signal_handlers(job) if handle_signals else None
        try:
            driven = drive(run, lab, job, budget, clock)
        except RunSkipped as ruled_out:
            skipped = ruled_out
            run.progress.say(f"skipped: {ruled_out}")
        finally:
            if restore is not None:
                restore()
        if skipped is None:
            with clock.phase("collect"):
                artifacts.collect(lab, run.destination)
            with clock.phase("checks"):
                judged = judge_run(run, driven, budget)
            passed = sum(verdict.passed for verdict in judged.verdicts)
            run.progress.say(f"checks {passed}/{len(judged.verdicts)} passed" +
                             (f", {len(judged.skipped)} skipped ({', '.join(judged.skipped)})" if judged.skipped
                              else "") +
                             ("" if not judged.failed else ": failed " + ", ".join(judged.failed)))
            if not judged.passed:
                home.mark_failed("checks failed: " + ", ".join(judged.failed))
    if skipped is not None:
        raise skipped  # outside the run home, which a run that never delivered leaves nothing in
    return result_of(run, driven, judged, clock, home=str(home.path))


def open_lab(run: ScenarioRun, root: Path, job: Job,
             verdict: Callable[[], CapabilityVerdict] | None = None) -> CodexLab:
    """The lab of the run (not started): its agents, the core's driver, the persona's script, and the
    capabilities its owners may use (with a ``verdict``, awaited before they attach)."""
    s = run.settings
    ledger = TokenLedger(s.token_ledgers, run.key) if s.token_ledgers is not None else None
    script = PersonaScript(run.scenario.script, select_personas([s.persona])[0])
    capabilities = gate(verdict, run.scenario.needs(run.mode)) if verdict is not None else s.capabilities
    kinds = kinds_of(run.scenario.agents, [spec(kind, s.acp_agents) for kind in run.scenario.pair])
    return CodexLab(root, script, run.scenario.agents, codex=s.codex, approve_tools=s.approve_tools, job=job,
                    auth_home=s.auth_home, profile=run.scenario.profile, driver=s.driver, token_ledger=ledger,
                    capabilities=capabilities, trust_workspaces=s.trust_workspaces, tui=run.mode == TUI_MODE,
                    kinds=kinds)


def request_budget(run: ScenarioRun, lab: CodexLab) -> RequestBudget | contextlib.nullcontext[None]:
    """The ``--max-requests`` cap on each agent's model requests while the steps run (none: a no-op)."""
    cap = run.settings.max_requests
    if not cap:
        return contextlib.nullcontext()
    return RequestBudget(lab, cap, on_hit=lambda agent: run.progress.say(
        f"{agent} reached the cap of {cap} model requests: stopping the agents"))


def drive(run: ScenarioRun, lab: CodexLab, job: Job, budget: Any, clock: PhaseClock) -> Driven:
    """The phases ``start``, ``steps`` and ``stop``. A step that fails, or a lab that does not start, ends
    the driving but not the run: the failure is kept for ``steps-completed`` and the lab and job are stopped
    either way. Interrupts (KeyboardInterrupt, SystemExit) propagate after the teardown."""
    view = RunnerView(mode=run.mode, scripted=run.scripted,
                      kinds={name: agent.kind for name, agent in getattr(lab, "kinds", {}).items()})
    steps: StepRunner | None = None
    failure: str | None = None
    try:
        try:
            with clock.phase("start"):
                start(run, lab, view)
        finally:
            clock.carve(AWAITING_CAPABILITIES, "start", lab.capabilities_awaited_s)
        with clock.phase("steps"), budget:
            steps = StepRunner(run.scenario, run.mode, lab, view, run.progress)
            steps.run()
    except RunSkipped:
        raise  # not a failure: nothing was delivered, nothing is judged (the teardown below still runs)
    except Exception as error:  # judged later; the run goes on to collect what it has
        failure = f"{type(error).__name__}: {error}"
        run.progress.say(f"FAILED: {failure}")
        if not isinstance(error, RuntimeError):
            run.progress.say(traceback.format_exc().rstrip())
    finally:
        with clock.phase("stop"):
            survivors = stop(lab, job)
    failure = failure or survivors
    return Driven(view, steps.prompts_sent if steps else {}, steps.tool_calls if steps else [], failure)


def start(run: ScenarioRun, lab: CodexLab, view: RunnerView) -> None:
    """Start the lab (the scripted model, the core, each agent's owner), register the scenario's peers, and
    note in ``view`` who is who and which owners attached."""
    kinds = ", ".join(f"{name} {kind}" for name, kind in view.kinds.items())
    run.progress.say(f"starting {len(run.scenario.agents)} agents ({kinds or 'Codex'}; {run.mode} mode)")
    lab.start()
    for peer in run.scenario.peers:
        lab.register(peer.name, aliases=peer.aliases)
    view.agents = {name: agent.agent_id for name, agent in lab.agents.items()}
    for row in (lab.export() or {}).get("agents", []):
        view.agents.setdefault(row["name"], row["agent_id"])
    view.attachments[:] = lab.attachments
    run.progress.say("agents attached: " + ", ".join(f"{a['agent']} g{a['generation']}" for a in lab.attachments))
    if lab.tui is not None:
        run.progress.say(f"each agent's Codex TUI runs under tmux; watch one with "
                         f"`tmux -L {lab.tui.server} attach -t {run.scenario.agents[-1]}`")


def stop(lab: CodexLab, job: Job) -> str | None:
    """Stop the lab (app terminated, projections restored) and close the job; what survived, if anything."""
    lab.stop()
    teardown = job.close()
    return None if teardown.clean else f"processes survived the teardown: {teardown.survivors}"


def judge_run(run: ScenarioRun, driven: Driven, budget: Any) -> Judged:
    """Every verdict of the run: ``steps-completed``, the credential scan of a real-provider run, whether the
    evidence could be read, then each declared check and the universal ones (and ``max-requests``)."""
    probe = _probe(run.scenario, run.destination)
    verdicts = [Verdict("steps-completed", driven.failure is None,
                        driven.failure or f"all steps of the {run.mode} run completed", Evidence())]
    if isinstance(budget, RequestBudget):
        verdicts.append(_budget_verdict(budget))
    if run.settings.auth_home is not None:
        verdicts.append(_credential_verdict(run.destination, run.settings.auth_home))
    try:
        observations = Observations.load(run.destination, driven.view, probe=probe)
    except ExportError as error:
        verdicts.append(Verdict("evidence-collected", False, str(error), Evidence()))
        return Judged(verdicts, None, probe)
    specs = [spec for spec in run.scenario.checks if spec.applies(run.mode)]
    declared = {spec.id for spec in specs}
    universal = UNIVERSAL + (SCRIPTED_ONLY if run.scripted else PROVIDER_ONLY)
    specs += [spec for spec in universal if spec.id not in declared]
    verdicts += [judge(spec, observations) for spec in specs]
    return Judged(verdicts, observations, probe)


def result_of(run: ScenarioRun, driven: Driven, judged: Judged, clock: PhaseClock, *, home: str) -> dict[str, Any]:
    """The run's result (:func:`.result.scenario_result`) from what its phases left."""
    observations = judged.observations
    names = [*run.scenario.agents, *_children(observations)]
    return scenario_result(
        name=run.scenario.name, mode=run.mode, persona=run.settings.persona, provider=run.settings.provider,
        trial=run.trial, pair=pair_name(run.scenario.pair), description=run.scenario.description, key=run.key,
        verdicts=judged.verdicts,
        wall_s=clock.wall_s, phases=clock.phases, agents=_agents(driven.view, run.scenario, observations),
        prompts=driven.prompts, tool_calls=driven.tool_calls,
        outputs={} if observations is None else {
            name: [line.text() for line in observations.final_messages(name)] for name in names},
        usage={} if observations is None else {name: usage_of(observations.rollout(name)) for name in names},
        probe=judged.probe.summary if judged.probe is not None else None, home=home)


def _probe(scenario: Scenario, destination: Path) -> ProbeObservation | None:
    if scenario.probe is None:
        return None
    # The tree's root is the first agent; its children are threads of its app-server and share its model route.
    return observe_log(destination / MODEL_REQUESTS, scenario.agents[0], scenario.probe)


def _credential_verdict(destination: Path, auth_home: Path) -> Verdict:
    """A real-provider run: no artifact may hold a value of the credential file (any that does is removed)."""
    leaks = SecretScan.collect({}, auth_home=auth_home).holders(destination)
    for leak in leaks:
        leak.unlink()
    return Verdict("no-credentials-in-artifacts", not leaks,
                   f"removed {len(leaks)} artifacts holding credentials: "
                   f"{[str(p.relative_to(destination)) for p in leaks]}" if leaks else
                   "no artifact holds a value of the credential file", Evidence())


def _agents(view: RunnerView, scenario: Scenario, observations: Observations | None) -> dict[str, Any]:
    out = {}
    for name in scenario.agents:
        mine = [a for a in view.attachments if a["agent"] == name]
        out[name] = {"agent_id": view.agents.get(name), "kind": view.kinds.get(name, "codex"),
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


def _children(observations: Observations | None) -> list[str]:
    """The tree agents the core registered during the run (not started by the runner)."""
    if observations is None:
        return []
    return [row["name"] for row in observations.agents if row.get("parent_agent_id")]
