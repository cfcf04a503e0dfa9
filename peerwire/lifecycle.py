"""Lifecycles of tasks, information records and replies, as data.

Every state change in the store goes through :meth:`Lifecycle.next`. An event
that the table does not allow raises :class:`IllegalTransition` before anything
is written, so the surrounding transaction rolls back and the store is left as
it was. The state diagrams in the documentation are generated from these same
tables (:meth:`Lifecycle.mermaid`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from .errors import Code, PeerwireError


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
class Lifecycle:
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
    def events(self) -> frozenset[str]:
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


# A task (one request) from admission to its single reply.
#
# pending      persisted, receipt returned, nobody has it yet
# claimed      exposed as new work by a receive (the durable claim)
# dispatching  claimed by automatic delivery; the provider has not answered yet
# accepted     the provider admitted it into an exact turn (binding persisted)
# uncertain    it may or may not have reached the provider: never replayed
# replied      the one reply exists (explicit or from the bound turn's outcome)
TASK = Lifecycle(
    name="task",
    initial="pending",
    transitions={
        ("pending", "claim_by_receive"): "claimed",
        ("pending", "claim_by_dispatch"): "dispatching",
        ("dispatching", "release"): "pending",
        ("dispatching", "provider_accepted"): "accepted",
        ("dispatching", "provider_uncertain"): "uncertain",
        ("accepted", "observation_lost"): "uncertain",
        ("pending", "reply"): "replied",
        ("claimed", "reply"): "replied",
        ("dispatching", "reply"): "replied",
        ("accepted", "reply"): "replied",
        ("uncertain", "reply"): "replied",
    },
    terminal=frozenset({"replied"}),
)

def _delivery(name: str, initial: str) -> Lifecycle:
    """A record that is only ever made visible: the provider shows it, or may have."""
    return Lifecycle(
        name=name,
        initial=initial,
        transitions={
            (initial, "provider_visible"): "provider_visible",
            (initial, "provider_uncertain"): "uncertain",
        },
        terminal=frozenset({"provider_visible", "uncertain"}),
    )


# An information record: never runnable work, only made visible.
INFORMATION = _delivery("information", "admitted")

# A reply record, explicit or built from a provider turn's outcome. It is published
# as it is admitted; what happens after is only about making it visible.
REPLY = _delivery("reply", "published")

# A provider binding: one task admitted into one exact provider turn.
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
        ("accepted", "capture"): "captured",
        ("accepted", "suppress"): "suppressed",
        ("accepted", "observation_lost"): "uncertain",
        ("captured", "publish"): "published",
        ("captured", "suppress"): "suppressed",
    },
    terminal=frozenset({"published", "suppressed", "uncertain"}),
)

# A notice from peerwire itself (an uncertain delivery, an interrupted turn).
NOTICE = _delivery("notice", "published")

LIFECYCLES: dict[str, Lifecycle] = {
    "task": TASK,
    "information": INFORMATION,
    "reply": REPLY,
    "notice": NOTICE,
}
"""Lifecycles of interaction records, by kind. Bindings use :data:`BINDING`."""
