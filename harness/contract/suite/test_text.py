"""Byte-exactness of every text a tool accepts and hands back, through every path that returns it.

Bodies (information, task and reply messages) come back through the first
read, the re-offer of an unacknowledged read, the replay of a cursor, page by
page with limit 1, and as the requester's reply record. Names and aliases come
back through list_agents, receipts and the sender and recipient of records,
and as targets they reach exactly their agent and nothing that merely looks
the same. The corpus is what normalising, trimming or re-encoding code gets
wrong: decomposed and compatibility characters, CRLF and lone CR, leading and
trailing whitespace, NUL and other control characters, emoji sequences,
right-to-left text and its marks, zero-width characters, a byte-order mark.
Failures show each difference escaped, with its code points.
"""

from __future__ import annotations

import secrets
from typing import Any, Iterator

from harness.contract.fixtures import succeed, tool_call
from harness.contract.manifest import requirement
from harness.contract.textdiff import explain

BODIES: dict[str, str] = {
    "decomposed": "cafe\u0301 vs caf\u00e9, A\u030a vs \u00c5 vs \u212b, \u1100\u1161 vs \uac00",
    "compatibility": "\ufb01le \uff21\uff22 \u2460 x\u00b2 \u00bd \u2126",
    "combining-stack": "a\u0308\u0323\u0301 q\u0307\u0323",
    "crlf": "one\r\ntwo\r\n\r\nthree\r\n",
    "lone-cr-and-lf": "one\rtwo\nthree\r\rfour\n\n",
    "trailing-whitespace": "text with trailing blanks \t  ",
    "leading-whitespace": "  \t indented first line\n  and the second",
    "whitespace-only": " \t \n ",
    "nul-and-controls": "a\u0000b\u0001c\u001b[31mred\u001b[0m\u007f\u0085\u2028\u2029end",
    "emoji": "\U0001f469\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 \U0001f44d\U0001f3fd \U0001f1eb\U0001f1f7 \u2764\ufe0f \U0001d518",
    "right-to-left": "\u05e9\u05dc\u05d5\u05dd \u200fabc\u200e \u0645\u0631\u062d\u0628\u0627 \u202eevil\u202c 123",
    "zero-width": "zero\u200bwidth\u200cnon\u200djoiner\u2060\u00adsoft",
    "byte-order-mark": "\ufeffstarts with a BOM\ufeff",
    "escapes-literal": "\\u00e9 is not \u00e9; \"quoted\" \\n stays \\\\",
}
"""Bodies, by what they probe. The schema admits every string of at least one character, NUL included."""


def _records(page: dict, kind: str) -> Iterator[dict]:
    return (r for r in page.get("records", []) if r.get("kind") == kind)


def _compare(problems: list[str], path: str, label: str, expected: str, found: Any) -> None:
    if found != expected:
        shown = explain(expected, found) if isinstance(found, str) else f"found {found!r}"
        problems.append(f"{label} through {path}: {shown}")


@requirement("text:bodies:every-path")
def test_every_body_comes_back_byte_for_byte_on_every_path(servers):
    sender, recipient = servers.caller("writer"), servers.caller("reader")
    writer, reader = servers.start(sender), servers.start(recipient)
    start = succeed(reader, "receive_messages", {})["cursor"]
    sent: dict[str, tuple[str, str]] = {}  # record id -> (label, body)
    for label, body in BODIES.items():
        info = succeed(writer, "send_message", {"target": recipient.name, "message": body})
        task = succeed(writer, "followup_task", {"target": recipient.name, "message": body})
        sent[info["interaction_id"]] = (f"information {label}", body)
        sent[task["interaction_id"]] = (f"task {label}", body)
    problems: list[str] = []

    def check(path: str, records: list[dict]) -> None:
        by_id = {r.get("record_id"): r for r in records}
        for record_id, (label, body) in sent.items():
            if record_id not in by_id:
                problems.append(f"{label} through {path}: the record is missing")
            else:
                _compare(problems, path, label, body, by_id[record_id].get("body"))

    first = succeed(reader, "receive_messages", {"limit": 100})
    check("the first read", first["records"])
    check("the re-offer of an unacknowledged read", succeed(reader, "receive_messages", {"limit": 100})["records"])
    check("the replay of a cursor", succeed(reader, "receive_messages", {"cursor": start, "limit": 100})["records"])
    paged, cursor = [], start
    for _ in range(len(sent) + 1):
        page = succeed(reader, "receive_messages", {"cursor": cursor, "limit": 1})
        paged += page["records"]
        cursor = page["cursor"]
        if not page["has_more"]:
            break
    check("reading page by page (limit 1)", paged)

    replies = {}
    for record in _records(first, "task"):
        label, body = sent[record["record_id"]]
        receipt = succeed(reader, "reply", {"request_id": record["request_id"], "status": "done", "message": body})
        replies[receipt["interaction_id"]] = (label.replace("task", "reply"), body)
    sent = replies
    answers = succeed(writer, "receive_messages", {"limit": 100})
    check("the requester's read", list(_records(answers, "reply")))
    assert not problems, f"{len(problems)} texts changed on the way:\n  " + "\n  ".join(problems)


NAME_SHAPES = ("{tag} trailing space ", "{tag}  two  spaces", "{tag}.dot_under@at+plus-dash", "MiXeD {tag} Case")
"""Names and aliases within the contract's alphabet (letters, digits, space and ._@+-) that trimming,
whitespace collapsing or case folding would change."""


@requirement("text:names:every-path")
def test_every_name_and_alias_comes_back_exactly_on_every_path(servers):
    tag = secrets.token_hex(3)
    observer = servers.caller("observer")
    watcher = servers.start(observer)
    agents = []
    for n, shape in enumerate(NAME_SHAPES):
        name, alias = shape.format(tag=tag), shape.format(tag=f"{tag}a{n}")
        agents.append((servers.provisioner.register(name, aliases=(alias,)), name, alias))
    problems: list[str] = []
    listed = {a.get("agent_id"): a for a in succeed(watcher, "list_agents", {})["agents"]}
    for agent, name, alias in agents:
        entry = listed.get(agent.agent_id, {})
        _compare(problems, "list_agents", "a name", name, entry.get("name"))
        _compare(problems, "list_agents", "an alias", alias, (entry.get("aliases") or [None])[0])
        only = succeed(watcher, "list_agents", {"name_prefix": name})["agents"]
        if [a.get("agent_id") for a in only] != [agent.agent_id]:
            problems.append(f"list_agents name_prefix={name!r} lists {[a.get('name') for a in only]}")
        for target in (name, alias):
            receipt = succeed(watcher, "send_message", {"target": target, "message": "to you exactly"})
            _compare(problems, f"the receipt for target {target!r}", "the recipient's name", name,
                     receipt.get("recipient", {}).get("name"))
            if receipt.get("recipient", {}).get("agent_id") != agent.agent_id:
                problems.append(f"target {target!r} reached {receipt.get('recipient')}, not {agent.agent_id}")
        for lookalike in {name.strip(), " ".join(name.split())} - {name}:
            outcome = tool_call(watcher, "send_message", {"target": lookalike, "message": "not you"})
            code = (outcome.structured or {}).get("error", {}).get("code") if outcome.is_error else "success"
            if code != "unknown_target":
                problems.append(f"target {lookalike!r}, which only looks like {name!r}: {code}, not unknown_target")
        own = servers.start(agent)
        task = succeed(own, "followup_task", {"target": observer.name, "message": "from a tricky name"})
        mailbox = succeed(own, "receive_messages", {"limit": 100})
        for record in mailbox["records"]:
            _compare(problems, "the recipient's own records", "the recipient's name", name,
                     record.get("recipient", {}).get("name"))
        page = succeed(watcher, "receive_messages", {"limit": 100})
        mine = [r for r in page["records"] if r.get("record_id") == task["interaction_id"]]
        _compare(problems, "the sender of a task record", "the sender's name", name,
                 mine[0].get("sender", {}).get("name") if mine else None)
        succeed(watcher, "receive_messages", {"ack_cursor": page["cursor"]})
        succeed(watcher, "reply", {"request_id": task["request_id"], "status": "done", "message": "ok"})
        answer = succeed(own, "receive_messages", {"limit": 100})
        for record in _records(answer, "reply"):
            _compare(problems, "the reply record to it", "the recipient's name", name,
                     record.get("recipient", {}).get("name"))
    assert not problems, f"{len(problems)} names changed on the way:\n  " + "\n  ".join(problems)
