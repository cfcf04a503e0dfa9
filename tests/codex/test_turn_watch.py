"""The Codex adapter's failure paths, against the real store and a stand-in app-server that notifies.

* A turn that ends with a status peerwire does not know is no answer: its
  tasks stay uncertain (announced, never replayed), never ``done``.
* A reply that cannot be written (the store refuses it) costs that reply a
  delay, not the owner its watcher: later turns are still observed, and the
  captured outcome is published at the next receive (or start-up).
* A disabled agent gets nothing through its live owner: no task is started or
  steered into its turns and no mail is injected; its tasks wait until it is
  enabled again.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import pytest

from harness.contract.manifest import requirement
from peerwire.codex.adapter import CodexProvider
from peerwire.delivery import Delivery
from peerwire.errors import Code, PeerwireError
from peerwire.hub import WakeHub
from peerwire.operations import Operations
from peerwire.providers import ManualProvider
from peerwire.store import Store
from tests.core.test_claims import ScriptedAppServer
from tests.patience import WAIT_S

TIMEOUT_S = WAIT_S


class NotifyingAppServer(ScriptedAppServer):
    """A stand-in whose turns the test ends: :meth:`finish` notifies started, the final answer and completed."""

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.arrivals.add(method, params)

    def started_turns(self) -> list[str]:
        return [f"turn-{n}" for n, (method, _) in enumerate(
            (s for s in self.sent if s[0] == "turn/start"), start=1)]

    async def finish(self, thread_id: str, turn_id: str, status: str, text: str | None = "the answer") -> None:
        await self.notify("turn/started", {"threadId": thread_id, "turn": {"id": turn_id}})
        if text is not None:
            await self.notify("item/completed", {"threadId": thread_id, "turnId": turn_id, "item": {
                "type": "agentMessage", "id": f"item-{turn_id}", "text": text, "phase": "final_answer"}})
        await self.notify("turn/completed", {"threadId": thread_id, "turn": {"id": turn_id, "status": status}})


class App:
    """The store, the adapter and the operations, wired as ``peerwire app`` wires them."""

    def __init__(self, db: Path, server: NotifyingAppServer):
        self.store = Store(db)
        self.server = server
        self.delivery = Delivery(self.store, WakeHub(), {"manual": ManualProvider()})

        async def start_client(**_: Any) -> NotifyingAppServer:
            return server

        self.codex = CodexProvider(self.store, self.delivery.published, db.parent / "codex", start_client=start_client)
        self.delivery.providers["codex"] = self.codex
        self.ops = Operations(self.store, self.delivery)
        self.a, self.a_token = self.store.registry.register_agent("A", "manual")
        self.b, self.b_token = self.store.registry.register_agent("B", "codex")

    async def attach(self) -> str:
        owner = await asyncio.wait_for(self.codex.attach(self.store.registry.agent(self.b.agent_id), codex="codex",
                                                         codex_home="h", cwd="w"), TIMEOUT_S)
        return owner["thread_id"]

    async def task(self, body: str) -> str:
        receipt = await self.ops.call_tool("messaging", "followup_task", {"target": "B", "message": body}, {},
                                           caller=lambda: self.store.registry.caller(self.a_token))
        await self.settle()
        return receipt["request_id"]

    async def settle(self) -> None:
        """Let the adapter's background work (dispatch, watching) catch up."""
        for _ in range(50):
            await asyncio.sleep(0)
        if self.delivery._background:
            await asyncio.wait(list(self.delivery._background), timeout=TIMEOUT_S)

    async def replies_to_a(self) -> list[dict]:
        page = await self.ops.call_tool("messaging", "receive_messages", {"limit": 100}, {},
                                        caller=lambda: self.store.registry.caller(self.a_token))
        return [r for r in page["records"] if r["kind"] in ("reply", "notice")]

    async def close(self) -> None:
        await self.codex.close()
        self.store.close()


def run(coro) -> None:
    asyncio.run(asyncio.wait_for(coro, WAIT_S))


@requirement("delivery:turn-outcome:unknown-status")
@pytest.mark.parametrize("status", ["cancelled", "inProgress", None, 7])
def test_a_turn_ending_with_a_status_peerwire_does_not_know_is_uncertain_never_done(tmp_path, status):
    async def scenario() -> None:
        app = App(tmp_path / "peerwire.db", NotifyingAppServer())
        thread = await app.attach()
        request_id = await app.task("count the apples")
        assert app.server.task_starts(request_id) == 1
        await app.server.finish(thread, "turn-1", status)
        await app.settle()
        task = app.store.mailbox.interaction(app.store.mailbox.request(request_id)["task_interaction_id"])
        assert task["state"] == "uncertain", task
        answers = await app.replies_to_a()
        assert [(r["kind"], r.get("status")) for r in answers if r.get("request_id") == request_id] == [
            ("notice", None)], answers
        assert not any(r.get("status") == "done" for r in answers)
        later = await app.task("a later task")
        assert app.server.task_starts(later) == 1 and app.server.task_starts(request_id) == 1, "never replayed"
        await app.close()

    run(scenario())


@requirement("delivery:turn-outcome:watch-survives")
def test_a_reply_the_store_refuses_costs_no_later_turn_and_is_published_at_the_next_receive(tmp_path):
    async def scenario() -> None:
        app = App(tmp_path / "peerwire.db", NotifyingAppServer())
        thread = await app.attach()
        first = await app.task("first")
        real_publish = app.store.bindings.publish_outcome
        failures = itertools.count()

        def refusing_once(*args, **kwargs):
            if next(failures) == 0:
                raise PeerwireError(Code.STORAGE_UNAVAILABLE, "the disk is full", {"retriable": True})
            return real_publish(*args, **kwargs)

        app.store.bindings.publish_outcome = refusing_once
        await app.server.finish(thread, "turn-1", "completed", "first answer")
        await app.settle()
        # The watcher lives on: the next task's turn is observed and answered.
        second = await app.task("second")
        assert app.server.task_starts(second) == 1
        await app.server.finish(thread, "turn-2", "completed", "second answer")
        await app.settle()
        replies = {r["request_id"]: r["body"] for r in await app.replies_to_a() if r["kind"] == "reply"}
        assert replies == {first: "first answer", second: "second answer"}, replies
        await app.close()

    run(scenario())


@requirement("target:disabled:nothing-delivered")
def test_a_disabled_agent_with_a_live_owner_gets_no_task_and_no_mail_until_enabled(tmp_path):
    async def scenario() -> None:
        app = App(tmp_path / "peerwire.db", NotifyingAppServer())
        await app.attach()
        agent = app.store.registry.agent
        waiting = app.store.mailbox.admit_task(agent(app.a.agent_id), agent(app.b.agent_id),
                                               "admitted before the agent was disabled")["request_id"]
        await app.ops.call("set_agent", {"agent_id": app.b.agent_id, "enabled": False}, None, None)
        injected = len([s for s in app.server.sent if s[0] == "thread/inject_items"])
        await app.codex.dispatch(agent(app.b.agent_id))
        record = app.store.mailbox.admit_information(agent(app.a.agent_id), agent(app.b.agent_id), "mail")
        await app.codex.deliver(agent(app.b.agent_id), app.store.mailbox.interaction(record["interaction_id"]))
        assert app.server.task_starts(waiting) == 0, app.server.sent
        assert len([s for s in app.server.sent if s[0] == "thread/inject_items"]) == injected
        # Enabled again, its pending task gets its opportunity.
        await app.ops.call("set_agent", {"agent_id": app.b.agent_id, "enabled": True}, None, None)
        await app.settle()
        assert app.server.task_starts(waiting) == 1, app.server.sent
        await app.close()

    run(scenario())
