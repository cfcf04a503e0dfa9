"""The scripted model's decisions: scenario rules evaluated against one request body.

Pure functions over data, no I/O beyond loading the scenario file: a
`ModelScript` maps an agent and a Responses request body (as Codex sent it)
to a `Decision` — the rule that matched, the output items to stream and an
optional hold — or to `None` when no rule matches. Nothing outside the
request body is consulted, so whatever the model "knows" reached it through
Codex.

Rule format: see `contracts/scripted-model-rules.schema.json` and
`scenarios/README.md`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import string
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from peerwire.schema_pattern import validator_class

from harness.evidence.envelope_grammar import type_header
from harness.evidence.responses import content_text, json_objects
from harness.resources import contract_file

SCHEMA_PATH = contract_file("scripted-model-rules.schema.json")

_ENVELOPE_TYPE = re.compile(rf"^{re.escape(type_header())}:[ \t]*(\S+)", re.MULTILINE)


class ScenarioError(ValueError):
    """A scenario file that does not load: TOML syntax, schema or rule consistency.

    The message names the file and what is wrong; `problems` lists each one.
    """

    def __init__(self, source: str, problems: Sequence[str]):
        super().__init__(f"{source}: " + "; ".join(problems))
        self.source = source
        self.problems = list(problems)


# -- the input as the model sees it -------------------------------------------


@dataclass(frozen=True)
class InputItem:
    """One `input` item reduced to what matchers look at."""

    kind: str  # message (any non-assistant role) | assistant_text | tool_call | tool_output | other
    text: str
    role: str | None = None
    phase: str | None = None
    tool: str | None = None
    namespace: str | None = None


def read_input(body: Mapping[str, Any]) -> list[InputItem]:
    """The request's `input` items in order, each with its text and, for tool
    outputs, the tool resolved through the `function_call` with the same
    `call_id` (a `function_call_output` carries no tool name of its own)."""
    raw_items = body.get("input")
    if not isinstance(raw_items, list):
        return []
    calls: dict[str, tuple[str | None, str | None]] = {}
    for raw in raw_items:
        if isinstance(raw, Mapping) and raw.get("type") == "function_call":
            calls[str(raw.get("call_id"))] = (raw.get("name"), raw.get("namespace"))
    items = []
    for raw in raw_items:
        if not isinstance(raw, Mapping):
            continue
        kind = raw.get("type")
        if kind == "message":
            role = raw.get("role")
            item_kind = "assistant_text" if role == "assistant" else "message"
            items.append(
                InputItem(item_kind, content_text(raw.get("content")), role=role, phase=raw.get("phase"))
            )
        elif kind == "agent_message":
            # Another agent's mail: an envelope can match it, user_text cannot (it has no user role).
            items.append(InputItem("message", content_text(raw.get("content")), role="agent"))
        elif kind == "function_call":
            items.append(
                InputItem(
                    "tool_call",
                    _arguments_text(raw.get("arguments")),
                    tool=raw.get("name"),
                    namespace=raw.get("namespace"),
                )
            )
        elif kind == "function_call_output":
            tool, namespace = calls.get(str(raw.get("call_id")), (None, None))
            items.append(
                InputItem("tool_output", content_text(raw.get("output")), tool=tool, namespace=namespace)
            )
        else:
            items.append(InputItem("other", ""))
    return items


def _arguments_text(arguments: Any) -> str:
    # Re-encode so non-ASCII text reads as itself whatever escaping the sender used.
    if isinstance(arguments, str):
        try:
            return json.dumps(json.loads(arguments), ensure_ascii=False)
        except ValueError:
            return arguments
    return json.dumps(arguments, ensure_ascii=False)


_SELECT = re.compile(r"^(?P<name>[^\[\]=]*)\[(?P<field>[^\[\]=]+)=(?P<value>[^\[\]]*)\]$")
"""A path segment ``name[field=value]``: the first element of the list at ``name`` (or of the current list,
when ``name`` is empty) whose ``field`` equals ``value``."""


def _lookup(value: Any, path: str, variables: Mapping[str, str] | None = None) -> tuple[bool, Any]:
    """The value at a dotted ``path``: keys, list indices, and selectors ``list[field=value]`` (``value`` may
    name variables captured by earlier matchers: ``records[request_id=${asked}].body``)."""
    for key in path.split("."):
        select = _SELECT.fullmatch(key)
        if select is not None:
            if select["name"]:
                if not isinstance(value, Mapping) or select["name"] not in value:
                    return False, None
                value = value[select["name"]]
            wanted = string.Template(select["value"]).safe_substitute(variables or {})
            value = next((element for element in value if isinstance(element, Mapping)
                          and _as_text(element.get(select["field"])) == wanted), _MISSING) \
                if isinstance(value, list) else _MISSING
            if value is _MISSING:
                return False, None
        elif isinstance(value, Mapping) and key in value:
            value = value[key]
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            return False, None
    return True, value


_MISSING = object()


def _path_variables(path: str) -> set[str]:
    """Variables a path's selectors use (which earlier matchers must capture)."""
    return set().union(*(_placeholders(select["value"]) for key in path.split(".")
                         if (select := _SELECT.fullmatch(key)) is not None))


# -- rules -----------------------------------------------------------------


@dataclass(frozen=True)
class Matcher:
    """One condition on a single input item (see the schema's `matcher`)."""

    kind: str
    contains: tuple[str, ...] = ()
    pattern: re.Pattern[str] | None = None
    last: bool = False
    latest: bool = False
    envelope_type: str | None = None
    phase: str | None = None
    tool: str | None = None
    namespace: str | None = None
    json_paths: Mapping[str, str] = field(default_factory=dict)

    @property
    def variables(self) -> set[str]:
        names = set(self.json_paths)
        if self.pattern is not None:
            names.update(self.pattern.groupindex)
        return names

    @property
    def uses(self) -> set[str]:
        """Variables its JSON paths' selectors need from earlier matchers."""
        return set().union(*(_path_variables(path) for path in self.json_paths.values()))

    def find(self, items: Sequence[InputItem], known: Mapping[str, str] | None = None) -> dict[str, str] | None:
        """Captures of the most recent item that satisfies this matcher, or
        None when no item does. ``known``: what earlier matchers captured."""
        if self.latest:
            # Only what the agent did last: the newest item of this kind,
            # whatever was injected after it.
            newest = next((item for item in reversed(items) if item.kind == self.kind), None)
            return self._captures(newest, is_last=newest is items[-1], known=known) if newest is not None else None
        for item in reversed(items):
            captures = self._captures(item, is_last=item is items[-1], known=known)
            if captures is not None:
                return captures
        return None

    def _captures(self, item: InputItem, *, is_last: bool, known: Mapping[str, str] | None = None
                  ) -> dict[str, str] | None:
        if self.last and not is_last:
            return None
        if not self._selects(item):
            return None
        if not all(needle in item.text for needle in self.contains):
            return None
        captures: dict[str, str] = {}
        if self.pattern is not None:
            found = self.pattern.search(item.text)
            if found is None:
                return None
            captures.update({name: value for name, value in found.groupdict().items() if value is not None})
        if self.json_paths:
            values = _first_complete(json_objects(item.text), self.json_paths, known)
            if values is None:
                return None
            captures.update(values)
        return captures

    def _selects(self, item: InputItem) -> bool:
        if self.kind == "user_text":
            return item.kind == "message" and item.role == "user"
        if self.kind == "envelope":
            found = _ENVELOPE_TYPE.search(item.text) if item.kind == "message" else None
            return found is not None and self.envelope_type in (None, found.group(1))
        if self.kind == "assistant_text":
            return item.kind == "assistant_text" and self.phase in (None, item.phase)
        # tool_call / tool_output
        return item.kind == self.kind and item.tool == self.tool and self.namespace in (None, item.namespace)


def _first_complete(objects: Iterator[Any], paths: Mapping[str, str],
                    known: Mapping[str, str] | None = None) -> dict[str, str] | None:
    for value in objects:
        found = {name: _lookup(value, path, known) for name, path in paths.items()}
        if all(ok for ok, _ in found.values()):
            return {name: _as_text(captured) for name, (_, captured) in found.items()}
    return None


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True)
class Rule:
    """One scenario rule of one agent."""

    id: str
    when: tuple[Matcher, ...]
    unless: tuple[Matcher, ...]
    emit: tuple[Mapping[str, Any], ...]
    hold: str | None = None

    def captures(self, items: Sequence[InputItem]) -> dict[str, str] | None:
        """Template variables if this rule applies to `items`, else None."""
        captures: dict[str, str] = {}
        for matcher in self.when:
            found = matcher.find(items, captures)
            if found is None:
                return None
            captures.update(found)
        if any(matcher.find(items, captures) is not None for matcher in self.unless):
            return None
        return captures


@dataclass(frozen=True)
class Decision:
    """What the scripted model answers to one request."""

    rule_id: str
    response_id: str
    items: list[dict[str, Any]]
    hold: str | None
    captures: dict[str, str]


def namespaces(rules: Mapping[str, Sequence[Rule]]) -> set[str]:
    """Every tool namespace the rules match or call (``mcp__peerwire``...)."""
    found: set[str] = set()
    for agent_rules in rules.values():
        for rule in agent_rules:
            found.update(m.namespace for m in (*rule.when, *rule.unless) if m.namespace)
            found.update(spec["function_call"]["namespace"] for spec in rule.emit
                         if "function_call" in spec and spec["function_call"].get("namespace"))
    return found


@dataclass(frozen=True)
class ModelScript:
    """All agents' rules of one scenario."""

    name: str
    rules: Mapping[str, tuple[Rule, ...]]
    holds: frozenset[str]

    @property
    def agents(self) -> list[str]:
        return list(self.rules)

    def decide(self, agent: str, body: Mapping[str, Any]) -> Decision | None:
        """The first rule of `agent` that applies to `body`, rendered; None for
        an unknown agent or when no rule applies."""
        items = read_input(body)
        for rule in self.rules.get(agent, ()):
            captures = rule.captures(items)
            if captures is None:
                continue
            variables = {"agent": agent, **captures}
            seed = f"{body.get('prompt_cache_key', '')}|{len(items)}|{agent}|{rule.id}"
            rendered = [_render_output(spec, variables, f"{seed}|{n}") for n, spec in enumerate(rule.emit)]
            return Decision(rule.id, "resp_" + _digest(seed), rendered, rule.hold, captures)
        return None


def _render_output(spec: Mapping[str, Any], variables: Mapping[str, str], seed: str) -> dict[str, Any]:
    if "message" in spec:
        message = spec["message"]
        item: dict[str, Any] = {
            "type": "message",
            "role": "assistant",
            "id": "msg_" + _digest(seed),
            "content": [{"type": "output_text", "text": _fill(message["text"], variables)}],
        }
        if "phase" in message:
            item["phase"] = message["phase"]
        return item
    call = spec["function_call"]
    item = {"type": "function_call", "id": "fc_" + _digest(seed), "name": call["name"]}
    if "namespace" in call:
        item["namespace"] = call["namespace"]
    item["arguments"] = json.dumps(_fill(call.get("arguments", {}), variables), ensure_ascii=False)
    # A stable id unique within a thread: the thread (prompt_cache_key) and the
    # input length only grow together, so no two answers in a thread share it.
    item["call_id"] = _fill(call["call_id"], variables) if "call_id" in call else "call_" + _digest(seed)
    if "encrypted_function_args" in call:  # absent, empty and populated are three different calls
        item["encrypted_function_args"] = list(call["encrypted_function_args"])
    return item


def _digest(seed: str) -> str:
    return hashlib.sha256(seed.encode("utf-8")).hexdigest()[:24]


def _fill(value: Any, variables: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return string.Template(value).substitute(variables)
    if isinstance(value, Mapping):
        return {key: _fill(inner, variables) for key, inner in value.items()}
    if isinstance(value, list):
        return [_fill(inner, variables) for inner in value]
    return value


def _placeholders(value: Any) -> set[str]:
    if isinstance(value, str):
        template = string.Template(value)
        if not template.is_valid():
            raise ValueError(f"invalid template {value!r} (use $$ for a literal $)")
        return set(template.get_identifiers())
    if isinstance(value, Mapping):
        return set().union(*(_placeholders(inner) for inner in value.values()))
    if isinstance(value, list):
        return set().union(*(_placeholders(inner) for inner in value))
    return set()


# -- loading ---------------------------------------------------------------


def load_script(path: str | Path) -> ModelScript:
    """Load and validate a scenario file's model rules.

    Raises `ScenarioError` for invalid TOML, a schema violation, a bad regex,
    a duplicate rule id within an agent, or a template variable that the
    rule's `when` matchers do not capture.
    """
    path = Path(path)
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise ScenarioError(str(path), [f"invalid TOML: {error}"]) from error
    return script_from_document(document, source=str(path))


def script_from_document(document: Mapping[str, Any], *, source: str = "<scenario>") -> ModelScript:
    """Like `load_script` for an already parsed document."""
    validator = validator_class()(_schema())
    errors = sorted(validator.iter_errors(document), key=lambda error: list(error.absolute_path))
    if errors:
        raise ScenarioError(
            source,
            [f"{'/'.join(map(str, error.absolute_path)) or '(top)'}: {error.message}" for error in errors],
        )
    problems: list[str] = []
    rules: dict[str, tuple[Rule, ...]] = {}
    holds: set[str] = set()
    for agent, specs in document["rules"].items():
        seen: set[str] = set()
        compiled = []
        for spec in specs:
            where = f"rules.{agent}.{spec['id']}"
            if spec["id"] in seen:
                problems.append(f"{where}: duplicate rule id")
            seen.add(spec["id"])
            try:
                rule = _compile_rule(spec)
            except (re.error, ValueError) as error:
                problems.append(f"{where}: {error}")
                continue
            available = {"agent"}.union(*(matcher.variables for matcher in rule.when))
            try:
                for n, matcher in enumerate((*rule.when, *rule.unless)):
                    earlier = set().union(*(m.variables for m in rule.when[:n]))
                    if missing := sorted(matcher.uses - earlier):
                        problems.append(f"{where}: a json path selects by variables no earlier `when` matcher "
                                        f"captures: {', '.join(missing)}")
            except ValueError as error:
                problems.append(f"{where}: {error}")
                continue
            try:
                used = _placeholders([dict(output) for output in rule.emit])
            except ValueError as error:
                problems.append(f"{where}: {error}")
                continue
            if missing := sorted(used - available):
                problems.append(f"{where}: template variables not captured by `when`: {', '.join(missing)}")
            if rule.hold:
                holds.add(rule.hold)
            compiled.append(rule)
        rules[agent] = tuple(compiled)
    if problems:
        raise ScenarioError(source, problems)
    name = document.get("scenario", {}).get("name", Path(source).stem)
    return ModelScript(name=name, rules=rules, holds=frozenset(holds))


def _compile_rule(spec: Mapping[str, Any]) -> Rule:
    return Rule(
        id=spec["id"],
        when=tuple(_compile_matcher(m) for m in spec.get("when", ())),
        unless=tuple(_compile_matcher(m) for m in spec.get("unless", ())),
        emit=tuple(spec["emit"]),
        hold=spec.get("hold"),
    )


def _compile_matcher(spec: Mapping[str, Any]) -> Matcher:
    ((kind, body),) = spec.items()
    contains = body.get("contains", ())
    return Matcher(
        kind=kind,
        contains=(contains,) if isinstance(contains, str) else tuple(contains),
        pattern=re.compile(body["matches"]) if "matches" in body else None,
        last=body.get("last", False),
        latest=body.get("latest", False),
        envelope_type=body.get("type"),
        phase=body.get("phase"),
        tool=body.get("tool"),
        namespace=body.get("namespace"),
        json_paths=dict(body.get("json", {})),
    )


@functools.cache
def _schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
