"""Every Codex delivery route, live: the real pinned Codex, the scripted model, the real app.

Each test reads the core's records, evidence rows and bindings, the app-server
transcript and the model request log: a reply text alone proves nothing.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from harness.lab.recorded import routes
from harness.contract.manifest import requirement
from harness.lab.inprocess import inprocess_adapter
from harness.lab.reference import ReferenceLab
from peerwire import envelope
from peerwire.contract import definition_validator
from tests.patience import WAIT_S

pytestmark = pytest.mark.codex


@pytest.fixture
def lab(tmp_path: Path):
    script = routes.model_script()
    with ReferenceLab(tmp_path, script, agents=("A", "B"), attach=False) as lab:
        lab.attach("B")
        yield lab


def transcript(lab: ReferenceLab, generation: int = 1) -> list[dict]:
    return [json.loads(line) for line in lab.transcript("B", generation).read_text().splitlines()]


def sent(lines: list[dict], method: str) -> list[dict]:
    return [entry["message"] for entry in lines if entry["dir"] == "sent" and entry["message"].get("method") == method]


def notes(lines: list[dict], method: str) -> list[dict]:
    return [entry["message"]["params"] for entry in lines
            if entry["dir"] == "received" and entry["message"].get("method") == method]


def stages(lab: ReferenceLab, request_id: str) -> list[str]:
    return [s["stage"] for s in lab.trace(request_id)["interactions"][0]["stages"]]


def bindings(lab: ReferenceLab, request_id: str) -> list[dict]:
    return lab.trace(request_id)["bindings"]


def test_idle_start(lab):
    out = routes.idle_start(lab)
    rid = out["request_id"]
    lines = transcript(lab)
    (start,) = sent(lines, "turn/start")
    assert start["params"]["clientUserMessageId"] == rid
    assert f"Request: {rid}" in start["params"]["input"][0]["text"]
    (binding,) = bindings(lab, rid)
    (completed,) = notes(lines, "turn/completed")
    assert binding["turn_id"] == completed["turn"]["id"] and binding["state"] == "published"
    # the final answer, not the commentary, is the reply; from B itself
    assert out["reply"]["status"] == "done" and out["reply"]["body"] == "Answer: 42 — “quoted”\nsecond line"
    assert out["reply"]["sender"]["name"] == "B"
    assert stages(lab, rid)[:5] == ["entered", "admitted", "claim_by_dispatch", "provider_accepted", "binding_capture"]


def user_messages(lab: ReferenceLab, agent: str, marker: str) -> list[list[str]]:
    """The content parts of every user message holding ``marker`` in ``agent``'s first model request that
    holds it: what the model received, part by part."""
    for exchange in lab.model.exchanges:
        if exchange.agent != agent:
            continue
        found = [[part["text"] for part in item.get("content") or [] if part.get("type") == "input_text"]
                 for item in exchange.input_items() if item.get("type") == "message" and item.get("role") == "user"]
        found = [parts for parts in found if any(marker in part for part in parts)]
        if found:
            return found
    raise AssertionError(f"no model request of {agent} holds {marker!r}")


@requirement("envelope:format")
def test_the_task_envelope_reaches_the_model_exactly(lab):
    out = routes.idle_start(lab)
    sender = lab.as_agent("A").call("whoami")["agent"]
    (parts,) = user_messages(lab, "B", "[idle] What is six times seven?")
    # One user message, two parts: the structured task item, then the peer's text exactly as sent.
    item, body = parts
    assert body == "[idle] What is six times seven?"
    assert item.endswith("\nPayload:") and "[idle]" not in item
    text = "\n".join(parts)
    assert definition_validator("envelope").is_valid(text), text  # contracts/definitions.json#/$defs/envelope
    parsed = envelope.parse(text)
    headers = parsed["headers"]
    assert (headers["Message Type"], headers["Request"]) == ("NEW_TASK", out["request_id"])
    assert headers["Sender"] == f"A ({sender['agent_id']})"
    assert f"reply tool with request_id {out['request_id']}" in headers["Answer"]
    assert parsed["payload"] == body


@requirement("delivery:task:structured-item")
def test_an_idle_task_opens_its_turn_with_a_structured_item(lab):
    out = routes.idle_start(lab)
    (start,) = sent(transcript(lab), "turn/start")
    item, body = start["params"]["input"]
    assert body == {"type": "text", "text": "[idle] What is six times seven?"}
    headers = envelope.parse(item["text"] + "\n")["headers"]
    assert (headers["Message Type"], headers["Request"]) == ("NEW_TASK", out["request_id"])
    assert headers["Sender"].startswith("A (") and "reply tool" in headers["Answer"]
    # what the model received: the same two parts, in one user message
    assert user_messages(lab, "B", "[idle] What is six times seven?") == [[item["text"], body["text"]]]


@requirement("delivery:steer:literal-text")
def test_a_steer_carries_the_literal_text_apart_from_the_routing_metadata(lab):
    out = routes.steer(lab)
    second = out["request_ids"][1]
    (steer,) = sent(transcript(lab), "turn/steer")
    params = steer["params"]
    # The pinned Codex has no turn/steer additionalContext (capability steer_context): the routing
    # metadata is the first input part, the peer's text the second, never merged.
    assert "additionalContext" not in params
    item, body = [part["text"] for part in params["input"]]
    assert body == "[steer] second task"
    assert envelope.parse(item + "\n" + body)["headers"]["Request"] == second
    (parts,) = user_messages(lab, "B", "[steer] second task")
    assert parts == [item, body]


@requirement("reply:explicit:suppresses-automatic")
def test_explicit_reply_suppresses_the_automatic_one(lab):
    out = routes.explicit_reply(lab)
    rid = out["request_id"]
    assert out["reply"]["body"] == "explicit answer ✓"
    trace = lab.trace(rid)
    (binding,) = trace["bindings"]
    assert binding["state"] == "suppressed"
    replies = [i for i in trace["interactions"] if i["kind"] == "reply"]
    assert len(replies) == 1 and replies[0]["tool_receipt"]["turn_id"] == binding["turn_id"]


def test_steer_binds_both_tasks_to_one_turn(lab):
    """Two requesters' tasks in one turn: each gets that turn's result, and only its own."""
    out = routes.steer(lab)
    first, second = out["request_ids"]
    lines = transcript(lab)
    (steer,) = sent(lines, "turn/steer")
    assert steer["params"]["expectedTurnId"] == out["turn_id"]
    assert [b["turn_id"] for b in bindings(lab, first) + bindings(lab, second)] == [out["turn_id"]] * 2
    assert [r["body"] for r in out["replies"]] == ["one answer for both tasks"] * 2
    # each reply goes to the requester of its own request, never to the other one
    assert [r["recipient"]["agent_id"] for r in out["replies"]] == out["requesters"]
    assert [r["request_id"] for r in out["replies"]] == [first, second]
    for requester, request_id in zip(("A", routes.SECOND_REQUESTER), (first, second)):
        replies = [i for i in lab.export()["records"] if i["kind"] == "reply"
                   and i["recipient"]["name"] == requester]
        assert [r["request_id"] for r in replies] == [request_id], requester
    assert len(sent(lines, "turn/start")) == 1


def test_interrupt_ends_exactly_the_active_turn(lab):
    out = routes.interrupt(lab)
    lines = transcript(lab)
    (request,) = sent(lines, "turn/interrupt")
    assert request["params"]["turnId"] == out["turn_id"] == out["interrupt"]["turn_id"]
    assert out["interrupt"]["previous_status"] == "active"
    statuses = {n["turn"]["id"]: n["turn"]["status"] for n in notes(lines, "turn/completed")}
    assert statuses[out["turn_id"]] == "interrupted"
    assert [s for t, s in statuses.items() if t != out["turn_id"]] == ["completed"]  # the later task's turn
    reply = out["reply"]
    assert (reply["status"], reply["code"], reply["sender"]) == (
        "blocked", "turn_interrupted", {"agent_id": None, "name": "peerwire"})
    assert out["after_reply"]["status"] == "done"  # B stays available


def test_failed_turn_becomes_a_failed_reply(lab):
    out = routes.failed_turn(lab)
    assert (out["reply"]["status"], out["reply"]["code"]) == ("failed", "turn_failed")
    assert "scripted_model_unexpected_request" in out["reply"]["body"]
    assert [e.outcome for e in lab.model.exchanges] == ["unexpected"]


def test_oversized_final_is_not_forwarded(lab):
    out = routes.oversized_final(lab)
    assert (out["reply"]["status"], out["reply"]["code"]) == ("blocked", "final_too_large")
    (binding,) = bindings(lab, out["request_id"])
    outcome = lab.control().call("trace", {"id": out["request_id"]})["bindings"][0]
    assert binding["state"] == "published" and outcome["outcome"]
    evidence = json.loads(outcome["outcome"]) if isinstance(outcome["outcome"], str) else outcome["outcome"]
    assert evidence["text_chars"] == routes.OVERSIZE_CHARS and len(evidence["text_sha256"]) == 64


@requirement("information:turn:never-started")
def test_inject_starts_no_turn_and_reaches_the_next_model_input(lab):
    out = routes.inject(lab)
    lines = transcript(lab)
    (injected,) = sent(lines, "thread/inject_items")
    head, body = [part["text"] for part in injected["params"]["items"][0]["content"]]
    assert body == "FYI: the build is green ✓\nno action" and head.startswith("Message Type: MESSAGE\n")
    assert out["turns_before_prompt"] == 0
    assert len(notes(lines, "turn/started")) == 1  # only the prompted turn
    # the one turn/start is the operator's prompt; the information neither started, steered nor interrupted one
    assert [m["params"].get("turnTrigger") for m in sent(lines, "turn/start")] == ["operator"]
    assert not sent(lines, "turn/steer") and not sent(lines, "turn/interrupt")
    stages = [s["stage"] for s in lab.trace(out["interaction_id"])["interactions"][0]["stages"]]
    assert not any(s.startswith("claim") for s in stages), f"information entered a runnable queue: {stages}"
    (request,) = [e for e in lab.model.exchanges if e.agent == "B"]
    texts = json.dumps(request.input_items(), ensure_ascii=False)
    assert "Message Type: MESSAGE" in texts and "FYI: the build is green ✓\\nno action" in texts
    assert lab.trace(out["interaction_id"])["interactions"][0]["state"] == "provider_visible"
    # and it stays readable through receive
    page = lab.as_agent("B").call("receive_messages", {})
    assert [r["record_id"] for r in page["records"]] == [out["interaction_id"]]


def test_resume_gives_a_new_generation_the_same_thread(lab):
    out = routes.resume(lab)
    assert out["pending_state"] == "pending"
    assert out["owner"]["generation"] == 2 and out["owner"]["thread_id"] == out["thread_before"]
    (binding,) = bindings(lab, out["request_id"])
    assert (binding["generation"], binding["thread_id"]) == (2, out["thread_before"])
    assert out["reply"]["body"] == "recalled from my history"
    # the resumed model input holds the first task's answer from history, not re-sent
    last = [e for e in lab.model.exchanges if e.agent == "B"][-1]
    history = json.dumps(last.input_items(), ensure_ascii=False)
    assert out["first_reply"]["body"].split("\n")[0] in history
    assert len(sent(transcript(lab, 2), "turn/start")) == 1
    assert sent(transcript(lab, 2), "thread/resume")[0]["params"]["threadId"] == out["thread_before"]


@requirement("delivery:stale-steer:released")
def test_stale_steer_releases_the_claim_and_a_later_turn_takes_the_task(tmp_path):
    script = routes.model_script()

    async def run():
        async with inprocess_adapter(tmp_path, script) as lab:
            out = await routes.stale_steer(lab.provider, lab.store, lab.requester, lab.recipient)
            return out, lab.store.trace(out["second"])

    out, trace = asyncio.run(run())
    assert out["state_after_stale"] == "pending"  # nothing was admitted: the claim is back
    task = trace["interactions"][0]
    stages = [(s["stage"], s["detail"].get("reason", "")) for s in task["stages"]]
    assert [s for s, _ in stages][:4] == ["admitted", "claim_by_dispatch", "release", "claim_by_dispatch"]
    assert "stale turn" in stages[2][1]
    (binding,) = trace["bindings"]
    assert binding["turn_id"] == out["started"] != out["stale_turn"]
    lines = [json.loads(line) for line in (tmp_path / "core" / "codex" / "B.g1.appserver.jsonl").read_text().splitlines()]
    (steer,) = [entry["message"] for entry in lines if entry["dir"] == "sent" and entry["message"].get("method") == "turn/steer"]
    assert steer["params"]["expectedTurnId"] == out["stale_turn"]
    (refusal,) = [entry["message"] for entry in lines if entry["dir"] == "received" and entry["message"].get("id") == steer["id"]]
    assert refusal["error"]["code"] == -32600


def test_owner_death_mid_turn_makes_the_task_uncertain_and_it_is_never_replayed(lab):
    import os
    import signal as signals

    held = lab.as_agent("A").call("followup_task", {"target": "B", "message": "[hold] you will lose your owner"})
    turn_id = routes.await_active(lab, "B")
    os.killpg(lab.owner("B")["pid"], signals.SIGKILL)  # the app-server and its MCP server
    notice = None
    client = lab.as_agent("A")
    cursor = None
    for _ in range(20):  # each receive blocks on the mailbox; a bound on the number of batches
        # The longest wait the contract allows: on a busy machine the notice may take a while.
        page = client.call("receive_messages", {"timeout_ms": 60_000, **({"cursor": cursor} if cursor else {})},
                           wait_s=WAIT_S)
        cursor = page["cursor"]
        notice = next((r for r in page["records"] if r["kind"] == "notice"), None)
        if notice or page["timed_out"]:
            break
    assert notice and notice["code"] == "delivery_uncertain" and notice["request_id"] == held["request_id"]
    trace = lab.trace(held["request_id"])
    assert trace["interactions"][0]["state"] == "uncertain"
    assert [b["state"] for b in trace["bindings"]] == ["uncertain"] and trace["bindings"][0]["turn_id"] == turn_id
    # a new owner gets every dispatch opportunity, and still never sees the uncertain task
    lab.attach("B", resume=True)
    after = routes.idle_start(lab)
    assert after["reply"]["status"] == "done"
    starts = sent(transcript(lab, 2), "turn/start")
    assert len(starts) == 1 and starts[0]["params"]["clientUserMessageId"] == after["request_id"]


def test_an_owner_gets_no_input_before_its_mcp_servers_are_ready(lab):
    """The first prompt is sent only after Codex reported the thread's MCP server ready, so the first model
    request already offers the core's tools."""
    routes.idle_start(lab)
    lines = transcript(lab)
    ready = next(i for i, entry in enumerate(lines) if entry["dir"] == "received"
                 and entry["message"].get("method") == "mcpServer/startupStatus/updated"
                 and entry["message"]["params"] == {**entry["message"]["params"], "name": "peerwire", "status": "ready"})
    first_input = next(i for i, entry in enumerate(lines) if entry["dir"] == "sent"
                       and entry["message"].get("method") in ("turn/start", "turn/steer", "thread/inject_items"))
    assert ready < first_input
    first_request = next(e for e in lab.model.exchanges if e.agent == "B")
    assert any(t.get("name") == "mcp__peerwire" for t in first_request.body["tools"])


def test_an_mcp_server_that_cannot_start_fails_the_attach_naming_it(tmp_path: Path):
    script = routes.model_script()
    with ReferenceLab(tmp_path, script, agents=("A", "B"), attach=False) as lab:
        config = lab.agents["B"].codex_home / "config.toml"
        # A user's server beside the core's, which exits at once: the owner must not be prompted blind.
        config.write_text(config.read_text() + '\n[mcp_servers.broken]\ncommand = "false"\n', encoding="utf-8")
        with pytest.raises(Exception, match=r"MCP server 'broken' \((failed|cancelled)"):
            lab.attach("B")
        assert lab.owner("B") is None
