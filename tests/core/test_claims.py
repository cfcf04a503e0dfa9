"""The Codex adapter against the real store: one claim per task, and nothing uncertain replayed.

A stand-in app-server (:class:`ScriptedAppServer`) answers ``turn/start`` as
each test scripts it and records every request the adapter sends, so the
tests can say exactly what the adapter did and did not send; the store, the
claims and the adapter are the real ones. A restart is a new store connection
and a new adapter on the same database file, with the adapter's startup
recovery, as ``peerwire app`` does it.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.contract.manifest import requirement
from peerwire.codex.adapter import CodexProvider
from peerwire.codex.app_server import AppServerExited, JsonRpcError
from peerwire.stdio_peer import Arrivals
from peerwire.store import Store
from tests.patience import WAIT_S

TIMEOUT_S = WAIT_S


class ScriptedAppServer:
    """Stands in for ``AppServerClient``: ``turn/start`` outcomes come from a script.

    An outcome is ``"ok"`` (a new turn id) or an exception to raise. Nothing
    is ever notified: a started turn stays in flight.
    """

    _threads = itertools.count(1)

    def __init__(self, outcomes: list[Any] | None = None):
        self.outcomes = list(outcomes or [])
        self.sent: list[tuple[str, Any]] = []
        self.arrivals = Arrivals()  # nothing is notified unless a subclass does
        self.exited = None
        self.pid = 0
        self.initialize_result = None  # no version: capabilities are not checked
        self.transcript = SimpleNamespace(path=None)
        self._turns = itertools.count(1)
        self._closed = asyncio.Event()

    async def thread_start(self, *, cwd: Any = None, extra: Any = None, timeout: float = 0) -> dict:
        self.sent.append(("thread/start", None))
        return {"thread": {"id": f"thread-{next(self._threads)}"}}

    async def thread_resume(self, thread_id: str, *, extra: Any = None, timeout: float = 0) -> dict:
        self.sent.append(("thread/resume", thread_id))
        return {"thread": {"id": thread_id}}

    async def thread_fork(self, thread_id: str, *, extra: Any = None, timeout: float = 0) -> dict:
        self.sent.append(("thread/fork", thread_id))
        return {"thread": {"id": f"thread-{next(self._threads)}"}}

    async def thread_set_name(self, thread_id: str, name: str, *, timeout: float = 0) -> dict:
        self.sent.append(("thread/name/set", thread_id))
        return {}

    async def mcp_server_status(self, thread_id: str, *, timeout: float = 0) -> dict:
        self.sent.append(("mcpServerStatus/list", thread_id))
        return {"data": []}

    async def thread_read(self, thread_id: str, *, include_turns: bool = False, timeout: float = 0) -> dict:
        self.sent.append(("thread/read", thread_id))
        return {"thread": {"id": thread_id, "turns": []}}

    async def turn_start(self, thread_id: str, input: Any, *, extra: Any = None, timeout: float = 0) -> dict:
        self.sent.append(("turn/start", (extra or {}).get("clientUserMessageId")))
        outcome = self.outcomes.pop(0) if self.outcomes else "ok"
        if isinstance(outcome, BaseException):
            raise outcome
        return {"turn": {"id": f"turn-{next(self._turns)}"}}

    async def turn_steer(self, thread_id: str, expected_turn_id: str, input: Any, *, extra: Any = None,
                         timeout: float = 0) -> dict:
        self.sent.append(("turn/steer", (extra or {}).get("clientUserMessageId")))
        return {"turnId": expected_turn_id}

    async def thread_inject_items(self, thread_id: str, items: Any, *, timeout: float = 0) -> dict:
        self.sent.append(("thread/inject_items", None))
        return {}

    async def turn_interrupt(self, thread_id: str, turn_id: str, *, timeout: float = 0) -> dict:
        self.sent.append(("turn/interrupt", turn_id))
        return {}

    @property
    def received(self) -> list[Any]:
        return self.arrivals.received

    def notifications(self, *, since: int = 0):
        return self.arrivals.iterate(since)  # ends when the client closes

    async def close(self, timeout: float = 0) -> int:
        self._closed.set()
        await self.arrivals.end()
        return 0

    def task_starts(self, request_id: str) -> int:
        return sum(1 for method, rid in self.sent if method in ("turn/start", "turn/steer") and rid == request_id)


class Core:
    """A store and a Codex adapter on ``db``, as the app wires them (one per app start)."""

    def __init__(self, db: Path, server: ScriptedAppServer):
        self.store = Store(db)
        self.server = server
        self.published: list[str] = []

        async def start_client(**_: Any) -> ScriptedAppServer:
            return server

        self.codex = CodexProvider(self.store, lambda _, ix: self.published.append(ix), db.parent / "codex",
                                   start_client=start_client)

    def agent(self, name: str):
        return next(a for a in self.store.registry.agents() if a.name == name)

    async def attach(self, name: str = "B") -> None:
        await asyncio.wait_for(self.codex.attach(self.agent(name), codex="codex", codex_home="h", cwd="w"),
                               TIMEOUT_S)

    async def dispatch(self, name: str = "B") -> None:
        await asyncio.wait_for(self.codex.dispatch(self.agent(name)), TIMEOUT_S)

    async def close(self) -> None:
        for agent_id in list(self.codex.owners):
            owner = self.codex.owners.pop(agent_id)
            if owner.watcher is not None:
                owner.watcher.cancel()
        await self.server.close()
        self.store.close()


def _pair(db: Path) -> tuple[str, str]:
    store = Store(db)
    a, _ = store.registry.register_agent("A", "manual")
    b, _ = store.registry.register_agent("B", "codex")
    store.close()
    return a.agent_id, b.agent_id


@requirement("task:claim:dispatch-or-receive")
@pytest.mark.parametrize("first", ["receive", "dispatch"])
def test_dispatch_and_receive_share_one_durable_claim(tmp_path: Path, first: str):
    db = tmp_path / "peerwire.db"
    _pair(db)

    async def run() -> None:
        core = Core(db, ScriptedAppServer())
        request_id = core.store.mailbox.admit_task(core.agent("A"), core.agent("B"), "exactly one of you")["request_id"]
        if first == "receive":
            assert core.store.mailbox.receive(core.agent("B"), limit=10).new_work == [request_id]
            await core.attach()  # attaching dispatches whatever is pending
            await core.dispatch()
            assert core.server.task_starts(request_id) == 0, core.server.sent
        else:
            await core.attach()
            assert core.server.task_starts(request_id) == 1, core.server.sent
            page = core.store.mailbox.receive(core.agent("B"), limit=10)
            assert [r["request_id"] for r in page.records if r["kind"] == "task"] == [request_id]
            assert page.new_work == [], "the task dispatch claimed was exposed again by receive"
        claims = core.store.database.db.execute("SELECT claimant FROM claims WHERE request_id = ?",
                                                (request_id,)).fetchall()
        assert [c[0] for c in claims] == [first]
        await core.close()

        # The claim is durable: after a restart dispatch does not start the task, and a receive
        # lists it again only if the receive's own claim was never acknowledged, under that claim.
        restarted = Core(db, ScriptedAppServer())
        restarted.codex.recover()
        await restarted.attach()
        await restarted.dispatch()
        assert restarted.server.task_starts(request_id) == 0, restarted.server.sent
        page = restarted.store.mailbox.receive(restarted.agent("B"), limit=10)
        assert page.new_work == ([request_id] if first == "receive" else [])
        claims = restarted.store.database.db.execute("SELECT claimant FROM claims WHERE request_id = ?", (request_id,))
        assert [c[0] for c in claims] == [first], "never a second claim"
        await restarted.close()

    asyncio.run(run())


FAILURES = {
    "lost-acknowledgement": TimeoutError(),
    "turn-start-error": JsonRpcError(-32603, "internal error"),
    "app-server-exited": AppServerExited(1, ["gone"]),
}


@requirement("delivery:uncertain:never-replayed")
@pytest.mark.parametrize("failure", [*FAILURES, "restart-mid-turn"])
def test_an_uncertain_task_is_never_sent_again(tmp_path: Path, failure: str):
    db = tmp_path / "peerwire.db"
    _pair(db)

    async def run() -> None:
        outcomes = [FAILURES[failure]] if failure in FAILURES else ["ok"]
        servers = [ScriptedAppServer(outcomes)]
        core = Core(db, servers[-1])
        request_id = core.store.mailbox.admit_task(core.agent("A"), core.agent("B"),
                                                   "may or may not arrive")["request_id"]
        await core.attach()
        if failure == "restart-mid-turn":
            # The turn was accepted; the app stops before it completes and starts again.
            await core.close()
            servers.append(ScriptedAppServer())
            core = Core(db, servers[-1])
            core.codex.recover()
            await core.attach()
        task_id = core.store.mailbox.request(request_id)["task_interaction_id"]
        assert core.store.mailbox.interaction(task_id)["state"] == "uncertain"
        notices = [r for r in core.store.mailbox.receive(core.agent("A"), limit=10).records
                   if r["kind"] == "notice" and r.get("request_id") == request_id]
        assert [n["code"] for n in notices] == ["delivery_uncertain"], "the requester is told, once"

        # Later dispatch opportunities (new work, another restart) send the new work, never the uncertain task.
        later = core.store.mailbox.admit_task(core.agent("A"), core.agent("B"), "a later task")["request_id"]
        await core.dispatch()
        assert servers[-1].task_starts(later) == 1, servers[-1].sent
        await core.close()
        servers.append(ScriptedAppServer())
        core = Core(db, servers[-1])
        core.codex.recover()
        await core.attach()
        await core.dispatch()
        assert [s.task_starts(request_id) for s in servers] == [1] + [0] * (len(servers) - 1), \
            [s.sent for s in servers]
        assert core.store.mailbox.receive(core.agent("B"), limit=10).new_work == [], "nor is it offered as new work"
        await core.close()

    asyncio.run(run())


def test_an_owner_that_exits_under_a_prompt_or_an_interrupt_is_not_active_not_internal(tmp_path: Path):
    """An app-server that goes away under an operator's prompt or an interrupt is the agent being gone:
    ``not_active``, naming the generation and keeping Codex's last words; never ``internal``."""
    from peerwire.errors import Code, PeerwireError

    db = tmp_path / "peerwire.db"
    _pair(db)

    class ExitingInterrupt(ScriptedAppServer):
        async def turn_interrupt(self, thread_id: str, turn_id: str, *, timeout: float = 0) -> dict:
            raise AppServerExited(0, ["codex: shutting down"])

    async def run() -> None:
        core = Core(db, ExitingInterrupt([AppServerExited(1, ["codex: killed"])]))
        await core.attach()
        with pytest.raises(PeerwireError) as refused:
            await core.codex.prompt(core.agent("B"), "are you there?")
        assert refused.value.code is Code.NOT_ACTIVE
        assert "B's owner (generation 1) exited while the prompt was given" in refused.value.message
        assert refused.value.details["stderr_tail"] == ["codex: killed"]
        turn = await core.codex.prompt(core.agent("B"), "are you there now?")  # the next turn/start succeeds
        core.codex.owners[core.agent("B").agent_id].turns.started(turn["turn_id"])  # as turn/started would
        with pytest.raises(PeerwireError) as refused:
            await asyncio.wait_for(core.codex.interrupt(core.agent("B")), TIMEOUT_S)
        assert refused.value.code is Code.NOT_ACTIVE and "exited while turn" in refused.value.message
        assert refused.value.details["turn_id"] == turn["turn_id"]
        assert refused.value.details["previous_status"] == "active"
        await core.close()

    asyncio.run(run())
