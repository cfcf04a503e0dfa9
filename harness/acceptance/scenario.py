"""Acceptance scenarios as data: one TOML file each in ``scenarios/``.

A scenario file holds two readers' tables. The scripted model reads
``rules`` (see :mod:`harness.model.rules`); the runner reads the rest,
validated against ``contracts/scenario.schema.json``:

* ``[scenario]`` — name, description, and optionally ``group`` (variants),
  ``agents`` (the agents), ``modes`` and ``providers`` it runs with, the
  Codex delivery capabilities it ``requires``, the ``profile`` of the
  agents' MCP server (``messaging``, or ``collab``: the first agent is the
  root ``/root`` of a collaboration tree), and the ``kinds`` of agents it makes
  sense for (``codex``, ``acp``: the provider adapters; default Codex only),
  which decide the pairs it runs as (``runner.py --agents``);
* ``[prompts]`` — per agent, the exact human prompts, consumed in order;
* ``[[peers]]`` — agents registered without a Codex owner;
* ``[probe]`` — (``collab`` only) the collaboration probe's expected texts
  (:mod:`harness.model.probe`); the run's result then carries the probe summary;
* ``[[steps]]`` — what the runner does, in order (:mod:`.steps`); a step with
  ``needs = { B = "inject" }`` runs only when B's kind has that capability
  (:mod:`harness.capabilities`), one with ``lacks`` only when it has not;
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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import jsonschema

from harness.capabilities import Capability, agent_kind

from harness.lab.kinds import DEFAULT_PAIR, pair_name

from harness.model.probe import ProbeExpectation
from harness.model.rules import ModelScript, ScenarioError, script_from_document
from harness.evidence.identity import RunIdentity
from harness.resources import contract_file, scenarios

from .checks import JUDGEMENTS
from .checks.kernel import CheckSpec

MESSAGING, COLLAB = "messaging", "collab"
"""The tool profiles a scenario may name (the ``profile`` enum of ``scenario.schema.json``)."""
SCHEMA_PATH = contract_file("scenario.schema.json")
SCENARIOS_DIR = scenarios()

MODES = ("attached", "background", "attached_tui")
TUI_MODE = "attached_tui"
"""Each agent's real Codex TUI runs under tmux, attached to the thread its owner delivers to."""
OPT_IN_MODES = (TUI_MODE,)
"""Modes a scenario runs in only when asked for (``--mode``): a watched TUI adds a terminal per agent."""
PROVIDERS = ("scripted", "openai")
KINDS = ("codex", "acp")
"""The provider adapters a scenario's agents may be driven by (``[scenario] kinds``)."""


@dataclass(frozen=True)
class Step:
    """One runner action; ``params`` are the step's keys other than ``do`` and ``mode``."""

    index: int
    do: str
    params: Mapping[str, Any]
    mode: str | None = None
    needs: Mapping[str, str] = field(default_factory=dict)
    """Agent -> a capability its kind must have for the step to run (``needs = { B = "inject" }``)."""
    lacks: Mapping[str, str] = field(default_factory=dict)
    """Agent -> a capability its kind must lack for the step to run: the other path of a declared limit."""

    def applies(self, mode: str) -> bool:
        return self.mode in (None, mode)

    def fits(self, kinds: Mapping[str, str]) -> bool:
        """Whether the step runs for agents of ``kinds`` (agent -> kind name; an agent not named is Codex)."""
        def can(agent: str, capability: str) -> bool:
            return agent_kind(kinds.get(agent, "codex")).can(capability)
        return (all(can(agent, cap) for agent, cap in self.needs.items())
                and not any(can(agent, cap) for agent, cap in self.lacks.items()))

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
    profile: str = MESSAGING
    probe: ProbeExpectation | None = None
    requires: tuple[str, ...] = ()
    """Codex delivery capabilities the file declares (names of :data:`~harness.capabilities.Capability`)
    beyond those its steps and checks imply; :meth:`needs` has both."""
    scripted_only: str | None = None
    """Why a real provider cannot run the scenario (None: it declares the openai provider)."""
    kinds: tuple[str, ...] = ("codex",)
    """The provider adapters its agents may be driven by (:data:`KINDS`)."""
    pair: tuple[str, str] = DEFAULT_PAIR
    """The kinds it runs as this time (A's, B's): a selection sets it (:func:`select`)."""

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
        persona, a provider other than the scripted model, a trial after the first, and a pair other than
        two Codex agents)."""
        return RunIdentity(self.name, mode, persona, provider, trial, pair_name(self.pair)).slug()

    def why_not_as(self, pair: Sequence[str], mode: str | None, provider: str) -> str | None:
        """Why the scenario cannot run as ``pair`` (A's kind, B's), or None when it can."""
        if tuple(pair) == DEFAULT_PAIR:
            return None
        where = f"{self.name} as {pair_name(pair)}"
        adapters = {agent_kind(kind).provider for kind in pair}
        if not adapters <= set(self.kinds):
            return f"{where}: its agents can be {' or '.join(self.kinds)} only ([scenario] kinds)"
        if mode == TUI_MODE:
            return f"{where}: mode {TUI_MODE} attaches Codex TUIs only"
        if "opencode" in pair and provider != "scripted":
            return f"{where}: opencode runs on the scripted model (a real provider's agent is --acp-agent's)"
        return None


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
    steps = tuple(Step(index, spec["do"], {k: v for k, v in spec.items() if k not in ("do", "mode", "needs", "lacks")},
                       spec.get("mode"), dict(spec.get("needs") or {}), dict(spec.get("lacks") or {}))
                  for index, spec in enumerate(document["steps"]))
    checks = tuple(CheckSpec(spec["id"], spec["check"],
                             {k: v for k, v in spec.items() if k not in ("id", "check", "mode")}, spec.get("mode"))
                   for spec in document["checks"])
    peers = tuple(Peer(p["name"], tuple(p.get("aliases", ()))) for p in document.get("peers", ()))
    scenario = Scenario(
        name=header["name"], description=header["description"], path=path, script=script, agents=agents,
        modes=tuple(header.get("modes", ("attached",))), providers=tuple(header.get("providers", ("scripted",))),
        prompts=prompts, steps=steps, checks=checks, peers=peers, group=header.get("group"),
        profile=header.get("profile", MESSAGING),
        probe=ProbeExpectation.from_table(document["probe"]) if "probe" in document else None,
        requires=tuple(header.get("requires", ())),
        scripted_only=header.get("scripted_only"),
        kinds=tuple(header.get("kinds", ("codex",))),
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
            for agent in (*step.needs, *step.lacks):
                if agent not in agents:
                    problems.append(f"{where}: needs/lacks name {agent!r}, which this scenario does not start")
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
    if scenario.probe is not None and scenario.profile != COLLAB:
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
    """Which scenario runs a run performs: (scenario, mode) in order, each scenario as the pair it runs as
    (:attr:`Scenario.pair`)."""

    runs: list[tuple[Scenario, str]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PairChoice:
    """One ``--agents`` value: the pair (A's kind, B's), and the scenarios it is for (empty: every one)."""

    pair: tuple[str, str] = DEFAULT_PAIR
    scenarios: tuple[str, ...] = ()


def select(scenarios: Sequence[Scenario], *, names: Sequence[str] = (), mode: str | None = None,
           provider: str = "scripted", pairs: Sequence[PairChoice] = (PairChoice(),)) -> Selection:
    """The runs for ``--scenario`` ``names`` (empty: all), ``--mode``, ``--provider`` and ``--agents``
    (``pairs``, in order; a pair's own scenario names narrow it further).

    A scenario runs once per mode it declares but the :data:`OPT_IN_MODES`, or only in ``mode`` when given,
    as every pair that selects it. Raises ValueError for a name that selects nothing, and for an explicitly
    named scenario that cannot run with ``mode``, ``provider`` or the pair; scenarios merely not named are
    skipped with a reason instead.
    """
    unknown = [name for name in names if not any(s.selected_by([name]) for s in scenarios)]
    if unknown:
        known = sorted({s.name for s in scenarios} | {s.group for s in scenarios if s.group})
        raise ValueError(f"no scenario named {', '.join(unknown)} (known: {', '.join(known)})")
    selection = Selection()
    seen: set[tuple[str, str, tuple[str, ...]]] = set()
    for choice in pairs:
        unknown = [name for name in choice.scenarios if not any(s.selected_by([name]) for s in scenarios)]
        if unknown:
            raise ValueError(f"--agents {pair_name(choice.pair)}: no scenario named {', '.join(unknown)}")
        candidates = [s.name for s in scenarios if (not names or s.selected_by(names))
                      and (not choice.scenarios or s.selected_by(choice.scenarios))]
        if (names or choice.scenarios) and not candidates:
            continue  # the pair's scenarios are not among those --scenario names
        one = _select(scenarios, names=candidates if choice.scenarios else names, mode=mode, provider=provider)
        explicit = {s.name for s in scenarios if s.selected_by([*names, *choice.scenarios])}
        for scenario, scenario_mode in one.runs:
            if scenario.name not in candidates:
                continue
            why = scenario.why_not_as(choice.pair, scenario_mode, provider)
            if why is not None:
                if scenario.name in explicit and (names or choice.scenarios):
                    raise ValueError(why)
                if why not in selection.skipped:
                    selection.skipped.append(why)
                continue
            identity = (scenario.name, scenario_mode, tuple(choice.pair))
            if identity not in seen:
                seen.add(identity)
                selection.runs.append((replace(scenario, pair=tuple(choice.pair)), scenario_mode))  # type: ignore[arg-type]
        selection.skipped += [why for why in one.skipped if why not in selection.skipped]
    return selection


def _select(scenarios: Sequence[Scenario], *, names: Sequence[str], mode: str | None, provider: str) -> Selection:
    """:func:`select` for one pair, before the pair is considered."""
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
