"""Lifecycles of tasks, information records and replies, as data.

Every state change in the store goes through :meth:`Lifecycle.next`. An event
that the table does not allow raises :class:`IllegalTransition` before anything
is written, so the surrounding transaction rolls back and the store is left as
it was. The state diagrams in the documentation are generated from these same
tables (:meth:`Lifecycle.mermaid`).

The vocabulary is declared here once: record kinds (:class:`Kind`), lifecycle
events (:class:`Event`) and the evidence stages a core records (:class:`Stage`).
Each table also says which stage each of its events records, so no stage name
is ever assembled from pieces. ``contracts/export.schema.json`` lists the same
kinds and stages; a test keeps the two in agreement.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Mapping

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
        return frozenset(event for (_src, event) in self.transitions)

    def stage(self, event: str) -> Stage:
        """The evidence stage ``event`` records."""
        return self.stages[Event(event)]

    def stages_into(self, state: str) -> frozenset[Stage]:
        """The stages of the events that lead into ``state`` (what evidence says it was reached)."""
        return frozenset(self.stages[event] for (_src, event), dst in self.transitions.items() if dst == state)


# A record's own events record stages of the same name.
_RECORD_STAGES: Mapping[Event, Stage] = {
    Event.CLAIM_BY_RECEIVE: Stage.CLAIM_BY_RECEIVE,
    Event.CLAIM_BY_DISPATCH: Stage.CLAIM_BY_DISPATCH,
    Event.RELEASE: Stage.RELEASE,
    Event.PROVIDER_ACCEPTED: Stage.PROVIDER_ACCEPTED,
    Event.PROVIDER_UNCERTAIN: Stage.PROVIDER_UNCERTAIN,
    Event.PROVIDER_VISIBLE: Stage.PROVIDER_VISIBLE,
    Event.PROVIDER_HANDOFF_STARTED_UNVERIFIED: Stage.PROVIDER_HANDOFF_STARTED_UNVERIFIED,
    Event.OBSERVATION_LOST: Stage.OBSERVATION_LOST,
    Event.REPLY: Stage.REPLY,
}


# A task (one request) from admission to its single reply.
#
# pending      persisted, receipt returned, nobody has it yet
# claimed      exposed as new work by a receive (the durable claim)
# dispatching  claimed by automatic delivery; the provider has not answered yet
# accepted     the provider admitted it into an exact turn (binding persisted)
# uncertain    it may or may not have reached the provider: never replayed
# replied      the one reply exists (explicit or from the bound turn's outcome)
TASK = Lifecycle(
    name=Kind.TASK,
    initial="pending",
    transitions={
        ("pending", Event.CLAIM_BY_RECEIVE): "claimed",
        ("pending", Event.CLAIM_BY_DISPATCH): "dispatching",
        ("dispatching", Event.RELEASE): "pending",
        ("dispatching", Event.PROVIDER_ACCEPTED): "accepted",
        ("dispatching", Event.PROVIDER_UNCERTAIN): "uncertain",
        ("accepted", Event.OBSERVATION_LOST): "uncertain",
        ("pending", Event.REPLY): "replied",
        ("claimed", Event.REPLY): "replied",
        ("dispatching", Event.REPLY): "replied",
        ("accepted", Event.REPLY): "replied",
        ("uncertain", Event.REPLY): "replied",
    },
    stages=_RECORD_STAGES,
    terminal=frozenset({"replied"}),
)


def _delivery(kind: Kind, initial: str) -> Lifecycle:
    """A record that is only ever made visible: the provider shows it, or may have."""
    return Lifecycle(
        name=kind,
        initial=initial,
        transitions={
            (initial, Event.PROVIDER_VISIBLE): "provider_visible",
            (initial, Event.PROVIDER_UNCERTAIN): "uncertain",
            (initial, Event.PROVIDER_HANDOFF_STARTED_UNVERIFIED): "handoff_started_unverified",
        },
        stages=_RECORD_STAGES,
        terminal=frozenset({"provider_visible", "uncertain", "handoff_started_unverified"}),
    )


# An information record: never runnable work, only made visible.
INFORMATION = _delivery(Kind.INFORMATION, "admitted")

# A reply record, explicit or built from a provider turn's outcome. It is published
# as it is admitted; what happens after is only about making it visible.
REPLY = _delivery(Kind.REPLY, "published")

# A provider binding: one task admitted into one exact provider turn. Its events are
# recorded on the task, under stages of their own.
#
# accepted   the provider admitted the task into (thread, turn); persisted before
#            any completion can be observed
# captured   the turn's terminal evidence is persisted; its reply is not yet
# published  the reply (or blocked/failed outcome) exists
# suppressed the recipient replied explicitly first: no automatic result
# uncertain  observation of the turn was lost (owner died, app restarted)
BINDING = Lifecycle(
    name="binding",
    initial="accepted",
    transitions={
        ("accepted", Event.CAPTURE): "captured",
        ("accepted", Event.SUPPRESS): "suppressed",
        ("accepted", Event.OBSERVATION_LOST): "uncertain",
        ("captured", Event.PUBLISH): "published",
        ("captured", Event.SUPPRESS): "suppressed",
    },
    stages={
        Event.CAPTURE: Stage.BINDING_CAPTURE,
        Event.SUPPRESS: Stage.BINDING_SUPPRESS,
        Event.OBSERVATION_LOST: Stage.BINDING_OBSERVATION_LOST,
        Event.PUBLISH: Stage.BINDING_PUBLISH,
    },
    terminal=frozenset({"published", "suppressed", "uncertain"}),
)

# A notice from peerwire itself (an uncertain delivery, an interrupted turn).
NOTICE = _delivery(Kind.NOTICE, "published")

LIFECYCLES: dict[Kind, Lifecycle] = {
    Kind.TASK: TASK,
    Kind.INFORMATION: INFORMATION,
    Kind.REPLY: REPLY,
    Kind.NOTICE: NOTICE,
}
"""Lifecycles of interaction records, by kind. Bindings use :data:`BINDING`."""
