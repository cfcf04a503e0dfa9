"""Acceptance scenarios as data: one TOML file each in ``scenarios/``.

A scenario file holds two readers' tables. The scripted model reads
``rules`` (see :mod:`harness.model.rules`); the runner reads the rest,
validated against ``contracts/scenario.schema.json``:

* ``[scenario]`` — name, description, and optionally ``group`` (variants),
  ``agents`` (the Codex agents), ``modes`` and ``providers`` it runs with, the
  Codex delivery capabilities it ``requires``, and the ``profile`` of the
  agents' MCP server (``messaging``, or ``collab``: the first agent is the
  root ``/root`` of a collaboration tree);
* ``[prompts]`` — per agent, the exact human prompts, consumed in order;
* ``[[peers]]`` — agents registered without a Codex owner;
* ``[probe]`` — (``collab`` only) the collaboration probe's expected texts
  (:mod:`harness.model.probe`); the run's result then carries the probe summary;
* ``[[steps]]`` — what the runner does, in order (:mod:`.steps`);
* ``[[checks]]`` — the verdicts over the collected evidence (:mod:`.checks`).

Loading fails with :class:`~harness.model.rules.ScenarioError` for anything
that would only break mid-run: a schema violation, a check kind the runner
does not know, a prompt step without a prompt left, a step naming an agent
the scenario does not start, or a hold no rule defines.
"""

from __future__ import annotations

import functools
import json
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from peerwire import profiles
from peerwire.codex.capabilities import Capability

from harness.model.probe import ProbeExpectation
from harness.model.rules import ModelScript, ScenarioError, script_from_document
from harness.evidence.identity import RunIdentity
from harness.resources import contract_file, scenarios

from .checks import JUDGEMENTS
from .checks.kernel import CheckSpec

SCHEMA_PATH = contract_file("scenario.schema.json")
SCENARIOS_DIR = scenarios()

MODES = ("attached", "background", "attached_tui")
TUI_MODE = "attached_tui"
"""Each agent's real Codex TUI runs under tmux, attached to the thread its owner delivers to."""
OPT_IN_MODES = (TUI_MODE,)
"""Modes a scenario runs in only when asked for (``--mode``): a watched TUI adds a terminal per agent."""
PROVIDERS = ("scripted", "openai")


@dataclass(frozen=True)
class Step:
    """One runner action; ``params`` are the step's keys other than ``do`` and ``mode``."""

    index: int
    do: str
    params: Mapping[str, Any]
    mode: str | None = None

    def applies(self, mode: str) -> bool:
        return self.mode in (None, mode)

    def describe(self) -> str:
        keys = ("agent", "turn", "hold", "tool", "rule")
        details = " ".join(f"{key}={self.params[key]}" for key in keys if key in self.params)
        return f"step {self.index + 1} ({self.do}{' ' + details if details else ''})"


@dataclass(frozen=True)
class Peer:
    name: str
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Scenario:
    """A loaded, validated scenario file."""

    name: str
    description: str
    path: Path
    script: ModelScript
    agents: tuple[str, ...]
    modes: tuple[str, ...]
    providers: tuple[str, ...]
    prompts: Mapping[str, tuple[str, ...]]
    steps: tuple[Step, ...]
    checks: tuple[CheckSpec, ...]
    peers: tuple[Peer, ...] = ()
    group: str | None = None
    profile: str = profiles.MESSAGING
    probe: ProbeExpectation | None = None
    requires: tuple[str, ...] = ()
    """Codex delivery capabilities the file declares (names of :class:`~peerwire.codex.capabilities.Capability`)
    beyond those its steps and checks imply; :meth:`needs` has both."""
    scripted_only: str | None = None
    """Why a real provider cannot run the scenario (None: it declares the openai provider)."""

    def selected_by(self, names: Sequence[str]) -> bool:
        """Whether ``--scenario`` values ``names`` select this scenario (its name or its group)."""
        return self.name in names or (self.group is not None and self.group in names)

    def needs(self, mode: str) -> tuple[str, ...]:
        """Every capability a run in ``mode`` needs: the declared ones, then those its steps and checks imply."""
        implied = implied_capabilities(self, mode)
        return (*self.requires, *(name for name in implied if name not in self.requires))

    def key(self, mode: str, *, persona: str | None = None, provider: str | None = None,
            trial: int | None = None) -> str:
        """The scenario run's artifacts folder and home name: its identity's slug (``name.mode``, then the
        persona, a provider other than the scripted model and a trial after the first)."""
        return RunIdentity(self.name, mode, persona, provider, trial).slug()


def load_scenario(path: str | Path, *, known_checks: Sequence[str] | None = None) -> Scenario:
    """Load and validate one scenario file (see the module docs for what is refused).

    ``known_checks`` defaults to the judgements :mod:`harness.acceptance.checks` implements.
    """
    path = Path(path)
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise ScenarioError(str(path), [f"invalid TOML: {error}"]) from error
    return scenario_from_document(document, path=path, known_checks=known_checks)


def scenario_from_document(document: Mapping[str, Any], *, path: Path = Path("<scenario>"),
                           known_checks: Sequence[str] | None = None) -> Scenario:
    """Like :func:`load_scenario` for an already parsed document."""
    source = str(path)
    validator = jsonschema.Draft202012Validator(_schema())
    errors = sorted(validator.iter_errors(document), key=lambda error: list(error.absolute_path))
    if errors:
        raise ScenarioError(source, [
            f"{'/'.join(map(str, error.absolute_path)) or '(top)'}: {error.message}" for error in errors])
    script = script_from_document(document, source=source)
    header = document["scenario"]
    agents = tuple(header.get("agents") or script.agents)
    prompts = {agent: tuple(texts) for agent, texts in (document.get("prompts") or {}).items()}
    steps = tuple(Step(index, spec["do"], {k: v for k, v in spec.items() if k not in ("do", "mode")},
                       spec.get("mode")) for index, spec in enumerate(document["steps"]))
    checks = tuple(CheckSpec(spec["id"], spec["check"],
                             {k: v for k, v in spec.items() if k not in ("id", "check", "mode")}, spec.get("mode"))
                   for spec in document["checks"])
    peers = tuple(Peer(p["name"], tuple(p.get("aliases", ()))) for p in document.get("peers", ()))
    scenario = Scenario(
        name=header["name"], description=header["description"], path=path, script=script, agents=agents,
        modes=tuple(header.get("modes", ("attached",))), providers=tuple(header.get("providers", ("scripted",))),
        prompts=prompts, steps=steps, checks=checks, peers=peers, group=header.get("group"),
        profile=header.get("profile", profiles.MESSAGING),
        probe=ProbeExpectation.from_table(document["probe"]) if "probe" in document else None,
        requires=tuple(header.get("requires", ())),
        scripted_only=header.get("scripted_only"),
    )
    problems = _consistency(scenario, known_checks)
    if problems:
        raise ScenarioError(source, problems)
    return scenario


def is_acceptance_scenario(path: str | Path) -> bool:
    """Whether a scenario file is the runner's: it has ``[[steps]]``.

    Files with model rules only serve other tools (e.g. a probe) and are not run.
    Raises :class:`ScenarioError` for a file that is not TOML.
    """
    try:
        return "steps" in tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise ScenarioError(str(path), [f"invalid TOML: {error}"]) from error


def discover(directory: str | Path = SCENARIOS_DIR) -> list[Scenario]:
    """Every acceptance scenario file (``*.toml`` with ``[[steps]]``) in ``directory``, sorted by name.

    Raises :class:`ScenarioError` on the first file that does not load, and
    when two files declare the same scenario name.
    """
    paths = [path for path in sorted(Path(directory).glob("*.toml")) if is_acceptance_scenario(path)]
    scenarios = [load_scenario(path) for path in paths]
    seen: dict[str, Path] = {}
    for scenario in scenarios:
        if scenario.name in seen:
            raise ScenarioError(str(scenario.path), [f"scenario name {scenario.name!r} is also used by "
                                                     f"{seen[scenario.name]}"])
        seen[scenario.name] = scenario.path
    return sorted(scenarios, key=lambda s: s.name)


def _consistency(scenario: Scenario, known_checks: Sequence[str] | None) -> list[str]:
    if known_checks is None:
        known_checks = list(JUDGEMENTS)
    problems: list[str] = []
    agents = set(scenario.agents)
    peers = {peer.name for peer in scenario.peers}
    for agent in scenario.script.agents:
        if agent not in agents:
            problems.append(f"rules.{agent}: {agent} is not one of the scenario's agents {sorted(agents)}")
    for mode in MODES:
        used: dict[str, int] = {}
        for step in scenario.steps:
            if not step.applies(mode) or mode not in scenario.modes:
                continue
            where = f"steps[{step.index}]"
            agent = step.params.get("agent")
            if agent is not None and agent not in agents:
                problems.append(f"{where}: agent {agent!r} is not started by this scenario")
            if step.do == "prompt":
                used[agent] = used.get(agent, 0) + 1
                if used[agent] > len(scenario.prompts.get(agent, ())):
                    problems.append(f"{where}: no prompt left for {agent} in [prompts] ({mode} mode)")
            hold = step.params.get("hold")
            if hold is not None and hold not in scenario.script.holds:
                problems.append(f"{where}: no rule defines hold {hold!r}")
    for spec in scenario.checks:
        if spec.check not in known_checks:
            problems.append(f"checks.{spec.id}: unknown check {spec.check!r} (known: {', '.join(sorted(known_checks))})")
    ids = [spec.id for spec in scenario.checks]
    for duplicate in sorted({i for i in ids if ids.count(i) > 1}):
        problems.append(f"checks.{duplicate}: duplicate check id")
    if peers & agents:
        problems.append(f"peers: {sorted(peers & agents)} are also Codex agents")
    if "openai" in scenario.providers and scenario.scripted_only is not None:
        problems.append("scenario.scripted_only: the scenario also declares the openai provider")
    if scenario.probe is not None and scenario.profile != profiles.COLLAB:
        problems.append("probe: the collaboration probe needs profile = \"collab\"")
    known = {c.value for c in Capability}
    for name in scenario.requires:
        if name not in known:
            problems.append(f"scenario.requires: unknown capability {name!r} (known: {', '.join(sorted(known))})")
    return problems


# What a step or check implies about the Codex capabilities a scenario needs.
_IMPLIED_BY_STEP = {"prompt": "idle_start"}
_IMPLIED_BY_CHECK = {"injected_without_turn": "inject", "interrupted_exactly": "interrupt",
                     "resumed_same_thread": "resume", "task_bound": "idle_start",
                     "tui_thread_adopted": "attached_tui", "tui_shows_exchange": "attached_tui"}


def implied_capabilities(scenario: Scenario, mode: str) -> dict[str, str]:
    """Capabilities the scenario's own steps and checks show it needs, each with the reason.

    A file declares (``requires``) only what these do not show, e.g. a steer
    that no check judges.
    """
    implied: dict[str, str] = {}
    if mode == TUI_MODE:
        implied["attached_tui"] = "mode attached_tui attaches each agent's TUI to its owner's app-server"
    for step in (step for step in scenario.steps if step.applies(mode)):
        if step.do in _IMPLIED_BY_STEP:
            implied.setdefault(_IMPLIED_BY_STEP[step.do], f"{step.describe()} opens a turn")
        if step.do == "attach" and step.params.get("resume"):
            implied.setdefault("resume", f"{step.describe()} resumes a thread")
    for spec in (spec for spec in scenario.checks if spec.applies(mode)):
        if spec.check in _IMPLIED_BY_CHECK:
            implied.setdefault(_IMPLIED_BY_CHECK[spec.check], f"check {spec.id} ({spec.check}) judges it")
    return implied


def missing_capabilities(scenario: Scenario, mode: str, enabled: Sequence[str]) -> list[str]:
    """The capabilities a run of the scenario in ``mode`` needs that are not in ``enabled``."""
    return [name for name in scenario.needs(mode) if name not in enabled]


@functools.cache
def _schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


@dataclass
class Selection:
    """Which scenario runs a run performs: (scenario, mode) pairs in order."""

    runs: list[tuple[Scenario, str]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def select(scenarios: Sequence[Scenario], *, names: Sequence[str] = (), mode: str | None = None,
           provider: str = "scripted") -> Selection:
    """The runs for ``--scenario`` ``names`` (empty: all), ``--mode`` and ``--provider``.

    A scenario runs once per mode it declares but the :data:`OPT_IN_MODES`, or only in ``mode`` when given.
    Raises ValueError for a name that selects nothing, and for an explicitly
    named scenario that cannot run with ``mode`` or ``provider``; scenarios
    merely not named are skipped with a reason instead.
    """
    unknown = [name for name in names if not any(s.selected_by([name]) for s in scenarios)]
    if unknown:
        known = sorted({s.name for s in scenarios} | {s.group for s in scenarios if s.group})
        raise ValueError(f"no scenario named {', '.join(unknown)} (known: {', '.join(known)})")
    selection = Selection()
    for scenario in scenarios:
        if names and not scenario.selected_by(names):
            continue
        why = None
        if provider not in scenario.providers:
            why = f"{scenario.name}: not meaningful with provider {provider} (runs with {', '.join(scenario.providers)})"
        elif mode is not None and mode not in scenario.modes:
            why = f"{scenario.name}: has no {mode} mode (modes: {', '.join(scenario.modes)})"
        if why is not None:
            if names and scenario.name in names:
                raise ValueError(why)
            selection.skipped.append(why)
            continue
        for scenario_mode in scenario.modes:
            if mode == scenario_mode or (mode is None and scenario_mode not in OPT_IN_MODES):
                selection.runs.append((scenario, scenario_mode))
    return selection
