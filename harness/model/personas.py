"""Personas: how differently a real model may go about the same exchange, played by the scripted model.

A scenario's rules are one way to do its job. Real models vary: one calls
``reply`` where the task's envelope says so instead of just ending its turn,
another paraphrases, waits with ``receive_messages`` instead of ``wait_agent``,
answers from a message already in its context, looks the agents up first, or
gets an argument wrong and retries. A persona (``scenarios/personas/*.toml``,
validated by ``contracts/persona.schema.json``) names such behaviours; applied
to any scenario it turns the scenario's own decision for a request into the
persona's, so one persona file covers every scenario. Invalid personas play
faults a contract suite must catch (claiming success without acting,
answering before the reply came, replying twice, tasking the wrong agent) and
name the check that must fail.

Like the rules, a behaviour decides only from the request Codex sent: its
input items, the scenario's decision on that input (or on the input without
the persona's own detour), never a side channel. The persona's own calls carry
``call_id`` s starting with :data:`CALL_PREFIX`, which is how a later request
tells them apart from the scenario's.
"""

from __future__ import annotations

import functools
import hashlib
import json
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from peerwire.schema_pattern import validator_class

from harness.evidence.envelope_grammar import message_type, skim
from harness.evidence.responses import item_text, json_objects
from harness.names import MESSAGING_NAMESPACE
from harness.resources import contract_file, personas

from .rules import Decision, ModelScript

PERSONAS_DIR = personas()
SCHEMA_PATH = contract_file("persona.schema.json")
CALL_PREFIX = "call_persona_"
NAMESPACE = MESSAGING_NAMESPACE
RECEIVE_TIMEOUT_MS = 30000


class PersonaError(ValueError):
    """A persona file that is not valid."""


@dataclass(frozen=True)
class Persona:
    name: str
    description: str
    valid: bool
    behaviours: tuple[str, ...]
    params: Mapping[str, Any] = field(default_factory=dict)
    fails: str | None = None
    """An invalid persona: the id of the check its fault must fail."""
    scenarios: tuple[str, ...] = ()
    """Scenarios it is run with in the matrix (empty: every scenario of the messaging profile)."""
    path: Path | None = None


def load_persona(path: str | Path) -> Persona:
    path = Path(path)
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise PersonaError(f"{path}: invalid TOML: {error}") from error
    errors = sorted(validator_class()(_schema()).iter_errors(document), key=lambda e: list(e.path))
    if errors:
        raise PersonaError(f"{path}: " + "; ".join(f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
                                                   for e in errors))
    head = document["persona"]
    unknown = [b for b in head["behaviours"] if b not in BEHAVIOURS]
    if unknown:
        raise PersonaError(f"{path}: unknown behaviours {unknown} (known: {', '.join(sorted(BEHAVIOURS))})")
    if head["valid"] == ("fails" in head):
        raise PersonaError(f"{path}: an invalid persona names the check it fails (fails = ...); a valid one does not")
    return Persona(head["name"], head["description"], head["valid"], tuple(head["behaviours"]),
                   dict(document.get("params") or {}), head.get("fails"), tuple(head.get("scenarios", ())), path)


def discover_personas(directory: Path = PERSONAS_DIR) -> list[Persona]:
    personas = [load_persona(path) for path in sorted(Path(directory).glob("*.toml"))]
    names = [p.name for p in personas]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise PersonaError(f"{directory}: persona names used twice: {duplicates}")
    return personas


def select_personas(names: Sequence[str | None], directory: Path = PERSONAS_DIR) -> list[Persona | None]:
    """``--persona`` values: names, ``all`` (every valid persona) or ``all-invalid``; None keeps the rules."""
    if list(names) == [None]:
        return [None]
    known = {p.name: p for p in discover_personas(directory)}
    chosen: list[Persona | None] = []
    for name in names:
        if name == "all":
            chosen += [p for p in known.values() if p.valid]
        elif name == "all-invalid":
            chosen += [p for p in known.values() if not p.valid]
        elif name in known:
            chosen.append(known[name])
        else:
            raise PersonaError(f"no persona {name!r} (known: all, all-invalid, {', '.join(sorted(known))})")
    return chosen


def applies(persona: Persona | None, scenario: str, profile: str) -> bool:
    """Whether the matrix runs ``persona`` with a scenario: the messaging profile's tools are what personas
    vary (the collaboration tree has its own probe), and an invalid persona only where its fault shows."""
    if persona is None:
        return True
    return profile == "messaging" and (not persona.scenarios or scenario in persona.scenarios)


@functools.cache
def _schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


# -- playing a persona ---------------------------------------------------------------------------

Base = Callable[[Mapping[str, Any]], "Decision | None"]
"""The scenario's decision for a request body (its rules, or the behaviours applied before)."""
Behaviour = Callable[[str, Mapping[str, Any], Base, Mapping[str, Any]], "Decision | None"]


class PersonaScript:
    """A scenario's :class:`ModelScript` played by ``persona`` (None: by the scenario's own rules), which
    also answers from mail delivered into the context when nothing else decides (see
    :func:`answer_from_context`)."""

    def __init__(self, script: ModelScript, persona: Persona | None = None):
        self.script = script
        self.persona = persona
        self.name, self.rules, self.holds = script.name, script.rules, script.holds

    @property
    def agents(self) -> list[str]:
        return self.script.agents

    def decide(self, agent: str, body: Mapping[str, Any]) -> Decision | None:
        decide: Base = functools.partial(self.script.decide, agent)
        for name in self.persona.behaviours if self.persona is not None else ():
            decide = functools.partial(_apply, BEHAVIOURS[name], agent, base=decide, params=self.persona.params)
        return decide(body) or answer_from_context(agent, body, decide)


def _apply(behaviour: Behaviour, agent: str, body: Mapping[str, Any], *, base: Base,
           params: Mapping[str, Any]) -> Decision | None:
    return behaviour(agent, body, base, params)


# -- reading and writing items ------------------------------------------------------------------

def _items(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    raw = body.get("input")
    return [item for item in raw if isinstance(item, dict)] if isinstance(raw, list) else []


def _envelope(item: Mapping[str, Any]) -> tuple[dict[str, str], str] | None:
    """The fields and payload of the envelope an incoming message item carries (read as the contract's grammar
    has it, forgiving what a model would: the checks, not the model, judge the envelope)."""
    if item.get("type") != "message" or item.get("role") == "assistant":
        return None
    return skim(item_text(item))


def _calls(items: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    return {str(item.get("call_id")): item for item in items if item.get("type") == "function_call"}


def _arguments(call: Mapping[str, Any]) -> dict[str, Any]:
    try:
        value = json.loads(call.get("arguments") or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _newest_output(items: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The newest tool output and its call, when the newest item is one."""
    if not items or items[-1].get("type") != "function_call_output":
        return None
    call = _calls(items).get(str(items[-1].get("call_id")))
    return (call, items[-1]) if call is not None else None


def _seed(body: Mapping[str, Any], agent: str, what: str) -> str:
    return hashlib.sha256(f"{body.get('prompt_cache_key', '')}|{len(_items(body))}|{agent}|{what}".encode()
                          ).hexdigest()[:24]


def _call(body: Mapping[str, Any], agent: str, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    seed = _seed(body, agent, name)
    return {"type": "function_call", "id": "fc_" + seed, "name": name, "namespace": NAMESPACE,
            "arguments": json.dumps(dict(arguments), ensure_ascii=False), "call_id": CALL_PREFIX + seed}


def _final(body: Mapping[str, Any], agent: str, text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "id": "msg_" + _seed(body, agent, "final"), "phase": "final_answer",
            "content": [{"type": "output_text", "text": text}]}


def _decision(body: Mapping[str, Any], agent: str, rule: str, items: list[dict[str, Any]]) -> Decision:
    return Decision(f"persona:{rule}", "resp_" + _seed(body, agent, rule), items, None, {})


def _without(body: Mapping[str, Any], call_ids: set[str]) -> dict[str, Any]:
    """``body`` as if the persona's detour (these calls and their outputs) had not happened."""
    return {**body, "input": [item for item in _items(body) if str(item.get("call_id")) not in call_ids]}


def _own(items: Sequence[Mapping[str, Any]]) -> set[str]:
    return {str(item.get("call_id")) for item in items if str(item.get("call_id", "")).startswith(CALL_PREFIX)}


def _finals(decision: Decision | None) -> list[str]:
    """The texts of a decision that only answers (no tool call): its final answer(s)."""
    if decision is None or any(item.get("type") == "function_call" for item in decision.items):
        return []
    return [item_text(item) for item in decision.items if item.get("type") == "message"
            and item.get("phase", "final_answer") == "final_answer"]


def _open_task(items: Sequence[Mapping[str, Any]]) -> str | None:
    """The newest task in the input its recipient has not called reply for yet."""
    replied = {_arguments(call).get("request_id") for call in _calls(items).values() if call.get("name") == "reply"}
    for item in reversed(items):
        parsed = _envelope(item)
        if parsed and parsed[0].get("message_type") == message_type("task"):
            request = parsed[0].get("request_id")
            return request if request not in replied else None
    return None


def _receive_cursor(items: Sequence[Mapping[str, Any]]) -> str | None:
    """The cursor the newest ``receive_messages`` output returned (None before any receive)."""
    calls = _calls(items)
    return next((data["cursor"] for item in reversed(items) if item.get("type") == "function_call_output"
                 and calls.get(str(item.get("call_id")), {}).get("name") == "receive_messages"
                 for data in json_objects(item_text(item)) if isinstance(data.get("cursor"), str)), None)


def _with_calls_replaced(decision: Decision, change: Callable[[dict[str, Any]], dict[str, Any] | None]) -> Decision:
    items = []
    for item in decision.items:
        changed = change(item) if item.get("type") == "function_call" else None
        items.append(changed if changed is not None else item)
    return replace(decision, items=items)


# -- behaviours ---------------------------------------------------------------------------------

def explicit_reply(agent: str, body: Mapping[str, Any], base: Base, params: Mapping[str, Any]) -> Decision | None:
    """Obeys the task envelope's own line: calls ``reply`` with its final text instead of ending the turn."""
    items = _items(body)
    newest = _newest_output(items)
    if newest is not None and newest[0].get("name") == "reply" and str(newest[0].get("call_id")).startswith(CALL_PREFIX):
        # What it replied stays in its own words in its history, as a model's closing line would keep it.
        said = _arguments(newest[0]).get("message", "")
        return _decision(body, agent, "explicit-reply-done", [_final(body, agent, f"I replied: {said}")])
    decision = base(body)
    texts, request = _finals(decision), _open_task(items)
    if not texts or request is None or decision is None or decision.hold is not None:
        return decision  # a held answer is the scenario's turn held open: left as it is
    status = str(params.get("status", "done"))
    message = texts[-1] if status == "done" else f"{params.get('reason', 'I cannot finish this now.')} {texts[-1]}"
    return _decision(body, agent, "explicit-reply", [_call(body, agent, "reply", {
        "request_id": request, "status": status, "message": message})])


def blocked(agent: str, body: Mapping[str, Any], base: Base, params: Mapping[str, Any]) -> Decision | None:
    """Replies ``blocked`` with a reason, explicitly, to every task it gets."""
    reason = str(params.get("reason", "Blocked: I cannot finish this now."))
    decision = explicit_reply(agent, body, base, {**params, "status": "blocked", "reason": reason})

    def rewrite(call: dict[str, Any]) -> dict[str, Any] | None:
        if call.get("name") != "reply":
            return None
        arguments = _arguments(call)
        if arguments.get("status") == "blocked":
            return None
        arguments.update(status="blocked", message=f"{reason} {arguments.get('message', '')}".strip())
        return {**call, "arguments": json.dumps(arguments, ensure_ascii=False)}

    return None if decision is None else _with_calls_replaced(decision, rewrite)


def paraphrase(agent: str, body: Mapping[str, Any], base: Base, params: Mapping[str, Any]) -> Decision | None:
    """Reports what it was told in other words: a final answer that is not the answer to a task (that one is
    the reply itself) comes on one line, in lower case, after a lead-in."""
    decision = base(body)
    if decision is None or _open_task(_items(body)) is not None:
        return decision
    lead = str(params.get("lead_in", "To sum up:"))
    items = []
    for item in decision.items:
        if item.get("type") == "message" and item.get("phase", "final_answer") == "final_answer":
            said = " ".join(item_text(item).split()).lower()
            item = {**item, "content": [{"type": "output_text", "text": f"{lead} {said}"}]}
        items.append(item)
    return replace(decision, items=items)


def receive_to_wait(agent: str, body: Mapping[str, Any], base: Base, params: Mapping[str, Any]) -> Decision | None:
    """Waits with ``receive_messages(timeout_ms)`` (past what it already received, acknowledged) instead of
    ``wait_agent``, and receives again after an empty wait."""
    items = _items(body)
    newest = _newest_output(items)
    decision = base(body)
    cursor = _receive_cursor(items)
    arguments = {"timeout_ms": RECEIVE_TIMEOUT_MS, **({"cursor": cursor, "ack_cursor": cursor} if cursor else {})}
    if decision is None and newest is not None and newest[0].get("name") == "receive_messages":
        return _decision(body, agent, "receive-again", [_call(body, agent, "receive_messages", arguments)])
    if decision is None:
        return None

    def rewrite(call: dict[str, Any]) -> dict[str, Any] | None:
        if call.get("name") != "wait_agent" or call.get("namespace") != NAMESPACE:
            return None
        return {**call, "name": "receive_messages", "arguments": json.dumps(arguments)}

    return _with_calls_replaced(decision, rewrite)


def injected_context(agent: str, body: Mapping[str, Any], base: Base, params: Mapping[str, Any]) -> Decision | None:
    """Answers from a message already delivered into its context instead of calling ``receive_messages``."""
    decision = base(body)
    if decision is None or not any(item.get("type") == "function_call" and item.get("name") == "receive_messages"
                                   for item in decision.items):
        return decision
    return answer_from_context(agent, body, base) or decision


def answer_from_context(agent: str, body: Mapping[str, Any], base: Base) -> Decision | None:
    """What ``base`` would answer had it received the mail delivered into the context but not yet taken in
    (after the last receive and the last final answer); None when there is none or no final answer follows.

    Any model may answer so: the core answers a waiting receive with no records when the mail reaches the
    conversation itself (``provider_context_available``).
    """
    items = _items(body)
    received = {str(i.get("call_id")) for i in items if i.get("type") == "function_call_output"
                and _calls(items).get(str(i.get("call_id")), {}).get("name") == "receive_messages"}
    # What it has not taken in yet: after its last receive and its last final answer (it answered from those).
    last_receive = max((n for n, i in enumerate(items) if str(i.get("call_id")) in received), default=-1)
    last_answer = max((n for n, i in enumerate(items) if i.get("role") == "assistant"
                       and i.get("phase") == "final_answer"), default=-1)
    records = []
    for item in items[max(last_receive, last_answer) + 1:]:
        parsed = _envelope(item)
        if parsed is None or parsed[0].get("message_type") not in (message_type("information"), message_type("reply")):
            continue
        fields, payload = parsed
        kind = "reply" if fields["message_type"] == message_type("reply") else "information"
        request = fields.get("request_id")
        if request and any(request in item_text(seen) for seen in items
                           if str(seen.get("call_id")) in received
                           or (seen.get("role") == "assistant" and seen.get("phase") == "final_answer")):
            continue  # already taken in (received, or answered about): not news
        record = {"kind": kind, "body": payload}
        if request:
            record["request_id"] = request
        if fields.get("status"):
            record["status"] = fields["status"]
        records.append(record)
    if not records:
        return None
    # What the scenario would do had it received these: decided on the input plus that receive.
    call = _call(body, agent, "receive_messages", {})
    output = {"type": "function_call_output", "call_id": call["call_id"],
              "output": "Output:\n" + json.dumps({"records": records}, ensure_ascii=False, separators=(",", ":"))}
    answer = base({**body, "input": [*items, call, output]})
    if answer is None or not _finals(answer):
        return None
    return _decision(body, agent, "answer-from-context", [item for item in answer.items])


def list_agents_first(agent: str, body: Mapping[str, Any], base: Base, params: Mapping[str, Any]) -> Decision | None:
    """Looks the agents up (``list_agents``) before its first call of a turn."""
    items = _items(body)
    own = {cid for cid in _own(items) if _calls(items)[cid].get("name") == "list_agents"} if _own(items) else set()
    plain = _without(body, own)
    decision = base(plain)
    starts_turn = bool(items) and items[-1].get("type") == "message" and items[-1].get("role") != "assistant"
    if decision is not None and starts_turn and any(i.get("type") == "function_call" for i in decision.items):
        return _decision(body, agent, "list-agents-first", [_call(body, agent, "list_agents", {})])
    return decision


def tool_error_retry(agent: str, body: Mapping[str, Any], base: Base, params: Mapping[str, Any]) -> Decision | None:
    """Gets its first sending call's target wrong, reads the error and calls again, corrected."""
    items = _items(body)
    own = _own(items)
    decision = base(_without(body, own))
    if own or decision is None:
        return decision
    for item in decision.items:
        if item.get("type") == "function_call" and item.get("name") in ("send_message", "followup_task"):
            arguments = _arguments(item)
            if "target" in arguments:
                wrong = {**arguments, "target": f"{arguments['target']}{params.get('typo', '-typo')}"}
                return _decision(body, agent, "wrong-target", [_call(body, agent, str(item["name"]), wrong)])
    return decision


# -- invalid behaviours: each a fault a check must name -------------------------------------------

def claims_without_tool(agent: str, body: Mapping[str, Any], base: Base, params: Mapping[str, Any]) -> Decision | None:
    """Claims it is done when asked to act, calling no tool at all."""
    items = _items(body)
    decision = base(body)
    prompted = bool(items) and items[-1].get("type") == "message" and items[-1].get("role") == "user" \
        and _envelope(items[-1]) is None
    if prompted and decision is not None and any(i.get("type") == "function_call" for i in decision.items):
        return _decision(body, agent, "claim-done", [_final(body, agent, "Done: I have taken care of it.")])
    return decision


def answers_before_reply(agent: str, body: Mapping[str, Any], base: Base, params: Mapping[str, Any]) -> Decision | None:
    """Gives its final answer right after assigning a task, before any reply could arrive.

    So that "before" is a fact of the run and not a race it may lose, the same persona as an assignee takes
    its time: it checks its mailbox and then waits there (``receive_messages`` past what it has, for
    ``deliberate_ms``) before it answers a task, while the requester answers on its very next request.
    """
    items = _items(body)
    newest = _newest_output(items)
    if newest is not None and newest[0].get("name") == "followup_task":
        return _decision(body, agent, "answer-early", [_final(body, agent, "B is on it; the answer will follow.")])
    own = _own(items)
    decision = base(_without(body, own))
    if _open_task(items) is None or not _finals(decision):
        return decision
    if not own:
        return _decision(body, agent, "deliberate-check", [_call(body, agent, "receive_messages", {})])
    if len(own) == 1:
        cursor = _receive_cursor(items)
        wait = {"timeout_ms": int(params.get("deliberate_ms", 5000)),
                **({"cursor": cursor, "ack_cursor": cursor} if cursor else {})}
        return _decision(body, agent, "deliberate-wait", [_call(body, agent, "receive_messages", wait)])
    return decision


def replies_twice(agent: str, body: Mapping[str, Any], base: Base, params: Mapping[str, Any]) -> Decision | None:
    """Replies explicitly to a task, then replies to the same request again."""
    items = _items(body)
    newest = _newest_output(items)
    if newest is not None and newest[0].get("name") == "reply":
        replies = [c for c in _calls(items).values() if c.get("name") == "reply"]
        if len(replies) == 1:
            again = {**_arguments(newest[0]), "message": "Correction: see my earlier reply."}
            return _decision(body, agent, "reply-again", [_call(body, agent, "reply", again)])
        return _decision(body, agent, "replied-twice-done", [_final(body, agent, "I replied.")])
    return explicit_reply(agent, body, base, params)


def wrong_agent(agent: str, body: Mapping[str, Any], base: Base, params: Mapping[str, Any]) -> Decision | None:
    """Sends its task to another agent than the one it was asked to task (itself, unless told another)."""
    decision = base(body)
    if decision is None:
        return None

    def rewrite(call: dict[str, Any]) -> dict[str, Any] | None:
        if call.get("name") != "followup_task":
            return None
        arguments = {**_arguments(call), "target": str(params.get("wrong_target", agent))}
        return {**call, "arguments": json.dumps(arguments, ensure_ascii=False)}

    return _with_calls_replaced(decision, rewrite)


BEHAVIOURS: dict[str, Behaviour] = {
    "explicit_reply": explicit_reply, "blocked": blocked, "paraphrase": paraphrase,
    "receive_to_wait": receive_to_wait, "injected_context": injected_context,
    "list_agents_first": list_agents_first, "tool_error_retry": tool_error_retry,
    "claims_without_tool": claims_without_tool, "answers_before_reply": answers_before_reply,
    "replies_twice": replies_twice, "wrong_agent": wrong_agent,
}
