"""The scripted model's rules for OpenCode agent B on every ACP delivery route.

B decides only from what OpenCode sends it: the task's envelope (a word in the
peer's text picks the route), its tool outputs, an operator's prompt. A is the
requester, driven through the control socket (no model).
"""

from __future__ import annotations

import tomllib

from harness.model.rules import ModelScript, script_from_document

AUTO_ANSWER = "After Juniper comes Kestrel: the next release codename is Kestrel."
EXPLICIT_ANSWER = "Kestrel follows Juniper (explicit reply)."
A_ANSWER = "Kestrel follows Juniper, says A."
HOLD = "b-held"

RULES = r'''
[scenario]
name = "acp-routes"

# -- B as the requester: it tasks A, ends its turn; A's reply waits and goes in B's next prompt ------------
[[rules.B]]
id = "news-from-a"
when = [
  { envelope = { type = "FINAL_ANSWER", matches = 'Payload:\n(?P<answer>[^\n]+)' } },
  { user_text = { last = true, contains = "Any news from A" } },
]
emit = [{ message = { phase = "final_answer", text = "A answered: ${answer}" } }]

[[rules.B]]
id = "asked-a"
when = [{ tool_output = { tool = "followup_task", namespace = "mcp__peerwire", last = true, json = { request_id = "request_id" } } }]
emit = [{ message = { phase = "final_answer", text = "Asked A (${request_id})." } }]

[[rules.B]]
id = "ask-a"
when = [{ user_text = { last = true, contains = "Please ask A which codename" } }]
emit = [{ function_call = { namespace = "mcp__peerwire", name = "followup_task", arguments = { target = "A", message = "Which codename follows Juniper?" } } }]

# -- explicit reply: B calls reply with the request id its envelope names, then ends its turn ---------------
[[rules.B]]
id = "after-reply"
when = [{ tool_output = { tool = "reply", namespace = "mcp__peerwire", latest = true } }]
emit = [{ message = { phase = "final_answer", text = "Replied to the request." } }]

[[rules.B]]
id = "explicit-reply"
when = [{ envelope = { type = "NEW_TASK", last = true, contains = "explicit reply", matches = 'Request: (?P<request_id>rq_[0-9a-f]+)' } }]
emit = [
  { message = { phase = "commentary", text = "Replying to ${request_id}." } },
  { function_call = { namespace = "mcp__peerwire", name = "reply", arguments = { request_id = "${request_id}", status = "done", message = "Kestrel follows Juniper (explicit reply)." } } },
]

# -- a held turn (interrupt, busy): the answer waits until the hold opens or the turn is cancelled ------------
[[rules.B]]
id = "held"
hold = "b-held"
when = [{ envelope = { type = "NEW_TASK", last = true, contains = "take your time" } }]
emit = [{ message = { phase = "final_answer", text = "Finally done with the long task." } }]

# -- the next turn carries information B has not received --------------------------------------------------
[[rules.B]]
id = "saw-mail"
when = [
  { envelope = { type = "MESSAGE", matches = 'Payload:\n(?P<fact>[^\n]+)' } },
  { user_text = { last = true, contains = "anything new" } },
]
emit = [{ message = { phase = "final_answer", text = "Heard: ${fact}" } }]

# -- information waits for receive: B waits for mail in its turn, then reads its mailbox -------------------
[[rules.B]]
id = "report-mail"
when = [{ tool_output = { tool = "receive_messages", namespace = "mcp__peerwire", latest = true, json = { body = "records.0.body" } } }]
emit = [{ message = { phase = "final_answer", text = "My mailbox says: ${body}" } }]

[[rules.B]]
id = "read-mail"
when = [{ tool_output = { tool = "wait_agent", namespace = "mcp__peerwire", latest = true } }]
emit = [{ function_call = { namespace = "mcp__peerwire", name = "receive_messages", arguments = { timeout_ms = 0 } } }]

[[rules.B]]
id = "wait-mail"
when = [{ user_text = { last = true, contains = "wait for mail" } }]
emit = [{ function_call = { namespace = "mcp__peerwire", name = "wait_agent", arguments = { timeout_ms = 60000 } } }]

# -- automatic reply: B only gives a final answer ----------------------------------------------------------
[[rules.B]]
id = "auto-answer"
when = [{ envelope = { type = "NEW_TASK", last = true, contains = "release codename" } }]
emit = [{ message = { phase = "final_answer", text = "After Juniper comes Kestrel: the next release codename is Kestrel." } }]

[[rules.B]]
id = "second-task"
when = [{ envelope = { type = "NEW_TASK", last = true, contains = "second task" } }]
emit = [{ message = { phase = "final_answer", text = "Second task done." } }]

[[rules.B]]
id = "hello"
when = [{ user_text = { last = true, contains = "hello" } }]
emit = [{ message = { phase = "final_answer", text = "Hello." } }]
'''
"""A task whose text matches no rule ("this one fails") gets HTTP 400: OpenCode's prompt fails."""


def model_script() -> ModelScript:
    return script_from_document(tomllib.loads(RULES), source="tests/acp/routes.py")
