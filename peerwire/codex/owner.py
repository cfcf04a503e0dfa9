"""The owner of one Codex agent: its thread's turns as a state table, and what it was set up with.

An owner (one ``codex app-server`` per agent, one generation) goes through
the states of :data:`peerwire.lifecycle.OWNER`, which sits with the record
lifecycles' tables: an event the table does not allow raises
:class:`~peerwire.lifecycle.IllegalTransition` and leaves the owner as it
was, and ``docs/lifecycles.md`` draws the diagram from the same table.

Its states and events are described with the table.

Which turn is meant travels with the events (:class:`OwnerTurns`): the end of
a turn that is not the owner's current one changes no state.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..lifecycle import OWNER, OwnerEvent, OwnerState
from .app_server import AppServerSession
from .capabilities import Assessment

__all__ = ["OWNER", "Owner", "OwnerEvent", "OwnerSetup", "OwnerState", "OwnerTurns"]


class OwnerTurns:
    """An owner's place in :data:`OWNER` and the turn it concerns. Changed only through :data:`OWNER`."""

    def __init__(self) -> None:
        self.state: str = OWNER.initial
        self.turn: str | None = None

    def __repr__(self) -> str:
        return f"<OwnerTurns {self.state} {self.turn}>"

    def _apply(self, event: OwnerEvent, turn: str | None) -> None:
        self.state = OWNER.next(self.state, event)  # raises before anything changes
        self.turn = turn

    @property
    def current(self) -> str | None:
        """The turn a task would be steered into (starting or active), else ``None``."""
        return self.turn if self.state in (OwnerState.STARTING, OwnerState.ACTIVE) else None

    @property
    def over(self) -> bool:
        """Detached or exited: nothing of this owner will be observed any more."""
        return self.state in OWNER.terminal

    def accepted(self, turn: str) -> None:
        self._apply(OwnerEvent.TURN_ACCEPTED, turn)

    def started(self, turn: str) -> None:
        self._apply(OwnerEvent.TURN_STARTED, turn)

    def ended(self, turn: str) -> bool:
        """``turn`` completed; returns whether it was the current turn (only then does the state change)."""
        if turn != self.current:
            return False
        self._apply(OwnerEvent.TURN_ENDED, None)
        return True

    def detach(self) -> None:
        self._apply(OwnerEvent.DETACH, None)

    def exit(self) -> None:
        self._apply(OwnerEvent.EXIT, None)

    def waits_to_start(self, turn: str) -> bool:
        """Whether ``turn`` was accepted and Codex has not reported it started (nor ended) yet."""
        return self.state == OwnerState.STARTING and self.turn == turn


@dataclass(frozen=True)
class OwnerSetup:
    """What an owner was attached with; fixed for its generation."""

    cwd: str = ""
    shared: bool = False
    """A collaboration child: a thread in its root's app-server, which it does not own."""
    capabilities: Assessment = field(default_factory=Assessment.unchecked)
    """What this owner's Codex may be asked to do (see :func:`peerwire.codex.adapter.assess`)."""
    mcp_servers: tuple[str, ...] = ()
    """The MCP servers its CODEX_HOME registers: each thread gets input only once they are ready."""
    rollout: str | None = None
    """Its thread's rollout file, as Codex reported it: what a collaboration child's history is copied from."""
    tree_servers: tuple[str, ...] = ()
    """Of ``mcp_servers``, the messaging core's own (they carry a session): the tools of every tree agent."""
    child_servers: tuple[str, ...] = ()
    """Other MCP servers the operator lets this agent's collaboration children keep."""


@dataclass
class Owner:
    """The attached app-server of one agent, at one generation: its setup, its turns and what they said."""

    agent_id: str
    name: str
    generation: int
    thread_id: str
    client: AppServerSession
    setup: OwnerSetup = field(default_factory=OwnerSetup)
    turns: OwnerTurns = field(default_factory=OwnerTurns)
    items: dict[str, list[dict]] = field(default_factory=lambda: defaultdict(list))
    """Assistant items of each running turn (turn id -> items), until the turn completes."""
    completed: dict[str, dict] = field(default_factory=dict)
    """Finished turns of this generation: turn id -> {turn_id, status}."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Orders what the owner sends (turn/start, turn/steer) with what it observes."""
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    """Notified when a turn starts or completes and when the owner is detached."""
    watcher: asyncio.Task | None = None
    turn_limit: asyncio.TimerHandle | None = None

    @property
    def active_turn(self) -> str | None:
        """The turn a task would be steered into, if any."""
        return self.turns.current

    @active_turn.setter
    def active_turn(self, turn: str | None) -> None:
        """Plant a belief, bypassing the table: only the stale-steer route does this, on purpose
        (``harness/codex/recorded/routes.py`` tells the owner a finished turn is still active)."""
        self.turns.state, self.turns.turn = (OwnerState.ACTIVE, turn) if turn else (OwnerState.IDLE, None)

    def describe(self) -> dict[str, Any]:
        return {"agent_id": self.agent_id, "name": self.name, "generation": self.generation,
                "codex_version": self.setup.capabilities.version,
                "capabilities": [c.value for c in self.setup.capabilities.supported()],
                "thread_id": self.thread_id, "rollout": self.setup.rollout, "active_turn": self.active_turn,
                "state": self.turns.state, "pid": self.client.pid,
                "completed_turns": list(self.completed.values()),
                "transcript": str(self.client.transcript.path) if self.client.transcript.path else None}
