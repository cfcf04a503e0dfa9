"""The collaboration probe: each leg only from actual model inputs, and where each was seen."""

from __future__ import annotations

import json

from harness.model.probe import ProbeExpectation, collab_probe, mail_forms, observe, requests_from_log

EXPECT = ProbeExpectation.from_table({"question": "Which year?", "reply": "2026.", "child_final": "It is Aurora.",
                                      "final": "The helper reports: It is Aurora."})
TASK = "Message Type: NEW_TASK\nTask name: /root/worker\nSender: /root\nPayload:\nFind it."


def message(text: str, role: str = "user") -> dict:
    return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}


def envelope(kind: str, recipient: str, sender: str, body: str) -> dict:
    return message(f"Message Type: {kind}\nTask name: {recipient}\nSender: {sender}\nPayload:\n{body}")


def final(text: str) -> dict:
    return {"type": "message", "phase": "final_answer", "content": [{"type": "output_text", "text": text}]}


def exchange() -> list[dict]:
    question = envelope("MESSAGE", "/root", "/root/worker", "Which year?")
    return [
        {"seq": 0, "input": [message("go")], "emitted": []},
        {"seq": 3, "input": [message("go"), question], "emitted": []},
        {"seq": 4, "input": [message(TASK), envelope("MESSAGE", "/root/worker", "/root", "2026.")],
         "emitted": [final("It is Aurora.")]},
        {"seq": 6, "input": [message("go"), question, envelope("FINAL_ANSWER", "/root", "/root/worker",
                                                               "It is Aurora.")],
         "emitted": [final("The helper reports: It is Aurora.")]},
    ]


def test_every_leg_is_named_by_the_requests_it_was_seen_in() -> None:
    seen = observe(exchange(), EXPECT)
    assert seen.summary == collab_probe(exchange(), EXPECT)
    assert seen.summary["success"] is True and seen.summary["requests"] == 4
    assert seen.summary["nativeMessageOccurrences"] == 5  # repeated history counts again
    assert seen.seen == {"childQuestionObserved": [3, 6], "parentReplyObserved": [4], "childFinalObserved": [6],
                         "finalExact": [6]}
    assert EXPECT.child == "/root/worker" and EXPECT.parent == "/root"


def test_a_reply_seen_only_by_the_parent_does_not_count() -> None:
    requests = exchange()
    # The parent's reply appears in a parent input (e.g. echoed), never in the child's.
    requests[2]["input"] = [message(TASK)]
    requests[3]["input"].append(envelope("MESSAGE", "/root/worker", "/root", "2026."))
    seen = observe(requests, EXPECT)
    assert seen.summary["parentReplyObserved"] is False and seen.summary["success"] is False
    assert seen.seen["parentReplyObserved"] == []


def test_the_log_reader_keeps_request_numbers_of_one_route() -> None:
    lines = [json.dumps(entry) for entry in (
        {"event": "request", "seq": 0, "agent": "root", "body": {"input": [message("go")]}},
        {"event": "request", "seq": 1, "agent": "other", "body": {"input": []}},
        {"event": "response", "seq": 0, "agent": "root", "items": [final("x")]},
    )]
    assert requests_from_log(lines, "root") == [{"seq": 0, "input": [message("go")], "emitted": [final("x")],
                                                 "outcome": None, "error": None}]


def test_the_summary_counts_encrypted_items_says_how_the_parent_stopped_and_counts_model_errors() -> None:
    requests = exchange()
    sealed = {"type": "agent_message", "author": "/root/worker", "recipient": "/root",
              "content": [{"type": "encrypted_content", "encrypted_content": "opaque"}]}
    call = {"type": "function_call", "name": "send_message", "arguments": "{}", "call_id": "c1",
            "encrypted_function_args": ["message"]}
    plain = {**call, "call_id": "c2", "encrypted_function_args": []}
    requests[1]["input"] += [sealed, call, plain]
    requests[3]["input"] += [sealed, call, plain]
    summary = observe(requests, EXPECT).summary
    assert summary["encryptedMessageOccurrences"] == 4  # an empty encrypted_function_args is plaintext
    assert (summary["stopReason"], summary["modelErrors"], summary["requestCap"]) == ("stop", 0, 12)
    assert summary["success"] is True
    requests.append({"seq": 7, "input": [message("go")], "emitted": [], "outcome": "unexpected",
                     "error": "no rule matches"})
    summary = observe(requests, EXPECT).summary
    assert (summary["stopReason"], summary["modelErrors"], summary["success"]) == ("error", 1, False)


def test_a_probe_over_its_request_cap_fails_naming_the_cap() -> None:
    capped = ProbeExpectation.from_table({"question": "Which year?", "reply": "2026.", "child_final": "It is Aurora.",
                                          "final": "The helper reports: It is Aurora.", "max_requests": 4})
    assert observe(exchange(), capped).summary["success"] is True  # exactly at the cap
    over = ProbeExpectation.from_table({"question": "Which year?", "reply": "2026.", "child_final": "It is Aurora.",
                                        "final": "The helper reports: It is Aurora.", "max_requests": 3})
    summary = observe(exchange(), over).summary
    assert summary["success"] is False and all(summary[leg] for leg in
                                               ("childQuestionObserved", "parentReplyObserved", "finalExact"))
    assert summary["capExceeded"] == "the probe's request cap of 3 was exceeded: 4 model requests"


def test_legs_count_as_native_agent_messages_and_the_summary_tells_the_forms_apart() -> None:
    def native(item: dict) -> dict:
        headers = dict(line.split(": ", 1) for line in item["content"][0]["text"].splitlines()[1:3])
        return {"type": "agent_message", "author": headers["Sender"], "recipient": headers["Task name"],
                "content": item["content"]}

    requests = exchange()
    for request in requests:  # every envelope but the child's task (a turn's input: a user message) goes native
        request["input"] = [native(i) if TASK not in i["content"][0]["text"] and "Message Type" in
                            i["content"][0]["text"] else i for i in request["input"]]
    summary = observe(requests, EXPECT).summary
    assert summary["success"] is True
    assert (summary["nativeMessageOccurrences"], summary["agentMessageOccurrences"],
            summary["userMessageOccurrences"]) == (5, 4, 1)
    assert mail_forms(summary) == "5 envelopes in model inputs (4 as native agent messages, 1 as user messages)"
    plain = observe(exchange(), EXPECT).summary
    assert (plain["agentMessageOccurrences"], plain["userMessageOccurrences"]) == (0, 5)
