"""After a commit: wake the recipient's waiters, then hand the record to its provider.

Both tool sets (:mod:`.operations`, :mod:`.collab_ops`) and the provider adapters
(through :meth:`Delivery.published`) go through here, so the order holds for
every record: nothing is signalled or delivered before it is durable, and
provider work runs after the caller has its answer, in the background, where a
failure is logged and never lost silently.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Awaitable

from .hub import MAILBOX_ACTIVITY, PROVIDER_CONTEXT_AVAILABLE, USER_INPUT, WakeHub
from .providers import Provider, ProviderResult
from .registry_rules import AgentRow
from .store import Store

log = logging.getLogger("peerwire.app")


class Delivery:
    def __init__(self, store: Store, hub: WakeHub, providers: dict[str, Provider]):
        self.store = store
        self.hub = hub
        self.providers = providers
        self._background: set[asyncio.Task] = set()

    def after_commit(self, recipient: AgentRow, interaction_id: str) -> None:
        """A record is durable: wake the recipient's waiters, then hand it to its provider (if any).

        When the provider puts it into the recipient's live conversation, the
        waiters are woken once it has answered (see :meth:`_then_wake`).
        """
        provider = self.providers.get(recipient.provider)
        if provider is None or not provider.pushes:
            self.hub.notify(recipient.agent_id)  # it waits in the mailbox: nothing to read back or hand off
            return
        if not provider.in_context(recipient):
            self.hub.notify(recipient.agent_id)
            record = self.store.mailbox.interaction(interaction_id)
            self.in_background(provider.deliver(recipient, record), f"deliver {interaction_id}")
            return
        record = self.store.mailbox.interaction(interaction_id)
        self.in_background(self._then_wake(recipient, provider.deliver(recipient, record)),
                           f"deliver {interaction_id}")

    def task_admitted(self, recipient: AgentRow) -> None:
        """A task is durable: wake the recipient's waiters, then give its provider a dispatch opportunity."""
        provider = self.providers.get(recipient.provider)
        if provider is None or not provider.pushes:
            self.hub.notify(recipient.agent_id)
            return
        if not provider.in_context(recipient):
            self.hub.notify(recipient.agent_id)
            self.in_background(provider.dispatch(recipient), f"dispatch to {recipient.name}")
            return
        self.in_background(self._then_wake(recipient, provider.dispatch(recipient)),
                           f"dispatch to {recipient.name}")

    async def _then_wake(self, recipient: AgentRow, handed: Awaitable[ProviderResult | int | None]) -> None:
        """Wake the recipient's waiters after its provider answered: ``provider_context_available`` when the
        record reached its conversation (the waiter returns without a duplicate body and acknowledges
        nothing), ``mailbox_activity`` otherwise, failures included (it is in the mailbox either way)."""
        reached = False
        try:
            result = await handed
            # A task accepted into a turn (a count), or a record the provider proved visible (not merely a
            # handoff started): only then is it in the conversation.
            reached = result > 0 if isinstance(result, int) else (
                result is not None and result.accepted and not result.degraded)
        finally:
            self.hub.notify(recipient.agent_id, PROVIDER_CONTEXT_AVAILABLE if reached else MAILBOX_ACTIVITY)

    def publish_captured(self) -> None:
        """Have every provider publish the turn outcomes it still owes (see ``Provider.publish_captured``)."""
        for provider in self.providers.values():
            owed = getattr(provider, "publish_captured", None)
            if owed is not None:
                owed()

    def user_input(self, agent: AgentRow) -> None:
        """A person's input reached ``agent``'s conversation: wake its collaboration waits (``user_input``)."""
        self.hub.notify(agent.agent_id, USER_INPUT)

    def published(self, recipient_id: str, interaction_id: str) -> None:
        """A record the app wrote itself (a turn's reply, a notice): wake and deliver it."""
        self.after_commit(self.store.registry.agent(recipient_id), interaction_id)

    def in_background(self, coro: Awaitable[object], what: str) -> None:
        """Run provider work after the reply to the caller; failures are logged, never lost silently."""
        task = asyncio.ensure_future(coro)
        self._background.add(task)

        def done(t: asyncio.Task) -> None:
            self._background.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.error("%s failed: %r", what, t.exception())

        task.add_done_callback(done)

    async def drain(self) -> None:
        """Let admitted deliveries finish (used at shutdown)."""
        if self._background:
            await asyncio.wait(list(self._background), timeout=5)
