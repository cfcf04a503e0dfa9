"""Provider adapters: how the app delivers into an agent's runtime.

``manual`` has no adapter: its agents read with ``receive_messages`` and answer
with ``reply``. Other providers plug in an object with the :class:`Provider`
interface; the app calls it only after the interaction is committed. A provider
that owns agent runtimes (the Codex adapter) is also a :class:`RuntimeOwner`:
the operator attaches, prompts and watches agents through it.

The app builds each runtime provider from a :data:`ProviderFactory` once its
store is open, recovers it at start-up and closes it at shutdown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence, runtime_checkable

from .contract_data import providers as known_providers
from .errors import Code, PeerwireError
from .lifecycle import Event
from .registry_rules import AgentRow

if TYPE_CHECKING:
    from .store import Store

Committed = Callable[[str, str], None]
"""Called with (recipient agent_id, interaction_id) after a provider committed a record itself."""


@dataclass(frozen=True)
class ProviderResult:
    """What a provider edge could prove about one handoff, and so the stage it records.

    ``accepted``: the provider took it. ``degraded``: only through a path that
    proves the handoff started, not that it arrived (a request written whose
    acknowledgement never came); such a handoff is recorded as
    ``provider_handoff_started_unverified``, never as delivered. Not accepted
    (``error`` says why), it may or may not have reached the runtime: uncertain,
    and never replayed.
    """

    provider: str
    method: str
    accepted: bool
    degraded: bool = False
    evidence: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None

    @property
    def event(self) -> Event:
        if not self.accepted:
            return Event.PROVIDER_UNCERTAIN
        return Event.PROVIDER_HANDOFF_STARTED_UNVERIFIED if self.degraded else Event.PROVIDER_VISIBLE

    def detail(self) -> dict[str, Any]:
        """The evidence row's detail: how (``via``), whether degraded, what the provider showed."""
        out: dict[str, Any] = {"via": self.method, "provider": self.provider, **self.evidence}
        if self.accepted:
            out["degraded"] = self.degraded
        if self.error is not None:
            out["error"] = self.error
        return out


class Provider(Protocol):
    name: str
    pushes: bool
    """Whether it has a runtime to hand records to. False: records wait in the mailbox for receive, and the
    app neither reads a committed record back nor starts a delivery for it (the hot path of a plain send)."""

    async def deliver(self, recipient: AgentRow, record: dict[str, Any]) -> ProviderResult | None:
        """Make a committed information, reply or notice visible to ``recipient``.

        Returns what the handoff proved (already recorded as its stage), or None
        when there was nothing to hand off (no runtime: it waits in the mailbox).
        """

    def in_context(self, recipient: AgentRow) -> bool:
        """Whether what is committed for ``recipient`` now goes into its live conversation (a provider path).

        The app then wakes the recipient's waiters only once the provider has
        answered: with ``provider_context_available`` when the record reached
        the conversation, so a waiting tool returns without a duplicate body.
        """

    async def dispatch(self, recipient: AgentRow) -> int:
        """Give the recipient's pending tasks a dispatch opportunity; how many a turn accepted."""

    async def interrupt(self, target: AgentRow) -> dict[str, Any]:
        """Interrupt the target's active turn, or raise ``not_active``/``unsupported``."""

    async def spawn_child(self, parent: AgentRow, child: AgentRow, fork: str | int,
                          after_call: str | None = None) -> None:
        """Start a collaboration child (already registered, its first task admitted) beside ``parent``.

        ``fork`` is ``all``, ``none`` or a number of the parent's latest turns
        (:func:`peerwire.collab.fork_turns`). ``after_call``: the id of the
        parent's spawn call, when its client named it; the history a child
        inherits reaches at least that far. A child that cannot start has its
        first task failed, attributed to peerwire; nothing is raised.
        """

    def recover(self) -> None:
        """At start-up, finish what a stopped app left: publish what was captured, never replay."""

    def publish_captured(self) -> None:
        """Publish the turn outcomes the store refused to take earlier (called on every receive; cheap when
        there are none)."""

    async def close(self) -> None:
        """At shutdown: release every runtime; turns still running become uncertain."""


@runtime_checkable
class RuntimeOwner(Protocol):
    """A provider that owns agent runtimes the operator attaches and prompts (``attach_codex`` ...)."""

    async def attach(self, agent: AgentRow, *, codex: str, codex_home: str, cwd: str,
                     env: Mapping[str, str] | None = None, resume: bool = False,
                     capabilities: Sequence[str] | None = None, child_mcp_servers: Sequence[str] = (),
                     listen: str | None = None) -> dict[str, Any]:
        """Start the agent's owner (a new generation); resume its known thread when ``resume``."""

    async def detach(self, agent_id: str) -> dict[str, Any]:
        """Stop the agent's owner; its turns in flight become uncertain."""

    async def prompt(self, agent: AgentRow, text: str) -> dict[str, Any]:
        """An operator's message: a new turn on the agent's idle owner (``turn_id``, ``thread_id``)."""

    async def await_turn(self, agent: AgentRow, turn_id: str, timeout_s: float) -> dict[str, Any]:
        """Wait until a turn of the agent's current owner completed (``turn_id``, ``status``)."""

    def describe(self) -> list[dict[str, Any]]:
        """Every attached owner: agent, generation, thread, active turn, pid, completed turns."""


ProviderFactory = Callable[["Store", Committed, Path], Provider]
"""Builds a runtime provider on the app's store: ``(store, committed, its own folder in the home)``."""


def no_active_turn(target: AgentRow, *, attached: bool) -> PeerwireError:
    """What ``interrupt_agent`` says of an agent with a runtime but no turn to interrupt (its owner is
    ``offline`` when none is attached, else ``idle``): ``not_active``, never a success."""
    previous = "idle" if attached else "offline"
    return PeerwireError(Code.NOT_ACTIVE, f"{target.name} has no active turn to interrupt ({previous})",
                         {"target": target.ref, "previous_status": previous})


class ManualProvider:
    """No runtime to push into: records wait in the mailbox for receive."""

    name = "manual"
    pushes = False

    async def deliver(self, recipient: AgentRow, record: dict[str, Any]) -> ProviderResult | None:
        return None

    def in_context(self, recipient: AgentRow) -> bool:
        return False

    async def dispatch(self, recipient: AgentRow) -> int:
        return 0

    async def interrupt(self, target: AgentRow) -> dict[str, Any]:
        raise PeerwireError(
            Code.UNSUPPORTED,
            f"agent {target.name!r} uses the manual provider, which has no turn to interrupt",
            {"target": target.ref, "previous_status": target.status},
        )

    async def spawn_child(self, parent: AgentRow, child: AgentRow, fork: str | int,
                          after_call: str | None = None) -> None:
        return None  # no runtime: the child reads its first task with receive

    def recover(self) -> None:
        return None

    def publish_captured(self) -> None:
        return None

    async def close(self) -> None:
        return None


def require_known(provider: str, providers: Mapping[str, Provider]) -> Provider:
    """The adapter for ``provider``; ``unknown_provider`` when there is none."""
    adapter = providers.get(provider)
    if adapter is None:
        known = ", ".join(sorted(set(known_providers()) | set(providers)))
        raise PeerwireError(
            Code.UNKNOWN_PROVIDER,
            f"no delivery adapter for provider {provider!r} (known: {known}); nothing was sent",
            {"provider": provider},
        )
    return adapter
