"""The Codex adapter's delivery routes, each driven against a live lab.

A delivery route is one way a record reaches a Codex agent (a task started as a
turn, steered into one, refused as stale; information injected; a resumed
thread ...). One model script (agent B's rules, keyed by a marker in the task
text) and one driver per route. The live adapter tests and the fixture recorder both use
these, so a recorded fixture is exactly what the live test exercised.

Agent A has no owner here: it is the requester, calling tools through the
core like its MCP server would, and reading its replies with receive. The
steer route has a second requester, C (registered without a Codex home), so
that each of the two tasks one turn answers has its own requester.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from peerwire.envelope import MESSAGE_TYPES
from peerwire.lifecycle import Kind
from peerwire.limits import MAX_BODY_BYTES

from harness.contract.interface import Caller
from harness.lab.reference import ReferenceLab
from harness.lab.live import TURN_TIMEOUT_S
from harness.model.rules import ModelScript, script_from_document
from harness.names import MESSAGING_NAMESPACE

SCRIPT_NAME = "adapter-routes"

OVERSIZE_CHARS = MAX_BODY_BYTES + 1024


def _task_rule(rule_id: str, marker: str, emit: list[dict], **extra: Any) -> dict:
    return {"id": rule_id,
            "when": [{"envelope": {"type": MESSAGE_TYPES[Kind.TASK], "last": True, "contains": marker,
                                   "matches": r"Request: (?P<request_id>rq_[0-9a-f]+)"}}],
            "emit": emit, **extra}


def model_script() -> ModelScript:
    """Agent B's scripted model for every route, compiled."""
    return script_from_document(model_document(), source=SCRIPT_NAME)


def model_document() -> dict[str, Any]:
    final = lambda text: {"message": {"phase": "final_answer", "text": text}}  # noqa: E731
    return {
        "scenario": {"name": SCRIPT_NAME, "description": "Agent B's model for every delivery route."},
        "rules": {
            "B": [
                {"id": "after-explicit-reply",
                 "when": [{"tool_output": {"tool": "reply", "namespace": MESSAGING_NAMESPACE, "last": True}}],
                 "emit": [final("I replied to that request explicitly.")]},
                _task_rule("explicit-reply", "[explicit]", [
                    {"message": {"phase": "commentary", "text": "Answering with the reply tool."}},
                    {"function_call": {"namespace": MESSAGING_NAMESPACE, "name": "reply", "arguments": {
                        "request_id": "${request_id}", "status": "done", "message": "explicit answer ✓"}}}]),
                _task_rule("steered", "[steer]", [final("one answer for both tasks")]),
                _task_rule("held", "[hold]", [final("the held turn's answer")], hold="busy"),
                _task_rule("oversize", "[oversize]", [final("x" * OVERSIZE_CHARS)]),
                _task_rule("recall", "[recall]", [final("recalled from my history")]),
                _task_rule("idle", "[idle]", [
                    {"message": {"phase": "commentary", "text": "thinking out loud"}},
                    final("Answer: 42 — “quoted”\nsecond line")]),
                {"id": "check-messages",
                 "when": [{"user_text": {"last": True, "contains": "check your messages"}}],
                 "emit": [final("checked")]},
            ]
        },
    }


# -- drivers ---------------------------------------------------------------------------------
# Each returns what the test needs to find its records; the lab is already up with B attached.


def _task(lab: ReferenceLab, text: str) -> dict[str, Any]:
    return lab.as_agent("A").call("followup_task", {"target": "B", "message": text})


def await_reply(lab: ReferenceLab, request_id: str, timeout_s: float = TURN_TIMEOUT_S, *,
                requester: Caller | None = None) -> dict[str, Any]:
    """Block (on the mailbox, not a sleep) until the requester (default A) holds the reply to ``request_id``."""
    deadline = time.monotonic() + timeout_s
    cursor = None
    client = lab.as_agent("A") if requester is None else lab.core.control(requester)
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"no reply to {request_id} within {timeout_s}s")
        page = client.call("receive_messages", {"timeout_ms": int(min(remaining, 60) * 1000),
                                                **({"cursor": cursor} if cursor else {})}, wait_s=min(remaining, 60))
        for record in page["records"]:
            if record["kind"] == "reply" and record.get("request_id") == request_id:
                return record
        cursor = page["cursor"]


def await_active(lab: ReferenceLab, name: str, timeout_s: float = TURN_TIMEOUT_S) -> str:
    """The turn id once the agent's owner has an active turn (held by the model)."""
    lab.model.wait_for_hold("busy", timeout=timeout_s)
    owner = lab.owner(name)
    assert owner and owner["active_turn"], owner
    return owner["active_turn"]


def idle_start(lab: ReferenceLab) -> dict[str, Any]:
    receipt = _task(lab, "[idle] What is six times seven?")
    return {"request_id": receipt["request_id"], "reply": await_reply(lab, receipt["request_id"])}


def explicit_reply(lab: ReferenceLab) -> dict[str, Any]:
    receipt = _task(lab, "[explicit] Please confirm.")
    reply = await_reply(lab, receipt["request_id"])
    # The explicit reply lands mid-turn; the bound turn's end decides the automatic result.
    (binding,) = lab.trace(receipt["request_id"])["bindings"]
    lab.await_turn("B", binding["turn_id"], TURN_TIMEOUT_S)
    return {"request_id": receipt["request_id"], "reply": reply}


SECOND_REQUESTER = "C"


def steer(lab: ReferenceLab) -> dict[str, Any]:
    """A's task holds B's turn; C's task is steered into it: one turn answers two requesters."""
    first = _task(lab, "[hold] first task")
    turn_id = await_active(lab, "B")
    other = lab.register(SECOND_REQUESTER)
    second = lab.core.control(other).call("followup_task", {"target": "B", "message": "[steer] second task"})
    replies = [await_reply(lab, first["request_id"]), await_reply(lab, second["request_id"], requester=other)]
    return {"request_ids": [first["request_id"], second["request_id"]], "turn_id": turn_id, "replies": replies,
            "requesters": [lab.agents["A"].agent_id, other.agent_id]}


def interrupt(lab: ReferenceLab) -> dict[str, Any]:
    held = _task(lab, "[hold] keep me busy")
    turn_id = await_active(lab, "B")
    result = lab.as_agent("A").call("interrupt_agent", {"target": "B"})
    reply = await_reply(lab, held["request_id"])
    after = _task(lab, "[idle] still there?")
    return {"request_id": held["request_id"], "turn_id": turn_id, "interrupt": result, "reply": reply,
            "after_request_id": after["request_id"], "after_reply": await_reply(lab, after["request_id"])}


def failed_turn(lab: ReferenceLab) -> dict[str, Any]:
    receipt = _task(lab, "[fail] no rule answers this")
    return {"request_id": receipt["request_id"], "reply": await_reply(lab, receipt["request_id"])}


def oversized_final(lab: ReferenceLab) -> dict[str, Any]:
    receipt = _task(lab, "[oversize] write a lot")
    return {"request_id": receipt["request_id"], "reply": await_reply(lab, receipt["request_id"])}


def inject(lab: ReferenceLab) -> dict[str, Any]:
    receipt = lab.as_agent("A").call("send_message", {"target": "B", "message": "FYI: the build is green ✓\nno action"})
    # the injection is delivered after the receipt; its evidence row says when it is visible
    lab.await_core(lambda: lab.trace(receipt["interaction_id"])["interactions"][0]["state"] != "admitted",
                   TURN_TIMEOUT_S, "the injection of the information")
    turns_before = len(lab.owner("B")["completed_turns"])
    turn_id = lab.prompt("B", "Please check your messages.")
    lab.await_turn("B", turn_id, TURN_TIMEOUT_S)
    return {"interaction_id": receipt["interaction_id"], "turns_before_prompt": turns_before, "turn_id": turn_id}


def resume(lab: ReferenceLab) -> dict[str, Any]:
    first = _task(lab, "[idle] remember this answer")
    first_reply = await_reply(lab, first["request_id"])
    thread_before = lab.owner("B")["thread_id"]
    lab.detach("B")
    second = _task(lab, "[recall] what did you answer before?")  # pending: B has no owner now
    pending_state = lab.trace(second["request_id"])["interactions"][0]["state"]
    owner = lab.attach("B", resume=True)
    return {"first_request_id": first["request_id"], "first_reply": first_reply, "thread_before": thread_before,
            "owner": owner, "pending_state": pending_state, "request_id": second["request_id"],
            "reply": await_reply(lab, second["request_id"])}


ROUTES: dict[str, Callable[[ReferenceLab], dict[str, Any]]] = {
    "idle_start": idle_start,
    "explicit_reply": explicit_reply,
    "steer": steer,
    "interrupt": interrupt,
    "failed_turn": failed_turn,
    "oversized_final": oversized_final,
    "inject": inject,
    "resume": resume,
}


async def stale_steer(provider: Any, store: Any, requester: Any, recipient: Any) -> dict[str, Any]:
    """A steer fenced by a turn that already ended is refused and admits nothing.

    Driven in-process (the adapter beside the test) because the race it stands
    for — a turn ending between the adapter's last observation and its steer —
    cannot be timed from outside: the adapter is told the finished turn is still
    active, exactly the belief it would hold in that race. Codex must refuse the
    steer, the claim must be released, and the next opportunity must start a turn.
    """
    import asyncio

    agent = store.registry.agent(recipient.agent_id)
    owner = provider.owners[agent.agent_id]
    first = store.mailbox.admit_task(requester, agent, "[idle] first, to have a finished turn")
    await provider.dispatch(agent)
    finished = owner.active_turn
    async with asyncio.timeout(TURN_TIMEOUT_S):
        async with owner.changed:
            await owner.changed.wait_for(lambda: finished in owner.completed)
    owner.active_turn = finished  # the stale belief
    second = store.mailbox.admit_task(requester, agent, "[idle] second, steered at a finished turn")
    await provider.dispatch(agent)
    after_stale = store.mailbox.request(second["request_id"])["state"]
    owner.active_turn = None  # what the missed turn/completed would have said
    await provider.dispatch(agent)  # the next opportunity
    started = owner.active_turn
    async with asyncio.timeout(TURN_TIMEOUT_S):
        async with owner.changed:
            await owner.changed.wait_for(lambda: started in owner.completed)
    return {"first": first["request_id"], "second": second["request_id"], "stale_turn": finished,
            "state_after_stale": after_stale, "started": started}


INPROCESS_ROUTES = {"stale_steer": stale_steer}
"""Routes driven with the adapter in this process (:mod:`harness.lab.inprocess`)."""
