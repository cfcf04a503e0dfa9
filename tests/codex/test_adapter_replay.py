"""Every Codex delivery route replayed from its recorded fixture: no Codex process.

The adapter runs in-process against the real store; :class:`ReplayTransport`
plays the recorded app-server side. What the adapter wrote is judged by
properties that hold on every route (:func:`check_properties`): each record's
evidence is a legal path through its lifecycle table and ends in its state,
each binding's evidence a legal path through the binding table, one reply per
task, and every binding names a thread and a turn the transcript holds.

One syrupy snapshot per route remains: the wire lines the adapter sent to the
app-server (methods and parameters, run-specific ids replaced). It guards what
peerwire says to Codex -- thread settings, the text a task becomes, what a
steer expects -- so a change to it is a protocol change, reviewed as one.
Refresh the fixtures with ``python runner.py record`` and that snapshot with
``pytest --snapshot-update``.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from harness.lab.recorded.routes import INPROCESS_ROUTES, ROUTES, stale_steer
from harness.codex.fixtures import FIXTURE_DIR
from harness.lab.recorded.replay import ReplayTransport
from peerwire.codex.adapter import CodexProvider
from peerwire.lifecycle import BINDING, LIFECYCLES, IllegalTransition, Kind, Lifecycle, Stage
from peerwire.store import Store
from tests.patience import WAIT_S

TIMEOUT_S = WAIT_S


class Core:
    """The store and adapter as the app wires them, with an event per published record."""

    def __init__(self, tmp: Path, path: str, hook=None):
        self.store = Store(tmp / "peerwire.db")
        self.a, _ = self.store.registry.register_agent("A", "codex")
        self.b, _ = self.store.registry.register_agent("B", "codex")
        self.published: list[str] = []
        self.changed = asyncio.Event()
        self.transport = ReplayTransport(FIXTURE_DIR / f"{path}.jsonl", hook)
        self.codex = CodexProvider(self.store, self._committed, tmp / "codex", start_client=self.transport)

    def _committed(self, recipient_id: str, interaction_id: str) -> None:
        self.published.append(interaction_id)
        self.changed.set()

    async def attach(self, resume: bool = False) -> None:
        await self.codex.attach(self.store.registry.agent(self.b.agent_id), codex="codex", codex_home="h", cwd="w",
                                resume=resume)

    async def task(self, text: str, requester: str = "A") -> str:
        sender = self.a if requester == "A" else self.store.registry.register_agent(requester, "manual")[0]
        receipt = self.store.mailbox.admit_task(sender, self.store.registry.agent(self.b.agent_id), text)
        await self.codex.dispatch(self.store.registry.agent(self.b.agent_id))
        return receipt["request_id"]

    async def reply_to(self, request_id: str) -> dict:
        async with asyncio.timeout(TIMEOUT_S):
            while True:
                reply = self.store.mailbox.request(request_id)["reply_interaction_id"]
                if reply:
                    return self.store.mailbox.interaction(reply)
                self.changed.clear()
                await self.changed.wait()

    async def turn_done(self, turn_id: str) -> None:
        owner = self.codex.owners[self.b.agent_id]
        async with asyncio.timeout(TIMEOUT_S):
            async with owner.changed:
                await owner.changed.wait_for(lambda: turn_id in owner.completed)

    def wire(self) -> list[dict]:
        """The lines the adapter sent to each app-server, in order, with run-specific ids replaced."""
        names: dict[str, str] = {}

        def scrub(text: str) -> str:
            text = re.sub(r"\b(rq|ix|cl|bd)_[0-9a-f]{32}\b",
                          lambda m: names.setdefault(m.group(0), f"<{m.group(1)}:{len(names) + 1}>"), text)
            return re.sub(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", "<agent>", text)

        return [json.loads(scrub(json.dumps(line, ensure_ascii=False)))
                for session in self.transport.opened for line in session.sent]


def _events_by_stage(lifecycle: Lifecycle) -> dict[Stage, str]:
    return {stage: event for event, stage in lifecycle.stages.items()}


def check_properties(core: Core) -> None:
    """What must hold after any route, whatever the route did (see the module docs)."""
    dump = core.store.dump()
    evidence: dict[str, list[dict]] = {}
    for row in sorted(dump["evidence"], key=lambda r: r["evidence_id"]):
        evidence.setdefault(row["interaction_id"], []).append({**row, "detail": json.loads(row["detail"])})
    bindings = {b["binding_id"]: b for b in dump["bindings"]}
    binding_events = _events_by_stage(BINDING)
    walked: dict[str, str] = {}
    for record in dump["interactions"]:
        lifecycle = LIFECYCLES[Kind(record["kind"])]
        events = _events_by_stage(lifecycle)
        state = lifecycle.initial
        for row in evidence.get(record["interaction_id"], []):
            stage = Stage(row["stage"])
            if stage in events:
                state = lifecycle.next(state, events[stage])  # raises on an illegal step
            binding_id = row["detail"].get("binding_id")
            if stage is Stage.PROVIDER_ACCEPTED:
                walked[binding_id] = BINDING.initial
            elif stage is Stage.PROVIDER_ACCEPTED_AFTER_REPLY:
                walked[binding_id] = BINDING.next(BINDING.initial, "suppress")
            elif stage in binding_events:
                before = walked[binding_id]
                walked[binding_id] = BINDING.next(before, binding_events[stage])
                assert (row["detail"]["from"], row["detail"]["to"]) == (before, walked[binding_id]), row
        assert state == record["state"], (record["kind"], record["body"][:60], state, record["state"])
    assert walked == {binding_id: b["state"] for binding_id, b in bindings.items()}, "bindings end where evidence says"

    tasks = [r for r in dump["interactions"] if r["kind"] == Kind.TASK]
    replies = [r for r in dump["interactions"] if r["kind"] == Kind.REPLY]
    requests = {r["task_interaction_id"]: r for r in dump["requests"]}
    for task in tasks:
        answered = [r for r in replies if r["request_id"] == task["request_id"]]
        assert len(answered) == (1 if task["state"] == "replied" else 0), (task["body"][:60], answered)
        assert requests[task["interaction_id"]]["reply_interaction_id"] == (
            answered[0]["interaction_id"] if answered else None)
    for binding in bindings.values():
        if binding["state"] == "published":
            (reply,) = [r for r in replies if r["request_id"] == binding["request_id"]]
            assert reply["reply_status"] == json.loads(binding["outcome"])["reply_status"]

    threads, turns = set(), set()
    for session in core.transport.opened:
        for line in session.lines[:session.cursor]:
            message = line.get("message") or {}
            if line["dir"] != "received":
                continue
            found = {**(message.get("params") or {}), **(message.get("result") or {})}
            threads.update(t for t in (found.get("threadId"), (found.get("thread") or {}).get("id")) if t)
            turns.update(t for t in ((found.get("turn") or {}).get("id"), found.get("turnId")) if t)
    for binding in bindings.values():
        assert binding["thread_id"] in threads and binding["turn_id"] in turns, (binding, threads, turns)


async def idle_start(core: Core) -> None:
    await core.attach()
    await core.reply_to(await core.task("[idle] What is six times seven?"))


async def failed_turn(core: Core) -> None:
    await core.attach()
    await core.reply_to(await core.task("[fail] no rule answers this"))


async def oversized_final(core: Core) -> None:
    await core.attach()
    await core.reply_to(await core.task("[oversize] write a lot"))


async def explicit_reply(core: Core) -> None:
    await core.attach()
    request_id = await core.task("[explicit] Please confirm.")
    await core.reply_to(request_id)
    binding = core.store.bindings.find()[0]
    await core.turn_done(binding["turn_id"])


async def steer(core: Core) -> None:
    await core.attach()
    first = await core.task("[hold] first task")
    second = await core.task("[steer] second task", requester="C")  # a second requester (see routes.steer)
    replies = [await core.reply_to(first), await core.reply_to(second)]
    # one turn answered both: each reply goes to the requester of its own request
    assert [(r["request_id"], r["recipient"]["name"]) for r in replies] == [(first, "A"), (second, "C")]


async def interrupt(core: Core) -> None:
    await core.attach()
    held = await core.task("[hold] keep me busy")
    result = await core.codex.interrupt(core.store.registry.agent(core.b.agent_id))
    await core.reply_to(held)
    await core.turn_done(result["turn_id"])
    await core.reply_to(await core.task("[idle] still there?"))


async def inject(core: Core) -> None:
    await core.attach()
    receipt = core.store.mailbox.admit_information(core.a, core.store.registry.agent(core.b.agent_id),
                                                   "FYI: the build is green ✓\nno action")
    await core.codex.deliver(core.store.registry.agent(core.b.agent_id),
                             core.store.mailbox.interaction(receipt["interaction_id"]))
    started = await core.codex.prompt(core.store.registry.agent(core.b.agent_id), "Please check your messages.")
    await core.turn_done(started["turn_id"])


async def resume(core: Core) -> None:
    await core.attach()
    await core.reply_to(await core.task("[idle] remember this answer"))
    await core.codex.detach(core.b.agent_id)
    request_id = core.store.mailbox.admit_task(core.a, core.store.registry.agent(core.b.agent_id),
                                               "[recall] what did you answer before?")["request_id"]
    await core.attach(resume=True)
    await core.reply_to(request_id)


async def stale_steer_path(core: Core) -> None:
    await core.attach()
    await stale_steer(core.codex, core.store, core.a, core.b)


REPLAYS = {f.__name__: f for f in (idle_start, explicit_reply, steer, interrupt, failed_turn, oversized_final,
                                   inject, resume)}
REPLAYS["stale_steer"] = stale_steer_path


def test_every_path_has_a_fixture_and_a_replay():
    assert set(REPLAYS) == set(ROUTES) | set(INPROCESS_ROUTES) == {p.stem for p in FIXTURE_DIR.glob("*.jsonl")}


@pytest.mark.parametrize("path", sorted(REPLAYS))
def test_replay(path, tmp_path, snapshot):
    holder: dict = {}

    async def hook(message):
        # The recorded MCP reply call: do to the core what B's MCP server did, at that moment.
        item = (message.get("params") or {}).get("item") or {}
        if message.get("method") == "item/completed" and item.get("type") == "mcpToolCall" \
                and item.get("tool") == "reply":
            core = holder["core"]
            request_id = core.store.dump()["requests"][0]["request_id"]
            receipt = core.store.mailbox.admit_reply(core.store.registry.agent(core.b.agent_id), request_id, "done",
                                                     "explicit answer ✓")
            core._committed(receipt["recipient"]["agent_id"], receipt["interaction_id"])

    async def run():
        core = Core(tmp_path, path, hook)
        holder["core"] = core
        try:
            await REPLAYS[path](core)
        finally:
            await core.codex.close()
        return core

    core = asyncio.run(run())
    check_properties(core)
    assert core.wire() == snapshot


@pytest.mark.parametrize("damage", ["illegal stage", "state column", "second reply", "unknown turn"])
def test_the_properties_find_a_damaged_route(damage, tmp_path):
    # The checks must be able to fail: each damage below breaks exactly one property of a healthy route.
    async def run():
        core = Core(tmp_path, "idle_start")
        try:
            await idle_start(core)
        finally:
            await core.codex.close()
        return core

    core = asyncio.run(run())
    check_properties(core)
    task = next(r for r in core.store.dump()["interactions"] if r["kind"] == "task")
    with core.store.database.db:
        if damage == "illegal stage":
            core.store.database.db.execute(
                "INSERT INTO evidence(interaction_id, stage, at) VALUES (?, 'claim_by_receive', '')",
                (task["interaction_id"],))
        elif damage == "state column":
            core.store.database.db.execute("UPDATE interactions SET state = 'uncertain' WHERE interaction_id = ?",
                                           (task["interaction_id"],))
        elif damage == "second reply":
            core.store.database.db.execute(
                """INSERT INTO interactions(interaction_id, kind, state, sender_name, recipient_id, recipient_name,
                       body, request_id, reply_status, created_at, updated_at)
                   SELECT 'ix_second', 'reply', 'published', sender_name, recipient_id, recipient_name, 'again',
                       request_id, 'done', created_at, updated_at FROM interactions
                   WHERE kind = 'reply' AND request_id = ?""", (task["request_id"],))
        else:
            core.store.database.db.execute("UPDATE bindings SET turn_id = 'a-turn-nobody-started'")
    with pytest.raises((AssertionError, IllegalTransition)):
        check_properties(core)
