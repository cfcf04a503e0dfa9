"""The persona matrix as a covering design: the persona runs every change needs, derived from the data.

A persona (``scenarios/personas/*.toml``) names behaviours of the scripted model
(:data:`harness.model.personas.BEHAVIOURS`), and each behaviour rewrites one kind of decision a scenario's
rules make: a final answer to a delivered task, a ``wait_agent`` call, a sending call, ... (:data:`VARIES`).
In a scenario whose rules never make that kind of decision the persona has nothing to rewrite: its run is
the scenario's own run again, which ``tests/acceptance/test_scenarios.py`` already makes. So the persona
runs that can show something are the *exercising* ones (:func:`exercises`), and the design
(:func:`covering_design`) picks few of them such that

* every persona meets every kind of decision it varies, in some scenario whose rules make it, and
* every scenario-mode a persona applies to runs under at least one persona that varies something in it.

``make test`` runs the design; ``make personas`` and ``make full`` run the whole matrix (every persona with
every scenario-mode it applies to), which also finds a fault that shows only in one combination.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from harness.acceptance.scenario import OPT_IN_MODES, Scenario
from harness.model.personas import Persona, applies
from harness.model.rules import Rule
from harness.names import MESSAGING_NAMESPACE


def _calls(rule: Rule, *names: str) -> bool:
    return any((out.get("function_call") or {}).get("name") in names
               and (out.get("function_call") or {}).get("namespace", MESSAGING_NAMESPACE) == MESSAGING_NAMESPACE
               for out in rule.emit)


def _answers(rule: Rule) -> bool:
    return any("message" in out and out["message"].get("phase", "final_answer") == "final_answer"
               for out in rule.emit)


def _on_task(rule: Rule) -> bool:
    return any(m.kind == "envelope" and m.envelope_type == "NEW_TASK" for m in rule.when)


def _opens_turn(rule: Rule, kinds: tuple[str, ...]) -> bool:
    """Whether the rule answers what just started a turn (the newest input item is a prompt or a delivery)."""
    return any(m.kind in kinds and m.last for m in rule.when)


DECISIONS: Mapping[str, Callable[[Rule], bool]] = {
    "answers a delivered task": lambda r: _on_task(r) and _answers(r),
    "answers without a task": lambda r: _answers(r) and not _on_task(r),
    "waits with wait_agent": lambda r: _calls(r, "wait_agent"),
    "receives": lambda r: _calls(r, "receive_messages"),
    "sends": lambda r: _calls(r, "send_message", "followup_task"),
    "assigns a task": lambda r: _calls(r, "followup_task"),
    "opens a turn with a call": lambda r: _opens_turn(r, ("user_text", "envelope")) and _calls(
        r, "send_message", "followup_task", "receive_messages", "wait_agent", "interrupt_agent", "list_agents",
        "reply"),
    "acts on a prompt": lambda r: _opens_turn(r, ("user_text",)) and bool(
        [out for out in r.emit if "function_call" in out]),
}
"""The kinds of decision a scenario's rules make, each a predicate on one rule."""

VARIES: Mapping[str, tuple[str, ...]] = {
    "explicit_reply": ("answers a delivered task",),
    "blocked": ("answers a delivered task",),
    "paraphrase": ("answers without a task",),
    "receive_to_wait": ("waits with wait_agent",),
    "injected_context": ("receives",),
    "list_agents_first": ("opens a turn with a call",),
    "tool_error_retry": ("sends",),
    "claims_without_tool": ("acts on a prompt",),
    "answers_before_reply": ("assigns a task",),
    "replies_twice": ("answers a delivered task",),
    "wrong_agent": ("assigns a task",),
}
"""What each behaviour of :data:`harness.model.personas.BEHAVIOURS` rewrites: the decisions it varies."""


@dataclass(frozen=True)
class PersonaRun:
    """One cell of the matrix: a scenario in one mode under one persona."""

    scenario: Scenario
    mode: str
    persona: Persona

    @property
    def id(self) -> str:
        return f"{self.scenario.key(self.mode)}-{self.persona.name}"


def decisions(scenario: Scenario) -> frozenset[str]:
    """The kinds of decision (:data:`DECISIONS`) any rule of the scenario makes."""
    rules = [rule for agent_rules in scenario.script.rules.values() for rule in agent_rules]
    return frozenset(kind for kind, made_by in DECISIONS.items() if any(made_by(rule) for rule in rules))


def varied(persona: Persona) -> frozenset[str]:
    """The kinds of decision the persona's behaviours rewrite."""
    return frozenset(kind for behaviour in persona.behaviours for kind in VARIES[behaviour])


def matrix(personas: Sequence[Persona], scenarios: Sequence[Scenario]) -> list[PersonaRun]:
    """The full matrix: every persona with every scenario-mode it applies to (the modes a run selects by
    default: an opt-in mode such as a watched TUI adds nothing a persona could show)."""
    return [PersonaRun(scenario, mode, persona) for persona in personas for scenario in scenarios
            for mode in scenario.modes if mode not in OPT_IN_MODES
            and applies(persona, scenario.name, scenario.profile)]


def exercises(run: PersonaRun) -> frozenset[str]:
    """What of the persona the run exercises: the kinds of decision it varies that the scenario makes."""
    return varied(run.persona) & decisions(run.scenario)


def requirements(personas: Sequence[Persona], scenarios: Sequence[Scenario]) -> frozenset[tuple[str, ...]]:
    """What the design must cover: ``("persona", name, kind)`` for every kind of decision a persona varies
    that some scenario it applies to makes, and ``("scenario", key)`` for every scenario-mode of the matrix
    that some persona exercises."""
    return frozenset(need for run in matrix(personas, scenarios) for need in _covers(run))


def covering_design(personas: Sequence[Persona], scenarios: Sequence[Scenario]) -> list[PersonaRun]:
    """A small set of exercising runs covering every one of :func:`requirements`, in matrix order.

    Greedy set cover, deterministic: each step takes the run that covers the most requirements not yet
    covered; on a tie, the one whose persona has run least so far (the scenarios meet different personas),
    then the earliest in matrix order.
    """
    candidates = [run for run in matrix(personas, scenarios) if exercises(run)]
    missing = set(requirements(personas, scenarios))
    chosen: list[PersonaRun] = []
    while missing:
        runs_of = Counter(run.persona.name for run in chosen)
        best = max(candidates, key=lambda run: (len(_covers(run) & missing), -runs_of[run.persona.name]))
        chosen.append(best)
        missing -= _covers(best)
    order = {run.id: n for n, run in enumerate(candidates)}
    return sorted(chosen, key=lambda run: order[run.id])


def _covers(run: PersonaRun) -> set[tuple[str, ...]]:
    exercised = exercises(run)
    if not exercised:
        return set()
    return {("scenario", run.scenario.key(run.mode)), *(("persona", run.persona.name, kind) for kind in exercised)}
