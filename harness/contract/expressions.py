"""Value expressions and paths in case data.

A case's arguments and expected values are JSON in which an object whose only
keys are one ``$operator`` (plus its named operands) is an expression:

``{"$actor": "bob"}``                      bob's registered name
``{"$actor": "bob", "field": "agent_id"}``   also ``name``, ``alias`` (the first) and ``ref``
                                           (``{"agent_id", "name"}`` as records show it)
``{"$name": "nobody"}``                    a name unique to this run that nobody registered
``{"$from": "send.request_id"}``           a value from an earlier step's result
``{"$value": "body"}``                     one of the case's ``values``
``{"$repeat": "é", "times": 32768}``       a string repeated
``{"$upper": EXPR}``                       a string in upper case
``{"$concat": [EXPR, ...]}``               strings joined

A path is dotted: ``records.0.body``; ``*`` maps over a list
(``records.*.record_id``); the empty path is the whole value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping

from harness.json_values import members, walk

OPERATORS: Mapping[str, frozenset[str]] = {
    "$actor": frozenset({"field"}),
    "$name": frozenset(),
    "$from": frozenset(),
    "$value": frozenset(),
    "$repeat": frozenset({"times"}),
    "$upper": frozenset(),
    "$concat": frozenset(),
}
ACTOR_FIELDS = ("name", "agent_id", "alias", "ref")


class ExpressionError(ValueError):
    """An expression that cannot be evaluated (unknown operator, actor, step or path)."""


class PathError(LookupError):
    """A path that does not exist in a value."""


@dataclass(frozen=True)
class ActorIdentity:
    """What a case may say about an actor: its registered name, id and aliases."""

    name: str
    agent_id: str
    aliases: tuple[str, ...] = ()


@dataclass
class Scope:
    """Everything an expression can refer to while a case runs."""

    actors: Mapping[str, ActorIdentity]
    values: Mapping[str, Any]
    results: Mapping[str, Any]
    unique_name: Callable[[str], str]


def operator_of(value: Any) -> str | None:
    """The operator if ``value`` is an expression object, else ``None``."""
    if isinstance(value, dict):
        ops = [k for k in value if k.startswith("$")]
        if len(ops) == 1:
            return ops[0]
    return None


def evaluate(value: Any, scope: Scope) -> Any:
    """``value`` with every expression in it replaced by what it denotes."""
    op = operator_of(value)
    if op is not None:
        return _apply(op, value, scope)
    if isinstance(value, dict):
        return {k: evaluate(v, scope) for k, v in value.items()}
    if isinstance(value, list):
        return [evaluate(v, scope) for v in value]
    return value


def _apply(op: str, expr: dict, scope: Scope) -> Any:
    operand = expr[op]
    if op == "$actor":
        actor = scope.actors.get(operand)
        if actor is None:
            raise ExpressionError(f"no actor {operand!r}")
        field = expr.get("field", "name")
        if field == "ref":
            return {"agent_id": actor.agent_id, "name": actor.name}
        if field == "alias":
            if not actor.aliases:
                raise ExpressionError(f"actor {operand!r} has no alias")
            return actor.aliases[0]
        return getattr(actor, field)
    if op == "$name":
        return scope.unique_name(operand)
    if op == "$from":
        step, _, path = operand.partition(".")
        if step not in scope.results:
            raise ExpressionError(f"$from {operand!r}: step {step!r} has no result (yet)")
        try:
            return lookup(scope.results[step], path)
        except PathError as exc:
            raise ExpressionError(f"$from {operand!r}: {exc}") from None
    if op == "$value":
        if operand not in scope.values:
            raise ExpressionError(f"no value {operand!r}")
        return evaluate(scope.values[operand], scope)
    if op == "$repeat":
        return evaluate(operand, scope) * int(expr["times"])
    if op == "$upper":
        return str(evaluate(operand, scope)).upper()
    if op == "$concat":
        return "".join(str(evaluate(part, scope)) for part in operand)
    raise ExpressionError(f"unknown operator {op}")


def lookup(value: Any, path: str) -> Any:
    """The part of ``value`` at ``path``; :class:`PathError` if it is not there."""
    if path == "":
        return value
    head, _, rest = path.partition(".")
    if head == "*":
        if not isinstance(value, list):
            raise PathError(f"'*' needs a list, found {type(value).__name__}")
        return [lookup(item, rest) for item in value]
    if isinstance(value, dict):
        if head not in value:
            raise PathError(f"no key {head!r} (keys: {', '.join(sorted(map(str, value))) or 'none'})")
        return lookup(value[head], rest)
    if isinstance(value, list):
        try:
            index = int(head)
        except ValueError:
            raise PathError(f"{head!r} is not an index into a list") from None
        if not -len(value) <= index < len(value):
            raise PathError(f"index {index} is out of range (length {len(value)})")
        return lookup(value[index], rest)
    raise PathError(f"cannot take {head!r} of a {type(value).__name__}")


def expressions_in(value: Any) -> Iterator[tuple[str, dict]]:
    """Every (operator, expression) inside ``value``, nested ones included (only operands are entered)."""
    for _, node in walk(value, children=_operands):
        op = operator_of(node)
        if op is not None:
            yield op, node


def _operands(value: Any) -> Iterable[tuple[str | int, Any]]:
    op = operator_of(value)
    if op is None:
        return members(value)
    return [(key, operand) for key, operand in value.items() if key == op or key in OPERATORS.get(op, ())]


def static_problems(value: Any, *, actors: Mapping[str, Any], values: Mapping[str, Any],
                    earlier_steps: set[str]) -> list[str]:
    """What is wrong with the expressions in ``value`` before anything runs."""
    problems = []
    for op, expr in expressions_in(value):
        if op not in OPERATORS:
            problems.append(f"unknown operator {op}")
            continue
        extra = set(expr) - {op} - OPERATORS[op]
        if extra:
            problems.append(f"{op} takes no {', '.join(sorted(extra))}")
        operand = expr[op]
        if op == "$actor":
            if operand not in actors:
                problems.append(f"$actor {operand!r} is not one of the case's actors")
            if expr.get("field", "name") not in ACTOR_FIELDS:
                problems.append(f"$actor field must be one of {', '.join(ACTOR_FIELDS)}")
        elif op == "$from":
            if not isinstance(operand, str) or operand.partition(".")[0] not in earlier_steps:
                problems.append(f"$from {operand!r} does not start with an earlier step's id")
        elif op == "$value" and operand not in values:
            problems.append(f"$value {operand!r} is not in the case's values")
        elif op == "$repeat" and not isinstance(expr.get("times"), int):
            problems.append("$repeat needs an integer times")
        elif op in ("$name",) and not isinstance(operand, str):
            problems.append(f"{op} takes a string")
        elif op == "$concat" and not isinstance(operand, list):
            problems.append("$concat takes a list")
    return problems
