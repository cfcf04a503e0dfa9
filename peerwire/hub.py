"""Mailbox signals inside the app: who is waiting for which recipient.

A waiter subscribes *before* it reads durable state, so a commit that lands
between the read and the wait still wakes it. Waking is a signal only: the
waiter reads the store again to see what arrived.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict


class Subscription:
    def __init__(self, hub: "WakeHub", agent_id: str):
        self._hub = hub
        self.agent_id = agent_id
        self._event = asyncio.Event()
        self.reason: str | None = None

    def wake(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        self._event.set()

    async def wait(self, timeout_s: float) -> bool:
        """True when woken, False when ``timeout_s`` passed first."""
        if self._event.is_set():
            return True
        if timeout_s <= 0:
            return False
        try:
            await asyncio.wait_for(self._event.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    def rearm(self) -> None:
        self._event.clear()
        self.reason = None

    def __enter__(self) -> "Subscription":
        return self

    def __exit__(self, *exc: object) -> None:
        self._hub._drop(self)


class WakeHub:
    def __init__(self) -> None:
        self._waiters: dict[str, set[Subscription]] = defaultdict(set)

    def subscribe(self, agent_id: str) -> Subscription:
        sub = Subscription(self, agent_id)
        self._waiters[agent_id].add(sub)
        return sub

    def notify(self, agent_id: str, reason: str = "mailbox_activity") -> int:
        subs = list(self._waiters.get(agent_id, ()))
        for sub in subs:
            sub.wake(reason)
        return len(subs)

    def waiting(self) -> dict[str, int]:
        """How many waiters each recipient has right now."""
        return {agent_id: len(subs) for agent_id, subs in self._waiters.items() if subs}

    def _drop(self, sub: Subscription) -> None:
        subs = self._waiters.get(sub.agent_id)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._waiters[sub.agent_id]
