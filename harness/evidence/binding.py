"""Binding the core's interaction records to the Codex rollouts that produced them.

A record an agent created through a tool (``send_message``, ``followup_task``,
``reply``; in a collaboration tree also ``spawn_agent``, whose message is the
child's first task) carries the tool receipt peerwire took from Codex's ``tools/call``
metadata: ``call_id``, ``thread_id``, ``turn_id``, ``model``. Its binding is the
``function_call`` with that ``call_id`` in the sender's rollout, checked against the
receipt: same thread, same turn, the tool its kind implies.

A record peerwire published itself — a reply built from a bound turn's outcome, a
blocked/failed notice — has no receipt. It binds to the provider binding row
(request, claim, generation, thread, turn) named by its evidence, and through it
to the turn in the recipient's rollout.

A task additionally lists its deliveries: every provider binding of its request.
Whatever cannot be matched is returned with an explicit ``unbound`` reason; nothing
is guessed from similar text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from .core import CoreEvidence
from .envelope_grammar import deviations, peer_fields, prescribed, read
from .rollouts import UNVERIFIED, Location, RolloutIndex, RolloutLine, Turn
from .stages import Stage

TOOLS_OF_KIND = {"information": ("send_message",), "task": ("followup_task", "spawn_agent"), "reply": ("reply",)}
"""The tools that create each kind of record (``spawn_agent``: a collaboration child's first task)."""


@dataclass(frozen=True)
class TurnBinding:
    """A provider binding row of a request, resolved to a rollout turn.

    ``via`` is how the provider admitted the task (``turn/start`` or
    ``turn/steer``) as the ``provider_accepted`` evidence row records it.
    ``unbound`` says why the turn could not be found in any rollout.
    """

    binding_id: str
    request_id: str
    agent: str | None
    agent_id: str
    generation: int | None
    thread_id: str
    turn_id: str | None
    state: str
    via: str | None = None
    model: str = UNVERIFIED
    effort: str = UNVERIFIED
    turn_status: str | None = None
    started: str | None = None
    ended: str | None = None
    final: str | None = None
    unbound: str | None = None


@dataclass(frozen=True)
class EvidenceBinding:
    """One interaction record bound to an agent, thread, turn and rollout lines.

    ``source`` is ``tool_call`` (bound through the record's tool receipt),
    ``provider_binding`` (bound through a binding row) or ``None`` when unbound.
    ``call``/``output`` are the ``function_call`` and ``function_call_output``
    lines (``file:line``); ``final`` is, for records published from a turn
    outcome, the line of the turn's final answer, or where the turn ended when it
    has none (interrupted, failed). ``delivered`` lists where the record surfaced
    in the recipient's rollouts: its envelope in a message item (inject, turn
    start or steer) or its record id in a tool output (``receive_messages``).
    ``notes`` list disagreements that do not break the binding (e.g. the
    receipt's model differs from the rollout's).
    """

    interaction_id: str
    kind: str
    request_id: str | None
    sender: str
    recipient: str
    source: str | None
    agent: str | None = None
    agent_id: str | None = None
    thread_id: str | None = None
    turn_id: str | None = None
    call_id: str | None = None
    tool: str | None = None
    call: str | None = None
    output: str | None = None
    final: str | None = None
    binding_id: str | None = None
    model: str = UNVERIFIED
    effort: str = UNVERIFIED
    turn_status: str | None = None
    deliveries: tuple[TurnBinding, ...] = ()
    delivered: tuple[str, ...] = ()
    unbound: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def bound(self) -> bool:
        return self.unbound is None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["deliveries"] = [asdict(d) for d in self.deliveries]
        out["delivered"] = list(self.delivered)
        out["notes"] = list(self.notes)
        return out


def bind_records(core: CoreEvidence, index: RolloutIndex, *,
                 thread_agents: Mapping[str, str] | None = None) -> list[EvidenceBinding]:
    """Bind every record of a core's export, in ``seq`` order.

    ``thread_agents`` (thread id -> agent name) adds what the export cannot know,
    e.g. threads of earlier generations; it wins over what the export implies. A
    record whose receipt names a thread of another agent than its sender is
    unbound, as is a receipt whose call is missing from the rollouts or recorded
    in another thread or turn than the receipt says.
    """
    threads = _thread_agents(core, thread_agents or {})
    return [replace(_bind(row, core, threads, index), delivered=_delivered(row, threads, index))
            for row in core.records]


def _thread_agents(core: CoreEvidence, given: Mapping[str, str]) -> dict[str, str]:
    """Thread id -> agent name: each agent's session, each binding's thread, each receipt's thread."""
    threads: dict[str, str] = {}
    for agent in core.agents:
        if agent.get("provider_session_id"):
            threads[agent["provider_session_id"]] = agent["name"]
    for binding in core.bindings:
        name = core.name(binding["agent_id"])
        if name is not None:
            threads.setdefault(binding["thread_id"], name)
    for row in core.records:
        receipt = row["tool_receipt"] or {}
        if receipt.get("thread_id") and row["sender"]["name"]:
            threads.setdefault(receipt["thread_id"], row["sender"]["name"])
    threads.update(given)
    return threads


def _delivered(row: dict[str, Any], threads: Mapping[str, str], index: RolloutIndex) -> tuple[str, ...]:
    mine = [t for t, name in threads.items() if name == row["recipient"]["name"]]
    # The envelope the contract's grammar prescribes for the record, not what the reference core renders: a
    # message that holds it and more (another header, a changed body) is not it.
    fields = peer_fields(row)
    envelope_text = prescribed("peer", row, fields)
    found: set[Location] = set()
    for thread_id in mine:
        found.update(o.at for o in index.occurrences(envelope_text, thread_id=thread_id,
                                                     record_types=("response_item",))
                     if o.payload_type == "message" and _is_envelope_of(index.line(o.at), row, fields))
        found.update(o.at for o in index.occurrences(row["record_id"], thread_id=thread_id,
                                                     record_types=("response_item",))
                     if o.payload_type == "function_call_output")
    return tuple(str(at) for at in sorted(found))


def _is_envelope_of(line: RolloutLine | None, row: dict[str, Any], fields: Mapping[str, Any]) -> bool:
    if line is None:
        return False
    parsed = read(line.text())
    return parsed is not None and not deviations(parsed, "peer", row, fields)


def _bind(row: dict[str, Any], core: CoreEvidence, threads: Mapping[str, str],
          index: RolloutIndex) -> EvidenceBinding:
    base = dict(interaction_id=row["record_id"], kind=row["kind"], request_id=row.get("request_id"),
                sender=row["sender"]["name"], recipient=row["recipient"]["name"])
    deliveries = _deliveries(row, core, index) if row["kind"] == "task" else ()
    if row.get("tool_receipt"):
        return _bind_tool_call(row, threads, index, base, deliveries)
    admitted = (core.evidence(row["record_id"], Stage.ADMITTED) or [{"detail": {}}])[0]["detail"]
    binding_id = admitted.get("binding_id")
    if binding_id is None and row["kind"] == "notice" and row.get("request_id"):
        candidates = [b for b in core.bindings if b["request_id"] == row["request_id"]]
        binding_id = candidates[-1]["binding_id"] if candidates else None
    if binding_id is not None:
        return _bind_provider(row, core, index, base, deliveries, binding_id)
    if row["kind"] == "notice":
        reason = (f"peerwire notice about {row['request_id']} with no provider binding (nothing reached a turn)"
                  if row.get("request_id") else "peerwire notice not tied to a tool call or a provider turn")
    else:
        reason = "no tool receipt: created outside an MCP tool call (operator or CLI)"
    return EvidenceBinding(**base, source=None, deliveries=deliveries, unbound=reason)


def _bind_tool_call(row: dict[str, Any], threads: Mapping[str, str], index: RolloutIndex, base: dict[str, Any],
                    deliveries: tuple[TurnBinding, ...]) -> EvidenceBinding:
    receipt = row["tool_receipt"]
    call_id, thread_id, turn_id = receipt.get("call_id"), receipt.get("thread_id"), receipt.get("turn_id")
    sender = row["sender"]
    known = dict(base, source=None, agent=sender["name"], agent_id=sender["agent_id"],
                 thread_id=thread_id, turn_id=turn_id, call_id=call_id, deliveries=deliveries)
    if not call_id:
        return EvidenceBinding(**known, unbound="tool receipt has no call_id")
    owner = threads.get(thread_id or "")
    if owner is not None and owner != sender["name"]:
        return EvidenceBinding(**known, unbound=f"receipt thread {thread_id} belongs to {owner}, "
                                                f"not the sender {sender['name']}")
    call = index.call(call_id)
    if call is None:
        return EvidenceBinding(**known, unbound=f"no rollout records call {call_id}")
    if thread_id and call.thread_id != thread_id:
        return EvidenceBinding(**known, unbound=f"call {call_id} is in thread {call.thread_id}, "
                                                f"the receipt says {thread_id}")
    if turn_id and call.turn_id != turn_id:
        return EvidenceBinding(**known, unbound=f"call {call_id} is in turn {call.turn_id}, "
                                                f"the receipt says {turn_id}")
    expected = TOOLS_OF_KIND.get(row["kind"])
    if expected and call.name not in expected:
        return EvidenceBinding(**known, unbound=f"call {call_id} is {call.tool}, a {row['kind']} comes "
                                                f"from {' or '.join(expected)}")
    turn = index.turn(call.thread_id, call.turn_id) if call.turn_id else None
    notes = []
    model = turn.model if turn else UNVERIFIED
    if receipt.get("model") and model != UNVERIFIED and receipt["model"] != model:
        notes.append(f"receipt model {receipt['model']} differs from the rollout's {model}")
    if call.output_at is None:
        notes.append("the rollout has no output for this call")
    known.update(source="tool_call", thread_id=call.thread_id, turn_id=call.turn_id, tool=call.tool,
                 call=str(call.call), output=_loc(call.output_at), model=model,
                 effort=turn.effort if turn else UNVERIFIED, turn_status=turn.status if turn else None)
    return EvidenceBinding(**known, notes=tuple(notes))


def _bind_provider(row: dict[str, Any], core: CoreEvidence, index: RolloutIndex, base: dict[str, Any],
                   deliveries: tuple[TurnBinding, ...], binding_id: str) -> EvidenceBinding:
    binding = core.binding(binding_id)
    if binding is None:
        return EvidenceBinding(**base, source=None, binding_id=binding_id, deliveries=deliveries,
                               unbound=f"evidence names binding {binding_id}, which the export does not have")
    resolved = _turn_binding(binding, core, index)
    fields = dict(base, binding_id=binding_id, agent=resolved.agent, agent_id=resolved.agent_id,
                  thread_id=resolved.thread_id, turn_id=resolved.turn_id, model=resolved.model,
                  effort=resolved.effort, turn_status=resolved.turn_status, final=resolved.final or resolved.ended,
                  deliveries=deliveries)
    if resolved.unbound:
        return EvidenceBinding(**fields, source=None, unbound=resolved.unbound)
    return EvidenceBinding(**fields, source="provider_binding")


def _deliveries(row: dict[str, Any], core: CoreEvidence, index: RolloutIndex) -> tuple[TurnBinding, ...]:
    return tuple(_turn_binding(b, core, index) for b in core.bindings_of(row.get("request_id")))


def _turn_binding(binding: dict[str, Any], core: CoreEvidence, index: RolloutIndex) -> TurnBinding:
    task = core.task(binding["request_id"])
    via = None
    if task is not None:
        for accepted in core.evidence(task["record_id"], Stage.PROVIDER_ACCEPTED):
            if accepted["detail"].get("binding_id") == binding["binding_id"]:
                via = accepted["detail"].get("via")
    outcome = binding.get("outcome") or {}
    fields: dict[str, Any] = dict(
        binding_id=binding["binding_id"], request_id=binding["request_id"], agent=core.name(binding["agent_id"]),
        agent_id=binding["agent_id"], generation=binding.get("generation"), thread_id=binding["thread_id"],
        turn_id=binding.get("turn_id"), state=binding["state"], via=via)
    turn: Turn | None = index.turn(binding["thread_id"], binding["turn_id"]) if binding.get("turn_id") else None
    if turn is None:
        where = "no turn id" if not binding.get("turn_id") else f"turn {binding['turn_id']} is in no rollout"
        return TurnBinding(**fields, unbound=f"binding {binding['binding_id']}: {where}")
    final = None
    if isinstance(outcome, dict) and outcome.get("final_item_id"):
        message = index.message(outcome["final_item_id"])
        final = str(message.at) if message else None
    return TurnBinding(**fields, model=turn.model, effort=turn.effort, turn_status=turn.status,
                       started=_loc(turn.started), ended=_loc(turn.ended), final=final)


def _loc(at: Location | None) -> str | None:
    return str(at) if at is not None else None
