"""Every Codex delivery route replayed from its recorded fixture: no Codex process.

The adapter runs in-process against the real store; :class:`ReplayTransport`
plays the recorded app-server side. The records and evidence the adapter
produces are held in syrupy snapshots. Refresh the fixtures with
``python runner.py record`` and the snapshots with ``pytest --snapshot-update``.
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
from peerwire.store import Store
from tests.patience import WAIT_S

TIMEOUT_S = WAIT_S


class Core:
    """The store and adapter as the app wires them, with an event per published record."""

    def __init__(self, tmp: Path, path: str, hook=None):
        self.store = Store(tmp / "peerwire.db")
        self.a, _ = self.store.register_agent("A", "codex")
        self.b, _ = self.store.register_agent("B", "codex")
        self.published: list[str] = []
        self.changed = asyncio.Event()
        self.transport = ReplayTransport(FIXTURE_DIR / f"{path}.jsonl", hook)
        self.codex = CodexProvider(self.store, self._committed, tmp / "codex", start_client=self.transport)

    def _committed(self, recipient_id: str, interaction_id: str) -> None:
        self.published.append(interaction_id)
        self.changed.set()

    async def attach(self, resume: bool = False) -> None:
        await self.codex.attach(self.store.agent(self.b.agent_id), codex="codex", codex_home="h", cwd="w",
                                resume=resume)

    async def task(self, text: str, requester: str = "A") -> str:
        sender = self.a if requester == "A" else self.store.register_agent(requester, "manual")[0]
        receipt = self.store.admit_task(sender, self.store.agent(self.b.agent_id), text)
        await self.codex.dispatch(self.store.agent(self.b.agent_id))
        return receipt["request_id"]

    async def reply_to(self, request_id: str) -> dict:
        async with asyncio.timeout(TIMEOUT_S):
            while True:
                reply = self.store.request(request_id)["reply_interaction_id"]
                if reply:
                    return self.store.interaction(reply)
                self.changed.clear()
                await self.changed.wait()

    async def turn_done(self, turn_id: str) -> None:
        owner = self.codex.owners[self.b.agent_id]
        async with asyncio.timeout(TIMEOUT_S):
            async with owner.changed:
                await owner.changed.wait_for(lambda: turn_id in owner.completed)

    def summary(self) -> dict:
        """What the adapter wrote, with run-specific ids and times taken out."""
        dump = self.store.dump()
        names: dict[str, str] = {}

        def scrub(text):
            text = re.sub(r"\b(rq|ix|cl|bd)_[0-9a-f]{32}\b", lambda m: names.setdefault(m.group(0), f"<{m.group(1)}:{len(names) + 1}>"), text)
            return re.sub(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", "<agent>", text)

        stages: dict[str, list[str]] = {}
        for row in dump["evidence"]:
            stages.setdefault(row["interaction_id"], []).append(row["stage"])
        return {
            "interactions": [
                {"kind": r["kind"], "state": r["state"], "from": r["sender_name"], "to": r["recipient_name"],
                 "status": r["reply_status"], "code": r["notice_code"], "body": scrub(r["body"])[:300],
                 "stages": stages.get(r["interaction_id"], [])}
                for r in sorted(dump["interactions"], key=lambda r: r["seq"])
            ],
            "bindings": [
                {"state": b["state"], "generation": b["generation"], "turn": b["turn_id"], "thread": b["thread_id"],
                 "outcome": {k: v for k, v in json.loads(b["outcome"]).items() if k != "text"} if b["outcome"] else None}
                for b in sorted(dump["bindings"], key=lambda b: b["created_at"])
            ],
            "requests_sent": [s["method"] for session in self.transport.opened for s in session.sent],
        }


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
    binding = core.store.bindings()[0]
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
    result = await core.codex.interrupt(core.store.agent(core.b.agent_id))
    await core.reply_to(held)
    await core.turn_done(result["turn_id"])
    await core.reply_to(await core.task("[idle] still there?"))


async def inject(core: Core) -> None:
    await core.attach()
    receipt = core.store.admit_information(core.a, core.store.agent(core.b.agent_id),
                                           "FYI: the build is green ✓\nno action")
    await core.codex.deliver(core.store.agent(core.b.agent_id), core.store.interaction(receipt["interaction_id"]))
    started = await core.codex.prompt(core.store.agent(core.b.agent_id), "Please check your messages.")
    await core.turn_done(started["turn_id"])


async def resume(core: Core) -> None:
    await core.attach()
    await core.reply_to(await core.task("[idle] remember this answer"))
    await core.codex.detach(core.b.agent_id)
    request_id = core.store.admit_task(core.a, core.store.agent(core.b.agent_id), "[recall] what did you answer before?")["request_id"]
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
            receipt = core.store.admit_reply(core.store.agent(core.b.agent_id), request_id, "done",
                                             "explicit answer ✓")
            core._committed(receipt["recipient"]["agent_id"], receipt["interaction_id"])

    async def run():
        core = Core(tmp_path, path, hook)
        holder["core"] = core
        try:
            await REPLAYS[path](core)
        finally:
            await core.codex.close()
        return core.summary()

    assert asyncio.run(run()) == snapshot
