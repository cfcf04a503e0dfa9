"""The wake hub's view of who is waiting: a subscription is not yet a blocked wait.

Every receive subscribes before its first read of the store, so that a commit
landing between the read and the wait still wakes it. An operator (or a test)
that sends as soon as it sees a "waiting" recipient must therefore see only
waits that have read, found nothing and blocked; otherwise the message is read
by the first read, not woken on.
"""

from __future__ import annotations

import asyncio

from peerwire.hub import PROVIDER_CONTEXT_AVAILABLE, WakeHub
from tests.patience import WAIT_S


def test_a_subscription_counts_as_waiting_only_while_it_blocks():
    async def scenario():
        hub = WakeHub()
        with hub.subscribe("b") as sub:
            assert hub.subscribed() == {"b": 1}
            assert hub.waiting() == {}  # subscribed, still reading: not waiting
            waiter = asyncio.ensure_future(sub.wait(WAIT_S))
            for _ in range(100):
                if hub.waiting():
                    break
                await asyncio.sleep(0)
            assert hub.waiting() == {"b": 1}
            assert hub.notify("b", PROVIDER_CONTEXT_AVAILABLE) == 1
            assert await asyncio.wait_for(waiter, WAIT_S) is True
            assert sub.reason == PROVIDER_CONTEXT_AVAILABLE
            assert hub.waiting() == {} and hub.subscribed() == {"b": 1}
        assert hub.subscribed() == {} and hub.waiting() == {}

    asyncio.run(scenario())


def test_a_wait_that_times_out_stops_counting():
    async def scenario():
        hub = WakeHub()
        with hub.subscribe("b") as sub:
            assert await sub.wait(0.01) is False  # the bound under test
            assert hub.waiting() == {} and hub.subscribed() == {"b": 1}

    asyncio.run(scenario())
