"""Lifecycles of tasks, information records, replies, provider bindings and Codex owners, as data.

Every state change in the store goes through :meth:`Lifecycle.next`. An event
that the table does not allow raises :class:`IllegalTransition` before anything
is written, so the surrounding transaction rolls back and the store is left as
it was. The state diagrams in the documentation are generated from these same
tables (:meth:`Lifecycle.mermaid`).

The vocabulary is declared here once: record kinds (:class:`Kind`), lifecycle
events (:class:`Event`), each table's states (:class:`TaskState`,
:class:`DeliveryState`, :class:`BindingState`, :class:`OwnerState`) and the
evidence stages a core records (:class:`Stage`). They are ``StrEnum``: a state
compares equal to, and is stored as, its string.
Each table also says which stage each of its events records, so no stage name
is ever assembled from pieces. The tables themselves are contract data
(``contracts/lifecycles.json``, which the acceptance checks read too); the
vocabulary here must list exactly what that file lists, or the import fails.
``contracts/export.schema.json`` lists the same kinds and stages; a test keeps
them in agreement.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Mapping

from . import contract_data
from .errors import Code, PeerwireError


class Kind(StrEnum):
    """The kinds of mailbox records."""

    INFORMATION = "information"
    TASK = "task"
    REPLY = "reply"
    NOTICE = "notice"


class Event(StrEnum):
    """What can happen to a record or a provider binding (the tables' columns)."""

    CLAIM_BY_RECEIVE = "claim_by_receive"
    CLAIM_BY_DISPATCH = "claim_by_dispatch"
    RELEASE = "release"
    PROVIDER_ACCEPTED = "provider_accepted"
    PROVIDER_UNCERTAIN = "provider_uncertain"
    PROVIDER_VISIBLE = "provider_visible"
    PROVIDER_HANDOFF_STARTED_UNVERIFIED = "provider_handoff_started_unverified"
    OBSERVATION_LOST = "observation_lost"
    REPLY = "reply"
    CAPTURE = "capture"
    SUPPRESS = "suppress"
    PUBLISH = "publish"


class Claimant(StrEnum):
    """Who holds a task's durable claim: a receive call or automatic dispatch."""

    RECEIVE = "receive"
    DISPATCH = "dispatch"


CLAIM_EVENTS: Mapping[Claimant, Event] = {
    Claimant.RECEIVE: Event.CLAIM_BY_RECEIVE,
    Claimant.DISPATCH: Event.CLAIM_BY_DISPATCH,
}
"""The task event each claimant's claim is."""


class TaskState(StrEnum):
    """Where a task is in :data:`TASK` (the ``state`` column of its record)."""

    PENDING = "pending"
    CLAIMED = "claimed"
    DISPATCHING = "dispatching"
    ACCEPTED = "accepted"
    UNCERTAIN = "uncertain"
    REPLIED = "replied"


class DeliveryState(StrEnum):
    """Where an information record, a reply or a notice is in its table: only ever made visible."""

    ADMITTED = "admitted"
    """An information record's first state."""
    PUBLISHED = "published"
    """A reply's or a notice's first state."""
    PROVIDER_VISIBLE = "provider_visible"
    UNCERTAIN = "uncertain"
    HANDOFF_STARTED_UNVERIFIED = "handoff_started_unverified"


class BindingState(StrEnum):
    """Where a provider binding is in :data:`BINDING`."""

    ACCEPTED = "accepted"
    CAPTURED = "captured"
    PUBLISHED = "published"
    SUPPRESSED = "suppressed"
    UNCERTAIN = "uncertain"


class OwnerState(StrEnum):
    """Where a Codex owner is in :data:`OWNER`."""

    IDLE = "idle"
    STARTING = "starting"
    ACTIVE = "active"
    DETACHED = "detached"
    EXITED = "exited"


class OwnerEvent(StrEnum):
    """What moves a Codex owner (:data:`OWNER`); its events record no evidence stage."""

    TURN_ACCEPTED = "turn_accepted"
    """turn/start answered with the id of the turn it opened."""
    TURN_STARTED = "turn_started"
    """turn/started: Codex runs the turn (one the owner started, or one a person's TUI did)."""
    TURN_ENDED = "turn_ended"
    """turn/completed of the owner's current turn, whatever its status."""
    DETACH = "detach"
    EXIT = "exit"


class Stage(StrEnum):
    """Every stage an evidence row can record, in the order a record usually meets them.

    Stages of lifecycle events are named by the tables below (:meth:`Lifecycle.stage`);
    the others are facts outside any table.
    """

    ENTERED = "entered"
    """The request entered the send pipeline, before any validation. Detail: entry_id, op, via."""
    REJECTED = "rejected"
    """Refused before anything was admitted (a trace of the entry_id shows it). Detail: code, reason."""
    ADMITTED = "admitted"
    """Persisted; the receipt was returned. Detail: recipient, bytes, source, binding_id (the tool receipt is the
    record's own ``tool_receipt``, not repeated here)."""
    RETRIED = "retried"
    """The same caller sent the same call again (its call id): answered with this record's first receipt,
    nothing admitted. Detail: call_id, op."""
    RECEIVED = "received"
    """First returned by a receive to its recipient."""
    ACKNOWLEDGED = "acknowledged"
    """The recipient acknowledged past it (``ack_cursor``): one row per acknowledgement, on the last record it
    covers. Detail: by, first_seq, last_seq, first_record_id, last_record_id, count (the whole range)."""
    CLAIM_BY_RECEIVE = "claim_by_receive"
    CLAIM_BY_DISPATCH = "claim_by_dispatch"
    RELEASE = "release"
    """A dispatch claim given back: the provider proved nothing was admitted."""
    PROVIDER_ACCEPTED = "provider_accepted"
    """The provider admitted the task into an exact turn. Detail: binding_id, generation, thread_id, turn_id, via."""
    PROVIDER_ACCEPTED_AFTER_REPLY = "provider_accepted_after_reply"
    """The provider admitted a task its recipient had already replied to (the binding is suppressed)."""
    PROVIDER_UNCERTAIN = "provider_uncertain"
    PROVIDER_VISIBLE = "provider_visible"
    """Shown to the recipient's runtime. Detail: via, degraded (false), thread_id, generation, active_turn."""
    PROVIDER_HANDOFF_STARTED_UNVERIFIED = "provider_handoff_started_unverified"
    """Handed to the provider through a path that proves only that it started (the request was written,
    its acknowledgement never came): not proof of delivery, and never replayed. Detail: via, degraded (true)."""
    OBSERVATION_LOST = "observation_lost"
    REPLY = "reply"
    """The task's lifecycle event: its one reply exists."""
    REPLIED = "replied"
    """On the task: which reply answered it. Detail: reply_interaction_id, status, source."""
    BINDING_CAPTURE = "binding_capture"
    BINDING_SUPPRESS = "binding_suppress"
    BINDING_OBSERVATION_LOST = "binding_observation_lost"
    BINDING_PUBLISH = "binding_publish"


class IllegalTransition(PeerwireError):
    def __init__(self, lifecycle: str, state: str, event: str):
        super().__init__(
            Code.ILLEGAL_TRANSITION,
            f"{lifecycle}: event {event!r} is not allowed in state {state!r}",
            {"lifecycle": lifecycle, "state": state, "event": event},
        )
        self.state = state
        self.event = event


@dataclass(frozen=True)
class StateTable:
    """A lifecycle as data: its states, the events that move it, and where each allowed one leads.

    :meth:`next` is the only way through it: an event the table does not allow
    in a state raises :class:`IllegalTransition` before anything changes.
    :meth:`mermaid` draws the same table (``docs/lifecycles.md``).
    """

    name: str
    initial: str
    transitions: Mapping[tuple[str, str], str]
    terminal: frozenset[str] = field(default_factory=frozenset)

    @property
    def states(self) -> frozenset[str]:
        found = {self.initial}
        for (src, _event), dst in self.transitions.items():
            found.update((src, dst))
        return frozenset(found)

    @property
    def events(self) -> frozenset:
        return frozenset(event for (_src, event) in self.transitions)

    def allows(self, state: str, event: str) -> bool:
        return (state, event) in self.transitions

    def next(self, state: str, event: str) -> str:
        """The state after ``event``; raises :class:`IllegalTransition` otherwise."""
        try:
            return self.transitions[(state, event)]
        except KeyError:
            raise IllegalTransition(self.name, state, event) from None

    def mermaid(self) -> str:
        lines = ["stateDiagram-v2", f"    [*] --> {self.initial}"]
        for (src, event), dst in sorted(self.transitions.items()):
            lines.append(f"    {src} --> {dst}: {event}")
        for state in sorted(self.terminal):
            lines.append(f"    {state} --> [*]")
        return "\n".join(lines)


@dataclass(frozen=True)
class Lifecycle(StateTable):
    """A record's (or a binding's) lifecycle: a :class:`StateTable` whose every event records an evidence stage."""

    stages: Mapping[Event, Stage] = field(default_factory=dict)
    """The evidence stage each event records."""

    def __post_init__(self) -> None:
        unstaged = self.events - set(self.stages)
        if unstaged:
            raise ValueError(f"{self.name}: events {sorted(unstaged)} record no stage")

    @property
    def events(self) -> frozenset[Event]:
        return frozenset(Event(event) for (_src, event) in self.transitions)

    def stage(self, event: str) -> Stage:
        """The evidence stage ``event`` records."""
        return self.stages[Event(event)]

    def stages_into(self, state: str) -> frozenset[Stage]:
        """The stages of the events that lead into ``state`` (what evidence says it was reached)."""
        return frozenset(self.stages[Event(event)] for (_src, event), dst in self.transitions.items() if dst == state)


def _load(name: str, states: type[StrEnum]) -> Lifecycle:
    """The table ``name`` of ``contracts/lifecycles.json``, its states as members of ``states``; every event and
    stage it names must be declared here."""
    data = contract_data.table(contract_data.LIFECYCLES)["lifecycles"][name]
    return Lifecycle(
        name=Kind(name) if name in {kind.value for kind in Kind} else name,
        initial=states(data["initial"]),
        transitions={(states(src), Event(event)): states(dst) for src, event, dst in data["transitions"]},
        stages={Event(event): Stage(stage) for event, stage in data["stages"].items()},
        terminal=frozenset(states(state) for state in data["terminal"]),
    )


def _check_vocabulary() -> None:
    # The enums above name what the code uses; the contract's lists are what a judge reads. They must agree.
    data = contract_data.table(contract_data.LIFECYCLES)
    for declared, listed in ((Kind, data["kinds"]), (Event, data["events"]), (Stage, list(data["stages"]))):
        if [member.value for member in declared] != listed:
            raise ValueError(f"contracts/{contract_data.LIFECYCLES} lists {declared.__name__} {listed}, the core "
                             f"{[member.value for member in declared]}")


_check_vocabulary()

# The tables are contracts/lifecycles.json; what their states mean:
#
# task: pending (persisted, receipt returned, nobody has it yet), claimed (exposed as new work by a
# receive: the durable claim), dispatching (claimed by automatic delivery; the provider has not answered
# yet), accepted (the provider admitted it into an exact turn, binding persisted), uncertain (it may or
# may not have reached the provider: never replayed), replied (the one reply exists).
TASK = _load(Kind.TASK, TaskState)

# An information record: never runnable work, only made visible.
INFORMATION = _load(Kind.INFORMATION, DeliveryState)

# A reply record, explicit or built from a provider turn's outcome. It is published
# as it is admitted; what happens after is only about making it visible.
REPLY = _load(Kind.REPLY, DeliveryState)

# A provider binding: one task admitted into one exact provider turn. Its events are
# recorded on the task, under stages of their own.
#
# accepted   the provider admitted the task into (thread, turn); persisted before
#            any completion can be observed
# captured   the turn's terminal evidence is persisted; its reply is not yet
# published  the reply (or blocked/failed outcome) exists
# suppressed the recipient replied explicitly first: no automatic result
# uncertain  observation of the turn was lost (owner died, app restarted)
BINDING = _load("binding", BindingState)

# A notice from peerwire itself (an uncertain delivery, an interrupted turn).
NOTICE = _load(Kind.NOTICE, DeliveryState)

LIFECYCLES: dict[Kind, Lifecycle] = {
    Kind.TASK: TASK,
    Kind.INFORMATION: INFORMATION,
    Kind.REPLY: REPLY,
    Kind.NOTICE: NOTICE,
}
"""Lifecycles of interaction records, by kind. Bindings use :data:`BINDING`."""

# A Codex owner: one app-server per agent and generation, and its thread's turns.
#
# idle      its thread has no turn: a task or a prompt starts one (turn/start)
# starting  turn/start answered with a turn that Codex has not reported started
#           (until it does, Codex refuses to interrupt it)
# active    a turn runs: a task is steered into it (turn/steer), an interrupt ends it
# detached  the operator detached it (or the app stopped): nothing more is observed
# exited    its app-server went away under it

_LIVE = (OwnerState.IDLE, OwnerState.STARTING, OwnerState.ACTIVE)

OWNER = StateTable(
    name="owner",
    initial=OwnerState.IDLE,
    transitions={
        (OwnerState.IDLE, OwnerEvent.TURN_ACCEPTED): OwnerState.STARTING,
        (OwnerState.IDLE, OwnerEvent.TURN_STARTED): OwnerState.ACTIVE,  # a turn the owner did not start
        (OwnerState.STARTING, OwnerEvent.TURN_STARTED): OwnerState.ACTIVE,
        (OwnerState.STARTING, OwnerEvent.TURN_ENDED): OwnerState.IDLE,  # ended before it was seen starting
        # Codex reported the turn started before turn/start answered for it.
        (OwnerState.ACTIVE, OwnerEvent.TURN_ACCEPTED): OwnerState.ACTIVE,
        # A new turn runs while the end of the last one was never seen: the new one is current.
        (OwnerState.ACTIVE, OwnerEvent.TURN_STARTED): OwnerState.ACTIVE,
        (OwnerState.ACTIVE, OwnerEvent.TURN_ENDED): OwnerState.IDLE,
        **{(state, OwnerEvent.DETACH): OwnerState.DETACHED for state in _LIVE},
        **{(state, OwnerEvent.EXIT): OwnerState.EXITED for state in _LIVE},
    },
    terminal=frozenset({OwnerState.DETACHED, OwnerState.EXITED}),
)
"""Every state a Codex owner can be in, and the events that move it (:mod:`peerwire.codex.owner`)."""
