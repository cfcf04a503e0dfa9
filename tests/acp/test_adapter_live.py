"""Every ACP delivery route, live: the pinned OpenCode, the scripted model, the real app.

Each test reads the core's records, evidence rows and bindings, the ACP
transcript and the model request log: a reply text alone proves nothing.
"""

from __future__ import annotations

import http.server
import re
import shutil
import threading
from pathlib import Path

import pytest

from harness.evidence.model_log import ModelRequestLog
from peerwire.contract import document_validator, validate_output
from tests.acp import routes
from tests.acp.lab import AcpLab, opencode_or_skip, sent, updates
from tests.acp.recording import record
from tests.patience import TEST_S, WAIT_S

pytestmark = [pytest.mark.opencode, pytest.mark.timeout(TEST_S)]


@pytest.fixture
def lab(tmp_path: Path):
    opencode_or_skip()
    lab = AcpLab(tmp_path, routes.model_script())
    try:
        lab.attach()
        yield lab
    finally:
        lab.close()


class Sentinel(http.server.BaseHTTPRequestHandler):
    """A loopback server that records every request and answers none usefully (a stand-in for the network)."""

    seen: list[str] = []

    def do_GET(self) -> None:
        self.seen.append(f"GET {self.path}")
        self.send_response(503)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_CONNECT = do_GET

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("models_fetch", ["disabled", "enabled"])
def test_start_up_needs_no_network(tmp_path: Path, models_fetch: str):
    """Every socket OpenCode opens from start-up through a whole task goes to loopback: the scripted model, its
    own local server, the sentinel. With the catalogue fetch left on (the control), the sentinel standing in
    for the catalogue sees OpenCode's fetch: the setting is what keeps it off the network."""
    opencode_or_skip()
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed")
    Sentinel.seen = []
    sentinel = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sentinel)
    threading.Thread(target=sentinel.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{sentinel.server_address[1]}"
    trace = tmp_path / "connect.strace"
    env = {"OPENCODE_MODELS_URL": url, "HTTP_PROXY": url, "HTTPS_PROXY": url, "NO_PROXY": "127.0.0.1,localhost"}
    if models_fetch == "enabled":
        env["OPENCODE_DISABLE_MODELS_FETCH"] = None
    lab = AcpLab(tmp_path, routes.model_script())
    try:
        lab.attach(wrap=("strace", "-f", "-qq", "-e", "trace=connect", "-o", str(trace)), env=env)
        rid = lab.task("Please work out which release codename comes after Juniper.")
        assert lab.reply_to(rid)["body"] == routes.AUTO_ANSWER
    finally:
        lab.close()
        sentinel.shutdown()
        sentinel.server_close()
    addresses = re.findall(r"sa_family=AF_INET6?, sin6?_port=htons\((\d+)\), (?:sin6?_addr=)?[a-z_]*\(?\"?([^\"),]+)",
                           trace.read_text())
    assert addresses, "strace saw no connect at all (is the trace working?)"
    assert {host for _, host in addresses} <= {"127.0.0.1", "::1", "::ffff:127.0.0.1"}, addresses
    assert "53" not in {port for port, _ in addresses}
    fetched = [line for line in Sentinel.seen if "api.json" in line]
    assert (fetched == []) == (models_fetch == "disabled"), Sentinel.seen


def test_a_task_is_answered_automatically(lab: AcpLab):
    rid = lab.task("Please work out which release codename comes after Juniper.")
    reply = lab.reply_to(rid)
    assert (reply["status"], reply["body"], reply["sender"]["name"]) == ("done", routes.AUTO_ANSWER, "B")
    lines = lab.transcript()
    (prompt,) = sent(lines, "session/prompt")
    blocks = prompt["params"]["prompt"]
    # The structured task and the literal text are two blocks; the text is exactly as sent.
    assert [b["type"] for b in blocks] == ["text", "text"]
    assert f"Request: {rid}" in blocks[0]["text"] and blocks[0]["text"].startswith("Message Type: NEW_TASK")
    assert blocks[1]["text"] == "Please work out which release codename comes after Juniper."
    session = lab.attached["session_id"]
    assert session.startswith("ses_") and prompt["params"]["sessionId"] == session
    # The binding: canonical request id -> OpenCode's session, the prompt's id, its message ids.
    (binding,) = lab.trace(rid)["bindings"]
    assert (binding["thread_id"], binding["turn_id"], binding["state"]) == (session, prompt["params"]["messageId"],
                                                                           "published")
    stages = {s["stage"]: s["detail"] for s in lab.stages(rid)}
    accepted, captured = stages["provider_accepted"], stages["binding_capture"]
    assert accepted["via"] == "session/prompt" and accepted["path"] == "idle_prompt"
    assert accepted["session_id"] == session
    final_ids = [u["messageId"] for u in updates(lines) if u["sessionUpdate"] == "agent_message_chunk"]
    assert captured["final_item_id"] == final_ids[-1] and captured["final_item_id"].startswith("msg_")
    assert captured["stop_reason"] == "end_turn" and captured["message_ids"] == sorted(set(final_ids), key=final_ids.index)
    # The model decided from what OpenCode sent: the envelope reached it, and it saw the core's tools.
    log = ModelRequestLog.load(lab.root / "model-requests.jsonl")
    (request,) = [r for r in log.requests if r.rule == "auto-answer"]
    assert request.wire == "chat" and request.session_id == session
    assert any(f"Request: {rid}" in str(item.get("content")) for item in request.input_items())
    tools = {t["function"]["name"] for t in request.body["tools"]}
    assert {"peerwire_reply", "peerwire_receive_messages", "peerwire_followup_task"} <= tools
    assert not log.problems and all(r.outcome == "answered" for r in log.requests)
    # The export binds them too, and stays valid: the canonical request, OpenCode's session and message ids.
    export = lab.admin.call("export")
    assert not list(document_validator("export.schema.json").iter_errors(export))
    (exported,) = [b for b in export["bindings"] if b["request_id"] == rid]
    assert (exported["thread_id"], exported["turn_id"]) == (session, binding["turn_id"])
    rows = [e for e in export["evidence"] if e["detail"].get("final_item_id") == captured["final_item_id"]]
    assert [r["stage"] for r in rows] == ["binding_capture"]
    record(lab, "idle_prompt")


def test_an_explicit_reply_suppresses_the_automatic_one(lab: AcpLab):
    rid = lab.task("Please give me an explicit reply: which codename follows Juniper?")
    reply = lab.reply_to(rid)
    assert (reply["status"], reply["body"], reply["sender"]["name"]) == ("done", routes.EXPLICIT_ANSWER, "B")
    # Bound before or after the reply (the agent's update and its tool call race), the turn owes no result.
    lab.until("the binding ends", lambda: [b["state"] for b in lab.trace(rid)["bindings"]] == ["suppressed"])
    # The reply came through B's MCP server (the tool call is in the transcript), and only once.
    assert lab.await_turn(lab.trace(rid)["bindings"][0]["turn_id"])["status"] == "end_turn"
    replies = [i for i in lab.trace(rid)["interactions"] if i["kind"] == "reply"]
    assert len(replies) == 1
    # OpenCode's MCP tools/call carries no _meta: the receipt binds no provider call id (a Codex call's does).
    assert "call_id" not in (replies[0]["tool_receipt"] or {}), replies[0]["tool_receipt"]
    seen = updates(lab.transcript())
    titles = {u["toolCallId"]: u["title"] for u in seen if u["sessionUpdate"] == "tool_call"}
    assert [titles[u["toolCallId"]] for u in seen if u["sessionUpdate"] == "tool_call_update"
            and u.get("status") == "completed"] == ["peerwire_reply"]
    record(lab, "explicit_reply")


def test_an_interrupt_cancels_the_turn(lab: AcpLab):
    rid = lab.task("Please take your time with this long task.")
    lab.model.wait_for_hold(routes.HOLD, timeout=WAIT_S)
    turn = lab.owner()["active_turn"]
    out = lab.tool("A", "interrupt_agent", {"target": "B"}, wait_s=WAIT_S)
    assert (out["previous_status"], out["turn_id"]) == ("active", turn)
    assert validate_output("interrupt_agent", out) == []  # OpenCode's own MCP client would refuse anything else
    reply = lab.reply_to(rid)
    assert (reply["status"], reply["code"], reply["sender"]["name"]) == ("blocked", "turn_interrupted", "peerwire")
    lines = lab.transcript()
    (cancel,) = sent(lines, "session/cancel")
    assert cancel["params"] == {"sessionId": lab.attached["session_id"]} and "id" not in cancel
    answer = next(entry["message"] for entry in lines if entry["dir"] == "received" and "result" in entry["message"]
                  and entry["message"]["result"].get("stopReason"))
    assert answer["result"]["stopReason"] == "cancelled"
    assert lab.await_turn(turn)["status"] == "cancelled"
    # The agent takes later work.
    later = lab.task("Please work out which release codename comes after Juniper.")
    assert lab.reply_to(later)["body"] == routes.AUTO_ANSWER
    record(lab, "cancel")


def test_information_waits_for_receive(lab: AcpLab):
    turn = lab.prompt("Please wait for mail, then read your mailbox.")["turn_id"]
    lab.model.wait_for_exchange(lambda e: e.rule_id == "wait-mail", timeout=WAIT_S)
    ix = lab.inform("The build is green.")
    assert lab.await_turn(turn)["status"] == "end_turn"
    # No inject: B's turn got it by its own receive, and nothing else carried it.
    stages = [s["stage"] for s in lab.stages(ix)]
    assert "received" in stages and "provider_visible" not in stages
    finals = [u["content"]["text"] for u in updates(lab.transcript()) if u["sessionUpdate"] == "agent_message_chunk"]
    assert finals[-1] == "My mailbox says: The build is green."
    # Received, it is not carried again by the next turn.
    later = lab.prompt("hello")["turn_id"]
    assert lab.await_turn(later)["status"] == "end_turn"
    prompts = sent(lab.transcript(), "session/prompt")
    assert [[b["text"] for b in p["params"]["prompt"]] for p in prompts] == [
        ["Please wait for mail, then read your mailbox."], ["hello"]]
    assert lab.trace(ix)["interactions"][0]["state"] == "admitted"
    record(lab, "receive")


def test_information_goes_in_the_next_turn(lab: AcpLab):
    ix = lab.inform("The release is on Friday.")
    turn = lab.prompt("Is there anything new? hello")["turn_id"]
    assert lab.await_turn(turn)["status"] == "end_turn"
    (prompt,) = sent(lab.transcript(), "session/prompt")
    texts = [b["text"] for b in prompt["params"]["prompt"]]
    assert texts[0].startswith("Message Type: MESSAGE") and texts[1:] == ["The release is on Friday.",
                                                                          "Is there anything new? hello"]
    (visible,) = [s["detail"] for s in lab.stages(ix) if s["stage"] == "provider_visible"]
    assert (visible["via"], visible["path"], visible["prompt_message_id"]) == ("session/prompt", "next_turn", turn)
    finals = [u["content"]["text"] for u in updates(lab.transcript()) if u["sessionUpdate"] == "agent_message_chunk"]
    assert finals[-1] == "Heard: The release is on Friday."
    record(lab, "next_turn")


def test_a_reply_to_an_idle_requester_goes_in_its_next_prompt(lab: AcpLab):
    """OpenCode as the requester (a mixed pair's A): its model tasks A and ends its turn; A's reply finds it idle,
    waits (no inject), and goes in its next prompt, before the prompt's own text, once."""
    asked = lab.prompt("Please ask A which codename follows Juniper, then stop.")["turn_id"]
    assert lab.await_turn(asked)["status"] == "end_turn"
    (task,) = lab.tool("A", "receive_messages", {"timeout_ms": 0})["records"]
    assert (task["kind"], task["sender"]["name"], task["body"]) == ("task", "B", "Which codename follows Juniper?")
    reply = lab.tool("A", "reply", {"request_id": task["request_id"], "status": "done", "message": routes.A_ANSWER})
    later = lab.prompt("Any news from A?")["turn_id"]
    assert lab.await_turn(later)["status"] == "end_turn"
    prompts = sent(lab.transcript(), "session/prompt")
    texts = [b["text"] for b in prompts[1]["params"]["prompt"]]
    assert texts[0].startswith("Message Type: FINAL_ANSWER") and f"Request: {task['request_id']}" in texts[0]
    assert texts[1:] == [routes.A_ANSWER, "Any news from A?"]
    (visible,) = [s["detail"] for s in lab.stages(reply["interaction_id"]) if s["stage"] == "provider_visible"]
    assert (visible["via"], visible["path"], visible["prompt_message_id"]) == ("session/prompt", "next_turn", later)
    finals = [u["content"]["text"] for u in updates(lab.transcript()) if u["sessionUpdate"] == "agent_message_chunk"]
    assert finals[-1] == f"A answered: {routes.A_ANSWER}"
    record(lab, "requester_next_turn")


def test_a_task_for_a_busy_agent_waits_for_its_turn_to_end(lab: AcpLab):
    first = lab.task("Please take your time with this long task.")
    lab.model.wait_for_hold(routes.HOLD, timeout=WAIT_S)
    second = lab.task("Please do the second task.")
    assert lab.trace(second)["interactions"][0]["state"] == "pending"  # no steer: it waits
    assert len(sent(lab.transcript(), "session/prompt")) == 1
    lab.model.release(routes.HOLD)
    assert lab.reply_to(first)["body"] == "Finally done with the long task."
    assert lab.reply_to(second)["body"] == "Second task done."
    prompts = sent(lab.transcript(), "session/prompt")
    assert [f"Request: {first}" in p["params"]["prompt"][0]["text"] for p in prompts] == [True, False]
    record(lab, "busy")


def test_a_failed_prompt_fails_the_task(lab: AcpLab):
    rid = lab.task("Please do this one, which fails.")
    reply = lab.reply_to(rid)
    assert (reply["status"], reply["code"], reply["sender"]["name"]) == ("failed", "prompt_error", "peerwire")
    log = ModelRequestLog.load(lab.root / "model-requests.jsonl")
    assert [r.outcome for r in log.requests] == ["unexpected"]  # OpenCode did not retry the 400
    record(lab, "failed_prompt")
