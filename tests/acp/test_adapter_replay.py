"""Every ACP delivery route replayed from its recorded fixture: no OpenCode process.

The adapter runs in-process against the real store; :class:`ReplayTransport`
plays the recorded agent side (``fixtures/acp/``, recorded by the live tests
with ``PEERWIRE_RECORD_ACP=1``). What the agent's MCP tool calls did to the
core is done by a hook at the recorded moment.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from peerwire.acp.adapter import AcpProvider
from peerwire.acp.turns import final_message
from peerwire.contract import validate_output
from peerwire.store import Store
from tests.acp import routes
from tests.acp.recording import FIXTURE_DIR, load
from tests.acp.replay import ReplayTransport
from tests.patience import WAIT_S

TIMEOUT_S = WAIT_S
AUTO_TASK = "Please work out which release codename comes after Juniper."


class Core:
    """The store and the ACP adapter as the app wires them, with an event per published record."""

    def __init__(self, tmp: Path, route: str, hook: Any = None):
        self.store = Store(tmp / "peerwire.db")
        self.a, _ = self.store.registry.register_agent("A", "manual")
        self.b, _ = self.store.registry.register_agent("B", "acp")
        self.published: list[str] = []
        self.changed = asyncio.Event()
        self.transport = ReplayTransport(FIXTURE_DIR / f"{route}.jsonl", hook)
        self.acp = AcpProvider(self.store, self._committed, tmp / "acp", start_client=self.transport, home=tmp)

    def _committed(self, recipient_id: str, interaction_id: str) -> None:
        self.published.append(interaction_id)
        self.changed.set()

    @property
    def agent(self):
        return self.store.registry.agent(self.b.agent_id)

    async def attach(self) -> dict[str, Any]:
        return await self.acp.attach(self.agent, command=["opencode", "acp"], cwd="<path:workspace>",
                                     session_token="token")

    async def task(self, text: str) -> str:
        receipt = self.store.mailbox.admit_task(self.a, self.agent, text)
        await self.acp.dispatch(self.agent)
        return receipt["request_id"]

    async def reply_to(self, request_id: str) -> dict[str, Any]:
        async with asyncio.timeout(TIMEOUT_S):
            while True:
                reply = self.store.mailbox.request(request_id)["reply_interaction_id"]
                if reply:
                    return self.store.mailbox.interaction(reply)
                self.changed.clear()
                await self.changed.wait()

    async def idle(self) -> None:
        """Until the agent's prompt in flight (if any) is settled."""
        owner = self.acp.owners[self.b.agent_id]
        async with asyncio.timeout(TIMEOUT_S), owner.changed:
            await owner.changed.wait_for(lambda: owner.turn is None)

    def stages(self, ident: str) -> dict[str, dict[str, Any]]:
        return {s["stage"]: s["detail"] for s in self.store.trace(ident)["interactions"][0]["stages"]}

    async def done(self) -> None:
        (session,) = self.transport.opened
        await session.finish()
        assert session.mismatch is None, session.mismatch
        await self.acp.close()
        self.store.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def core_for(tmp_path: Path):
    made: list[Core] = []

    def make(route: str, hook: Any = None) -> Core:
        made.append(Core(tmp_path, route, hook))
        return made[-1]
    yield make
    for core in made:
        core.store.close()


@pytest.mark.anyio
async def test_idle_prompt(core_for):
    core = core_for("idle_prompt")
    owner = await core.attach()
    assert owner["session_id"] == "<session:1>" and owner["agent_info"] == {"name": "OpenCode", "version": "1.18.33"}
    rid = await core.task(AUTO_TASK)
    reply = await core.reply_to(rid)
    assert (reply["status"], reply["body"], reply["sender"]["name"]) == ("done", routes.AUTO_ANSWER, "B")
    (binding,) = core.store.bindings.find()
    assert (binding["thread_id"], binding["state"]) == ("<session:1>", "published")
    stages = core.stages(rid)
    assert stages["provider_accepted"]["via"] == "session/prompt"
    assert stages["provider_accepted"]["acknowledged_by"] == "session/update agent_message_chunk"
    captured = stages["binding_capture"]
    assert (captured["stop_reason"], captured["final_item_id"], captured["message_ids"]) == (
        "end_turn", "<message:1>", ["<message:1>"])
    (sent,) = core.transport.opened[0].sent[1:]
    assert sent["params"]["messageId"] == binding["turn_id"]
    await core.done()


@pytest.mark.anyio
async def test_explicit_reply(core_for):
    titles: dict[str, str] = {}
    made: dict[str, Any] = {}

    async def mcp(message: dict[str, Any]) -> None:
        update = message["params"]["update"]
        if update["sessionUpdate"] == "tool_call":
            titles[update["toolCallId"]] = update["title"]
        elif update.get("status") == "completed" and titles.get(update["toolCallId"]) == "peerwire_reply":
            core.store.mailbox.admit_reply(core.agent, made["rid"], "done", routes.EXPLICIT_ANSWER)

    core = core_for("explicit_reply", mcp)
    await core.attach()
    made["rid"] = rid = await core.task("Please give me an explicit reply: which codename follows Juniper?")
    await core.idle()
    replies = [i for i in core.store.trace(rid)["interactions"] if i["kind"] == "reply"]
    assert [(r["body"], r["sender"]["name"]) for r in replies] == [(routes.EXPLICIT_ANSWER, "B")]
    assert [b["state"] for b in core.store.bindings.find()] == ["suppressed"]
    await core.done()


def test_the_final_message_is_the_reply():
    """Commentary before a tool call is not the final message; the last message after it is."""
    updates = [line["message"]["params"]["update"] for line in load(FIXTURE_DIR / "explicit_reply.jsonl")
               if line.get("message", {}).get("method") == "session/update"]
    texts = [u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
    assert texts[0].startswith("Replying to") and len(texts) == 2
    final = final_message(updates)
    assert final is not None and final.text == "Replied to the request." and final.message_id == "<message:2>"
    # Cut the turn at its tool call: the commentary alone is no final message.
    cut = updates[:next(n for n, u in enumerate(updates) if u["sessionUpdate"] == "tool_call") + 1]
    assert final_message(cut) is None


@pytest.mark.anyio
async def test_cancel(core_for):
    core = core_for("cancel")
    await core.attach()
    rid = await core.task("Please take your time with this long task.")
    turn = core.acp.owners[core.agent.agent_id].turn.turn_id
    out = await core.acp.interrupt(core.agent)
    # interrupt_agent returns it as it is: a strict client (OpenCode's) checks it against the outputSchema.
    assert out == {"previous_status": "active", "turn_id": turn}
    assert validate_output("interrupt_agent", {"target": core.agent.ref, "state": "interrupt_requested", **out}) == []
    reply = await core.reply_to(rid)
    assert (reply["status"], reply["code"], reply["sender"]["name"]) == ("blocked", "turn_interrupted", "peerwire")
    # Held by the model, the turn showed nothing before it was cancelled: the answer itself admitted it.
    assert core.stages(rid)["provider_accepted"]["acknowledged_by"] == "prompt_answer"
    await core.idle()
    later = await core.task(AUTO_TASK)
    assert (await core.reply_to(later))["body"] == routes.AUTO_ANSWER
    await core.done()


@pytest.mark.anyio
async def test_busy(core_for):
    gate = asyncio.Event()

    async def hold(message: dict[str, Any]) -> None:
        await gate.wait()  # the first turn lasts until the test has tasked the busy agent again

    core = core_for("busy", hold)
    await core.attach()
    first = await core.task("Please take your time with this long task.")
    second = await core.task("Please do the second task.")
    assert core.store.mailbox.request(second)["state"] == "pending"  # no steer: it waits for the turn to end
    assert [m["method"] for m in core.transport.opened[0].sent] == ["session/new", "session/prompt"]
    gate.set()
    assert (await core.reply_to(first))["body"] == "Finally done with the long task."
    assert (await core.reply_to(second))["body"] == "Second task done."
    await core.done()


@pytest.mark.anyio
async def test_failed_prompt(core_for):
    core = core_for("failed_prompt")
    await core.attach()
    rid = await core.task("Please do this one, which fails.")
    reply = await core.reply_to(rid)
    assert (reply["status"], reply["code"], reply["sender"]["name"]) == ("failed", "prompt_error", "peerwire")
    assert "no rule of agent 'B' matches" in reply["body"]
    await core.done()


@pytest.mark.anyio
async def test_next_turn(core_for):
    core = core_for("next_turn")
    await core.attach()
    receipt = core.store.mailbox.admit_information(core.a, core.agent, "The release is on Friday.")
    assert await core.acp.deliver(core.agent, core.store.mailbox.interaction(receipt["interaction_id"])) is None
    turn = (await core.acp.prompt(core.agent, "Is there anything new? hello"))["turn_id"]
    assert (await core.acp.await_turn(core.agent, turn, TIMEOUT_S))["status"] == "end_turn"
    visible = core.stages(receipt["interaction_id"])["provider_visible"]
    assert (visible["via"], visible["path"], visible["thread_id"]) == ("session/prompt", "next_turn", "<session:1>")
    await core.done()


@pytest.mark.anyio
async def test_receive(core_for):
    titles: dict[str, str] = {}

    async def mcp(message: dict[str, Any]) -> None:
        update = message["params"]["update"]
        if update["sessionUpdate"] == "tool_call":
            titles[update["toolCallId"]] = update["title"]
        elif update.get("status") == "completed" and titles.get(update["toolCallId"]) == "peerwire_receive_messages":
            core.store.mailbox.receive(core.agent, limit=100)

    core = core_for("receive", mcp)
    await core.attach()
    turn = (await core.acp.prompt(core.agent, "Please wait for mail, then read your mailbox."))["turn_id"]
    receipt = core.store.mailbox.admit_information(core.a, core.agent, "The build is green.")
    await core.acp.deliver(core.agent, core.store.mailbox.interaction(receipt["interaction_id"]))
    assert (await core.acp.await_turn(core.agent, turn, TIMEOUT_S))["status"] == "end_turn"
    later = (await core.acp.prompt(core.agent, "hello"))["turn_id"]  # received: not carried again
    assert (await core.acp.await_turn(core.agent, later, TIMEOUT_S))["status"] == "end_turn"
    assert "provider_visible" not in core.stages(receipt["interaction_id"])
    await core.done()


@pytest.mark.anyio
async def test_a_diverging_adapter_is_caught(core_for):
    core = core_for("idle_prompt")
    await core.attach()
    rid = await core.task("Please work out something else entirely.")
    session = core.transport.opened[0]
    await asyncio.wait_for(session.done.wait(), TIMEOUT_S)
    assert session.mismatch is not None and "blocks differ" in str(session.mismatch)
    assert core.store.mailbox.request(rid)["state"] in ("dispatching", "uncertain")


def _variant(tmp_path: Path, route: str, change: Any) -> Path:
    """A copy of a fixture with its lines changed (an answer no recording can produce on demand)."""
    import json

    lines = [change(line) for line in load(FIXTURE_DIR / f"{route}.jsonl")]
    path = tmp_path / f"{route}-variant.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines if line is not None), encoding="utf-8")
    return path


@pytest.mark.anyio
async def test_an_unknown_stop_reason_leaves_the_task_uncertain(tmp_path: Path):
    def paused(line: dict[str, Any]) -> dict[str, Any]:
        result = line.get("message", {}).get("result")
        if isinstance(result, dict) and result.get("stopReason") == "end_turn":
            result["stopReason"] = "paused_for_review"
        return line

    core = Core(tmp_path, "idle_prompt")
    core.transport = ReplayTransport(_variant(tmp_path, "idle_prompt", paused))
    core.acp.start_client = core.transport
    await core.attach()
    rid = await core.task(AUTO_TASK)
    await core.idle()
    assert core.store.mailbox.request(rid)["state"] == "uncertain"  # never done, never replayed
    notice = core.store.mailbox.interaction(core.published[-1])
    assert notice["code"] == "delivery_uncertain" and "paused_for_review" in notice["body"]
    assert [b["state"] for b in core.store.bindings.find()] == ["uncertain"]
    await core.done()


@pytest.mark.anyio
async def test_an_agent_gone_mid_turn_leaves_the_task_uncertain(core_for):
    gate = asyncio.Event()

    async def never(message: dict[str, Any]) -> None:
        await gate.wait()

    core = core_for("idle_prompt", never)
    await core.attach()
    rid = await core.task(AUTO_TASK)
    await core.transport.opened[0].close()  # the agent exits before it answered
    async with asyncio.timeout(TIMEOUT_S):
        while core.store.mailbox.request(rid)["state"] != "uncertain":
            core.changed.clear()
            await core.changed.wait()
    assert core.agent.status == "offline" and not core.acp.owners
    assert core.store.dump()["claims"][0]["released_at"] is None  # nothing is offered again
    gate.set()
    core.store.close()
