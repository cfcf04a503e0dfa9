"""Mailbox signals inside the app: who is waiting for which recipient, and whether they still are.

A waiter subscribes *before* it reads durable state, so a commit that lands
between the read and the wait still wakes it. Waking is a signal only: the
waiter reads the store again to see what arrived.

Every operation runs on behalf of a caller who may leave: its control
connection closes, or its MCP client cancels the request. The app gives each
operation a :class:`Presence` (in the context variable :data:`presence`); when
the caller leaves, every wait of that operation ends at once with
:class:`CallerGone`, and :func:`require_present` stops it before it claims
anything. Operations run outside any connection (in-process tests) have no
presence and are always considered there.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from contextvars import ContextVar

from .errors import Code, PeerwireError
from .limits import MAX_WAITERS_PER_CALLER


class CallerGone(Exception):
    """The caller of the running operation cancelled it or disconnected: stop, claim nothing."""


class Presence:
    """Whether the caller of one operation is still there to take its answer."""

    __slots__ = ("_gone", "_subs", "reason")

    def __init__(self) -> None:
        self._gone = False
        self._subs: set[Subscription] = set()
        self.reason: str | None = None

    @property
    def gone(self) -> bool:
        return self._gone

    def leave(self, reason: str) -> None:
        """The caller is gone: wake the operation's waits so they end now, not at their timeout."""
        if self._gone:
            return
        self._gone = True
        self.reason = reason
        for sub in list(self._subs):
            sub.wake("caller_gone")


presence: ContextVar[Presence | None] = ContextVar("peerwire_presence", default=None)


def require_present() -> None:
    """Raise :class:`CallerGone` when the current operation's caller has left."""
    current = presence.get()
    if current is not None and current.gone:
        raise CallerGone(current.reason)


MAILBOX_ACTIVITY = "mailbox_activity"
"""A record was committed for the recipient: it is in the mailbox."""
PROVIDER_CONTEXT_AVAILABLE = "provider_context_available"
"""A record reached the recipient's live conversation through its provider: the model already has it."""
USER_INPUT = "user_input"
"""A person's input reached the recipient's conversation (the operator's prompt): only a collaboration
profile's wait completes on it; it is no mailbox activity."""


class Subscription:
    def __init__(self, hub: "WakeHub", agent_id: str):
        self._hub = hub
        self.agent_id = agent_id
        self._event = asyncio.Event()
        self.reason: str | None = None
        self.reasons: set[str] = set()
        """Every reason it was woken for since it was armed (``reason`` is the first)."""
        self.blocked = False  # inside wait(), with nothing to return yet: what ``waiting`` counts
        self._presence = presence.get()
        if self._presence is not None:
            self._presence._subs.add(self)

    def wake(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        self.reasons.add(reason)
        self._event.set()

    async def wait(self, timeout_s: float) -> bool:
        """True when woken, False when ``timeout_s`` passed first; :class:`CallerGone` when the caller left."""
        require_present()
        if self._event.is_set():
            return True
        if timeout_s <= 0:
            return False
        self.blocked = True
        try:
            await asyncio.wait_for(self._event.wait(), timeout_s)
        except TimeoutError:
            return False
        finally:
            self.blocked = False
        require_present()
        return True

    def rearm(self) -> None:
        self._event.clear()
        self.reason = None
        self.reasons.clear()

    def __enter__(self) -> "Subscription":
        return self

    def __exit__(self, *exc: object) -> None:
        self._hub._drop(self)
        if self._presence is not None:
            self._presence._subs.discard(self)


class WakeHub:
    def __init__(self, max_waiters: int = MAX_WAITERS_PER_CALLER) -> None:
        self._waiters: dict[str, set[Subscription]] = defaultdict(set)
        self.max_waiters = max_waiters

    def subscribe(self, agent_id: str) -> Subscription:
        """A new subscription; ``too_many_waiters`` when the caller already holds the maximum."""
        held = self._waiters.get(agent_id)
        if held is not None and len(held) >= self.max_waiters:
            raise PeerwireError(
                Code.TOO_MANY_WAITERS,
                f"this caller already has {len(held)} waits pending (the limit is {self.max_waiters}); "
                "let one finish or cancel it, then wait again",
                {"limit": self.max_waiters},
            )
        sub = Subscription(self, agent_id)
        self._waiters[agent_id].add(sub)
        return sub

    def notify(self, agent_id: str, reason: str = MAILBOX_ACTIVITY) -> int:
        subs = self._waiters.get(agent_id)
        if not subs:
            return 0
        for sub in list(subs):
            sub.wake(reason)
        return len(subs)

    def waiting(self) -> dict[str, int]:
        """How many waits each recipient has blocked right now: subscribed, read, found nothing, and waiting.

        A wait subscribes before it reads the store, so a subscription alone does not mean the caller is
        waiting yet: its first read may still return what arrives in the meantime.
        """
        counts = {agent_id: sum(1 for sub in subs if sub.blocked) for agent_id, subs in self._waiters.items()}
        return {agent_id: n for agent_id, n in counts.items() if n}

    def subscribed(self) -> dict[str, int]:
        """How many subscriptions each recipient holds (blocked or reading): what the waiter limit counts."""
        return {agent_id: len(subs) for agent_id, subs in self._waiters.items() if subs}

    def _drop(self, sub: Subscription) -> None:
        subs = self._waiters.get(sub.agent_id)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._waiters[sub.agent_id]
