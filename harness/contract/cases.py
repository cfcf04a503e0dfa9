"""Contract cases as data: loading, validation and the ids they run under.

A case file (``contracts/cases/NAME.json``) is validated against
``contracts/case.schema.json`` and then statically: unique names and step ids,
known actors and requirements, await steps that collect exactly the background
calls, expressions that refer to what exists, and the file's tool profile
(``"profile"``, default ``messaging``): its cases call only that profile's
tools and name only its requirements, and only a ``collab`` case has a tree
root actor. :func:`load_cases` reports every problem of every file at once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, Mapping, Union

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from .expressions import static_problems
from .layout import CASE_SCHEMA_PATH, CASES_DIR
from .manifest import FRESH_HOME, Manifest, manifest, profile_of
from .schemas import PROFILE_TOOLS, error_codes

MAILBOX_CALLS = frozenset({"receive_messages", "wait_agent", "reply"})
"""Calls whose answer depends on the caller's own mailbox."""
OPERATORS = ("equals", "not_equals", "contains", "lacks", "matches", "length", "absent", "increasing",
             "excludes_text")
CONTROL_ACTIONS = ("crash", "make_unavailable", "make_available")


class CaseError(ValueError):
    """Case data that does not load; the message lists every problem."""


@dataclass(frozen=True)
class ActorSpec:
    key: str
    stem: str
    aliases: tuple[str, ...] = ()
    registered: bool = True
    collab_root: bool = False


@dataclass(frozen=True)
class Outcome:
    """What a call step or an await step expects of a response."""

    requirement: str | None = None
    error: str | None = None
    error_mentions: tuple[str, ...] = ()
    within_ms: int | None = None
    not_before_ms: int | None = None
    expect: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class CallStep:
    id: str
    actor: str
    call: str
    arguments: Mapping[str, Any]
    outcome: Outcome = field(default_factory=Outcome)
    background: bool = False


@dataclass(frozen=True)
class AwaitStep:
    awaited: str
    outcome: Outcome = field(default_factory=Outcome)

    @property
    def id(self) -> str:
        return f"await-{self.awaited}"


@dataclass(frozen=True)
class PendingStep:
    """A background call that must still be waiting ``for_ms`` after this step begins."""

    awaited: str
    for_ms: int
    requirement: str | None = None

    @property
    def id(self) -> str:
        return f"pending-{self.awaited}"


@dataclass(frozen=True)
class ControlStep:
    action: str

    @property
    def id(self) -> str:
        return self.action.replace("_", "-")


Step = Union[CallStep, AwaitStep, PendingStep, ControlStep]


@dataclass(frozen=True)
class Case:
    suite: str
    name: str
    requirement: str
    description: str
    actors: Mapping[str, ActorSpec]
    values: Mapping[str, Any]
    steps: tuple[Step, ...]
    interop: bool = False
    profile: str = "messaging"

    @property
    def id(self) -> str:
        """``suite/name``: how baselines and reports name the case."""
        return f"{self.suite}/{self.name}"

    @property
    def test_id(self) -> str:
        """The pytest id: ``requirement > suite/name``."""
        return f"{self.requirement} > {self.id}"

    @property
    def needs_own_app(self) -> bool:
        """A case that stops or restarts the app, or builds a collaboration tree, cannot share it.

        A home holds one tree (one ``/root``) whose capacity all its children
        count against, so every collab case gets an app of its own.
        """
        return self.profile == "collab" or any(isinstance(s, ControlStep) for s in self.steps)

    @property
    def shareable_actors(self) -> frozenset[str]:
        """The actors any registered caller can play, so a run may give them a session it shares between tests.

        In a messaging case that keeps the app, that is a registered actor with no aliases and a name no other
        actor shares, whom nothing addresses (no ``$actor`` of it in any step's arguments or the case's values)
        and who reads no mailbox (it calls no receive_messages, wait_agent or reply): what it does depends on
        nothing of its own but being a caller, and nothing another test does reaches it. Expectations may still
        name it: they compare with whichever caller played it.
        """
        if self.profile != "messaging" or any(isinstance(s, ControlStep) for s in self.steps):
            return frozenset()
        addressed = _actors_in(self.values)
        readers = set()
        for step in self.steps:
            if isinstance(step, CallStep):
                addressed |= _actors_in(step.arguments)
                if step.call in MAILBOX_CALLS:
                    readers.add(step.actor)
        stems = [a.stem for a in self.actors.values()]
        callers = {s.actor for s in self.steps if isinstance(s, CallStep)}
        return frozenset(key for key in callers
                         if (actor := self.actors[key]).registered and not actor.aliases and not actor.collab_root
                         and stems.count(actor.stem) == 1 and key not in addressed and key not in readers)

    @property
    def real_time_ms(self) -> int:
        """The longest wait a step must see last in real time (its ``not_before_ms``, a pending step's
        ``for_ms``); 0 when none."""
        return max((s.for_ms if isinstance(s, PendingStep) else s.outcome.not_before_ms or 0
                    for s in self.steps if not isinstance(s, ControlStep)), default=0)

    def requirements(self) -> set[str]:
        """The primary requirement and every one a step or expectation names."""
        out = {self.requirement}
        for step in self.steps:
            if isinstance(step, PendingStep) and step.requirement:
                out.add(step.requirement)
            outcome = getattr(step, "outcome", None)
            if outcome is None:
                continue
            if outcome.requirement:
                out.add(outcome.requirement)
            out.update(e["requirement"] for e in outcome.expect if "requirement" in e)
        return out


def _actors_in(value: Any) -> set[str]:
    """The actors a value's ``$actor`` expressions name."""
    if isinstance(value, Mapping):
        found = {value["$actor"]} if isinstance(value.get("$actor"), str) else set()
        return found.union(*(_actors_in(v) for v in value.values()))
    if isinstance(value, (list, tuple)):
        return set().union(*(_actors_in(v) for v in value))
    return set()


@lru_cache(maxsize=1)
def _schema_validator() -> Draft202012Validator:
    return Draft202012Validator(json.loads(CASE_SCHEMA_PATH.read_text("utf-8")))


def load_cases(directory: Path = CASES_DIR, requirements: Manifest | None = None) -> list[Case]:
    """Every case in ``directory``, in file and case order; :class:`CaseError` lists all problems."""
    requirements = requirements if requirements is not None else manifest()
    problems: list[str] = []
    cases: list[Case] = []
    for path in sorted(directory.glob("*.json")):
        file_problems, file_cases = _load_file(path, requirements)
        problems += [f"{path.name}: {p}" for p in file_problems]
        cases += file_cases
    if not cases and not problems:
        problems.append(f"no case files in {directory.name}/")
    if problems:
        raise CaseError("contract cases do not load:\n  " + "\n  ".join(problems))
    return cases


@lru_cache(maxsize=1)
def all_cases() -> tuple[Case, ...]:
    """The project's cases, loaded once per process."""
    return tuple(load_cases())


def _load_file(path: Path, requirements: Manifest) -> tuple[list[str], list[Case]]:
    try:
        data = json.loads(path.read_text("utf-8"))
    except ValueError as exc:
        return [f"not JSON: {exc}"], []
    schema_errors = sorted(_schema_validator().iter_errors(data), key=lambda e: list(e.absolute_path))
    if schema_errors:
        return [_explain(e) for e in schema_errors], []
    problems: list[str] = []
    cases: list[Case] = []
    seen: set[str] = set()
    profile = data.get("profile", "messaging")
    for raw in data["cases"]:
        name = raw["name"]
        if name in seen:
            problems.append(f"case {name!r} appears twice")
        seen.add(name)
        case_problems, case = _build_case(path.stem, raw, requirements, profile)
        problems += [f"{name}: {p}" for p in case_problems]
        if case is not None:
            cases.append(case)
    return problems, cases


def _explain(error: ValidationError) -> str:
    """The most specific reason inside a oneOf/anyOf failure, with its path.

    Of the alternatives, the deepest complaint wins, and a complaint about
    something present beats one about something missing (which usually only
    says the data was meant as another alternative).
    """
    while error.context:
        error = max(error.context, key=lambda e: (len(e.absolute_path), e.validator != "required"))
    return f"{'/'.join(map(str, error.absolute_path)) or '(root)'}: {error.message[:300]}"


def _build_case(suite: str, raw: Mapping[str, Any], requirements: Manifest,
                profile: str = "messaging") -> tuple[list[str], Case | None]:
    problems: list[str] = []
    actors = {key: ActorSpec(key=key, stem=spec.get("name", key), aliases=tuple(spec.get("aliases", ())),
                             registered=spec.get("registered", True), collab_root=spec.get("collab_root", False))
              for key, spec in raw["actors"].items()}
    tools = PROFILE_TOOLS[profile][1]
    values = raw.get("values", {})
    steps: list[Step] = []
    seen_steps: set[str] = set()
    background: set[str] = set()
    for index, rs in enumerate(raw["steps"], start=1):
        where = f"step {index}"
        if "control" in rs:
            steps.append(ControlStep(rs["control"]))
            continue
        if "pending" in rs:
            if rs["pending"] not in background:
                problems.append(f"{where}: pending {rs['pending']!r} is not an earlier background step still running")
            if rs.get("requirement") is not None and rs["requirement"] not in requirements:
                problems.append(f"{where}: requirement {rs['requirement']!r} is not in the manifest")
            steps.append(PendingStep(rs["pending"], rs["for_ms"], rs.get("requirement")))
            continue
        outcome = Outcome(requirement=rs.get("requirement"), error=rs.get("error"),
                          error_mentions=tuple(rs.get("error_mentions", ())), within_ms=rs.get("within_ms"),
                          not_before_ms=rs.get("not_before_ms"), expect=tuple(rs.get("expect", ())))
        if "await" in rs:
            awaited = rs["await"]
            if awaited not in background:
                problems.append(f"{where}: await {awaited!r} is not an earlier background step still running")
            background.discard(awaited)
            step: Step = AwaitStep(awaited=awaited, outcome=outcome)
        else:
            sid = rs["id"]
            if sid in seen_steps:
                problems.append(f"{where}: step id {sid!r} is used twice")
            if rs["actor"] not in actors:
                problems.append(f"{where}: actor {rs['actor']!r} is not one of the case's actors")
            if rs["call"] not in tools:
                problems.append(f"{where}: {rs['call']} is not a tool of the {profile} profile")
            problems += [f"{where} arguments: {p}" for p in static_problems(
                rs["arguments"], actors=actors, values=values, earlier_steps=seen_steps)]
            is_background = rs.get("background", False)
            if is_background:
                background.add(sid)
            step = CallStep(id=sid, actor=rs["actor"], call=rs["call"], arguments=rs["arguments"],
                            outcome=outcome, background=is_background)
        own = {step.id} if isinstance(step, CallStep) else set()
        problems += [f"{where}: {p}" for p in _outcome_problems(outcome, requirements, seen_steps | own, actors, values)]
        if isinstance(step, CallStep):
            seen_steps.add(step.id)
        steps.append(step)
    if background:
        problems.append(f"background steps never awaited: {', '.join(sorted(background))}")
    if raw["requirement"] not in requirements:
        problems.append(f"requirement {raw['requirement']!r} is not in the manifest")
    elif any(isinstance(s, ControlStep) for s in steps) and FRESH_HOME not in requirements[raw["requirement"]].needs:
        problems.append(f"it crashes the implementation or makes it unavailable, so its requirement "
                        f"{raw['requirement']!r} needs [\"{FRESH_HOME}\"] (a home of its own) in requirements.toml")
    for key, actor in actors.items():
        if not actor.registered and (actor.aliases or actor.collab_root):
            problems.append(f"actor {key!r} is not registered, so it cannot have aliases or be a tree root")
    roots = [key for key, actor in actors.items() if actor.collab_root]
    if roots and profile != "collab":
        problems.append(f"actor {roots[0]!r} is a collab_root, but this is a {profile} case file")
    if len(roots) > 1:
        problems.append(f"a tree has one root, not {len(roots)} ({', '.join(roots)})")
    problems += [f"values: {p}" for p in static_problems(values, actors=actors, values=values, earlier_steps=set())]
    case = Case(suite=suite, name=raw["name"], requirement=raw["requirement"], description=raw["description"],
                actors=actors, values=values, steps=tuple(steps), interop=raw.get("interop", False), profile=profile)
    foreign = sorted(r for r in case.requirements() if r in requirements and profile_of(r) != profile)
    if foreign:
        problems.append(f"names {', '.join(foreign)}, which belong to another profile than this file's {profile}")
    return problems, case


def _outcome_problems(outcome: Outcome, requirements: Manifest, earlier: set[str],
                      actors: Mapping[str, ActorSpec], values: Mapping[str, Any]) -> Iterator[str]:
    if outcome.requirement and outcome.requirement not in requirements:
        yield f"requirement {outcome.requirement!r} is not in the manifest"
    if outcome.error and outcome.error not in error_codes():
        yield f"error {outcome.error!r} is not a contract error code"
    if outcome.error_mentions and not outcome.error:
        yield "error_mentions without error"
    for expectation in outcome.expect:
        ops = [k for k in OPERATORS if k in expectation]
        if len(ops) != 1:
            yield f"an expectation has {len(ops)} operators ({', '.join(ops) or 'none'}); it needs exactly one"
        req = expectation.get("requirement")
        if req and req not in requirements:
            yield f"requirement {req!r} is not in the manifest"
        for op in ops:
            yield from static_problems(expectation[op], actors=actors, values=values,
                                       earlier_steps=earlier)
