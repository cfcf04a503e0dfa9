"""Judgements over a collaboration tree (scenario ``profile = "collab"``).

The root agent (``/root``) spawns children that are threads of its own Codex
app-server, and the agents of the tree address each other by path. Beyond
what the messaging judgements read, these rely on:

* the core's agent rows: each tree agent's path, parent and Codex thread;
* the root's app-server transcript, which carries every thread of the tree
  (``thread/fork``, and notifications naming their ``threadId``);
* each thread's own rollout file, which lies in the root's rollouts folder;
* the model requests of each thread (Codex names the thread in ``client_metadata``);
* the probe summary the runner computed from the model request log alone.

Agents are named as the core names them: the runner's agents by their names
(``root``), children by their paths (``/root/worker``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from harness.evidence.rollouts import RolloutLine
from harness.model.probe import LEGS
from harness.evidence.responses import is_incoming, item_text
from harness.evidence.envelope_grammar import message_type
from harness.evidence.stages import Stage

from ..observations import EvidenceMissing, Observations, output_json
from .kernel import Evidence, judgements, require
from .readings import carries, inject_lines, opened_turn, result_thread, why_not_carried


def _origin(obs: Observations, record: Mapping[str, Any], sender: str, recipient_path: str,
            ev: Evidence) -> str:
    """Where the sender's thread produced the record: its send_message call, or its turn's final answer."""
    if record["kind"] == "reply":
        bindings = obs.bindings_of(record["request_id"])
        require(len(bindings) == 1, f"{record['request_id']} has {len(bindings)} bindings, not one")
        turn = bindings[0]["turn_id"]
        require(bindings[0]["thread_id"] in obs.threads(sender),
                f"the task was bound to another thread than {sender}'s")
        finals = [line for line in obs.final_messages(sender) if line.running_turn_id == turn]
        require(finals and finals[-1].text() == record["body"],
                f"the record is not the final answer of {sender}'s turn {turn}")
        ev.cite(finals[-1])
        return f"the final answer of its turn {turn}"
    receipt = record["tool_receipt"] or {}
    require(receipt.get("thread_id") in obs.threads(sender),
            f"the core attributed the call to thread {receipt.get('thread_id')}, not {sender}'s")
    calls = [(call, out) for call, out in obs.tool_calls(sender, "send_message")
             if call.payload.get("call_id") == receipt.get("call_id")]
    require(len(calls) == 1, f"{sender}'s rollout shows no send_message call {receipt.get('call_id')}")
    call, output = calls[0]
    ev.cite(call, output)
    arguments = output_json(call.payload.get("arguments") or "") or {}
    require(arguments.get("target") == recipient_path and arguments.get("message") == record["body"],
            f"the send_message call was {arguments}, not this record")
    return f"its send_message call {receipt['call_id']}"


def spawned_child(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """The parent's spawn_agent call created the child at ``path`` in the core's tree, with its message as the
    child's first task."""
    parent, path = params["parent"], params["path"]
    parent_row, child = obs.agent_row(parent), obs.agent_row(path)
    require(parent_row.get("path"), f"{parent} is not in a collaboration tree")
    require(child.get("path") == path, f"the core records {path} at path {child.get('path')}")
    require(child.get("parent_agent_id") == parent_row["agent_id"],
            f"the core records {path}'s parent as {obs.agent_name(child.get('parent_agent_id'))}, not {parent}")
    calls = [(call, out) for call, out in obs.tool_calls(parent, "spawn_agent")
             if out is not None and (output_json(out.text()) or {}).get("task_name") == path]
    require(len(calls) == 1, f"{parent}'s rollout shows {len(calls)} spawn_agent calls answered with {path}")
    call, output = calls[0]
    ev.cite(call, output)
    arguments = output_json(call.payload.get("arguments") or "") or {}
    require(f"{parent_row['path']}/{arguments.get('task_name')}" == path,
            f"task_name {arguments.get('task_name')!r} under {parent_row['path']} is not {path}")
    tasks = [row for row in obs.records if row["kind"] == "task" and row["sender"]["agent_id"] == parent_row["agent_id"]
             and row["recipient"]["agent_id"] == child["agent_id"]]
    require(tasks, f"no task from {parent} to {path} was admitted")
    task = tasks[0]
    ev.cite(task["record_id"])
    call_id = call.payload.get("call_id")
    require((task["tool_receipt"] or {}).get("call_id") == call_id,
            f"{path}'s first task was not admitted by the spawn_agent call {call_id}")
    require(task["body"] == arguments.get("message"), f"{path}'s first task is not the spawn_agent message")
    return (f"{parent}'s spawn_agent call {call_id} (task_name {arguments['task_name']!r}) registered {path}, "
            f"child of {parent_row['path']} in the core's tree, and admitted its message as task {task['request_id']}")


def child_thread(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """The child is a real Codex thread of its parent's app-server: its own thread id (forked or started
    there), its own turn (turn/start and turn/started on that thread) and its own rollout."""
    agent, parent = params["agent"], params["parent"]
    thread = obs.agent_row(agent).get("provider_session_id")
    require(thread, f"the core records no Codex thread for {agent}")
    parent_threads = obs.threads(parent)
    require(thread not in parent_threads, f"{agent} has its parent's thread {thread}")
    host = obs.host(agent)
    require(host == obs.host(parent), f"{agent}'s thread is not served by {parent}'s app-server")
    transcript = obs.transcript(host)
    created = [line for line in transcript if line.dir == "sent" and line.method in ("thread/fork", "thread/start")
               and result_thread(obs, host, line) == thread]
    require(len(created) == 1, f"{host}'s app-server created thread {thread} {len(created)} times, not once")
    creation = created[0]
    ev.cite(creation, obs.response_to(host, creation))
    if creation.method == "thread/fork":
        require(creation.params.get("threadId") in parent_threads,
                f"thread/fork forked {creation.params.get('threadId')}, not one of {parent}'s threads")
    starts = {opened_turn(obs, host, line): line for line in transcript
              if line.dir == "sent" and line.method == "turn/start" and line.params.get("threadId") == thread}
    started = [line for line in transcript if line.method == "turn/started" and line.params.get("threadId") == thread]
    require(started, f"no turn started on thread {thread}")
    turns = [(line.params.get("turn") or {}).get("id") for line in started]
    unopened = [turn for turn in turns if turn not in starts]
    require(not unopened, f"turns {unopened} started on {thread} without a turn/start on it")
    ev.cite(starts[turns[0]], started[0])
    lines = obs.rollouts.lines(thread_id=thread)
    meta = next((line for line in lines if line.record_type == "session_meta"), None)
    require(meta is not None, f"no rollout records thread {thread}")
    ev.cite(meta)
    forked_from = meta.payload.get("forked_from_id")
    if creation.method == "thread/fork":
        require(forked_from == creation.params.get("threadId"),
                f"the rollout says thread {thread} was forked from {forked_from}")
    task_started = [line for line in lines if line.record_type == "event_msg" and line.payload_type == "task_started"]
    require([line.payload.get("turn_id") for line in task_started] == turns,
            f"the rollout's turns {[line.payload.get('turn_id') for line in task_started]} are not {turns}")
    ev.cite(task_started[0])
    return (f"{agent} is Codex thread {thread}, created by {creation.method} "
            f"{'of ' + str(creation.params.get('threadId')) + ' ' if creation.method == 'thread/fork' else ''}"
            f"in {host}'s app-server; its turn {turns[0]} started on that thread and its own rollout "
            f"({meta.at.file}) records it")


def tree_message(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """A message between agents of a collaboration tree, from its origin to the recipient's model.

    The record's sender and recipient are tree agents and its envelope type is
    ``type``; the sender's own thread produced it (a send_message call the core
    attributed to that thread, or, for a FINAL_ANSWER, the final answer of the
    sender's bound turn); it was injected once into the recipient's thread as the
    collaboration envelope (paths and the exact body); the recipient's rollout
    and a model request of that thread (the model request log) carry that envelope.
    """
    record = obs.select(params["record"])
    ev.cite(record["record_id"])
    sender_id, recipient_id = record["sender"]["agent_id"], record["recipient"]["agent_id"]
    sender_path, recipient_path = obs.paths.get(sender_id), obs.paths.get(recipient_id)
    require(sender_path and recipient_path, f"{record['record_id']} is not between agents of a tree")
    kind = message_type(record["kind"])
    require(kind == params["type"], f"{record['record_id']} is a {kind}, not a {params['type']}")
    if "body" in params:
        require(record["body"] == params["body"], f"the body is {record['body']!r}, not {params['body']!r}")
    sender, recipient = obs.agent_name(sender_id), obs.agent_name(recipient_id)
    origin = _origin(obs, record, sender, recipient_path, ev)
    visible = obs.evidence(record["record_id"], Stage.PROVIDER_VISIBLE)
    require(len(visible) == 1, f"{len(visible)} provider_visible evidence rows, not one")
    thread = visible[0]["detail"].get("thread_id")
    require(visible[0]["detail"].get("via") == "thread/inject_items" and thread in obs.threads(recipient),
            f"made visible {visible[0]['detail']}, not injected into {recipient}'s thread")
    # The envelope is judged by the contract's grammar (contracts/envelope.json, form collab): the recipient's
    # and the sender's paths and the exact body, whatever the core under test renders.
    host = obs.host(recipient)
    injects = [line for line in inject_lines(obs, host, record) if line.params.get("threadId") == thread
               and len(line.params.get("items") or []) == 1]
    if not injects:
        sent = [item_text(item) for line in obs.transcript(host) if line.dir == "sent"
                and line.method == "thread/inject_items" and line.params.get("threadId") == thread
                for item in line.params.get("items") or []]
        require(False, f"{host}'s transcript has no inject_items of the envelope into {thread}: "
                       f"{why_not_carried(obs, sent, record)}")
    require(len(injects) == 1, f"{host}'s transcript has {len(injects)} inject_items of the envelope into {thread}")
    answer = obs.response_to(host, injects[0])
    ev.cite(injects[0], answer)
    require(answer is not None and "result" in answer.message, "thread/inject_items was not acknowledged")
    # The form the adapter recorded is the one the transcript shows: a native agent message names both ends.
    form = str(visible[0]["detail"].get("form") or "user_message")
    (item,) = injects[0].params["items"]
    native = {"type": "agent_message", "author": sender_path, "recipient": recipient_path}
    require(form.split("/")[0] == item.get("type") and (item.get("type") != "agent_message" or all(
        item.get(k) == v for k, v in native.items())) and (item.get("type") == "agent_message" or item.get("role")
                                                               == "user"),
            f"recorded as {form}, injected as {json.dumps({k: item.get(k) for k in ('type', 'role', 'author', 'recipient')})}")
    seen: list[RolloutLine] = [line for line in obs.rollout(recipient) if line.record_type == "response_item"
                               and is_incoming(line.payload) and carries(obs, line.text(), record)]
    require(len(seen) == 1, f"{recipient}'s rollout holds the envelope {len(seen)} times, not once")
    ev.cite(seen[0])
    where = "its rollout"
    requests = [exchange.seq for exchange in obs.thread_exchanges(thread)
                if any(is_incoming(sent) and sent.get("type") == item.get("type") and carries(obs, item_text(sent), record)
                       for sent in exchange.input_items())]
    require(requests, f"no model request of thread {thread} carries the envelope")
    ev.cite(*requests[:3])
    where = f"model request {requests[0]}"
    return (f"{kind} {record['record_id']} {sender_path} -> {recipient_path}: {origin}, injected once into "
            f"{recipient}'s thread {thread} as the collaboration envelope with the exact body, "
            f"{'a native agent message' if form.startswith('agent_message') else 'a user message'}, seen in {where}")


def probe_succeeded(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """The collaboration probe, computed from the model request log alone, succeeded: the child's question, the
    parent's reply and the child's final answer each observed in an actual model input, and the parent's final
    answer exactly the expected text."""
    if obs.probe is None:
        raise EvidenceMissing("the scenario declares no [probe]")
    summary, seen = obs.probe.summary, obs.probe.seen
    for leg in LEGS:
        ev.cite(*seen[leg][:1])
    require(summary["requests"], "the model request log holds no request of the tree")
    missing = [leg for leg in LEGS if not summary[leg]]
    require(summary["success"] and not missing, f"the probe failed: {', '.join(missing)} false ({summary})")
    first = {leg: seen[leg][0] for leg in LEGS}
    return (f"probe success over {summary['requests']} model requests ({summary['nativeMessageOccurrences']} native "
            f"message occurrences): question seen in request {first['childQuestionObserved']}, reply in "
            f"{first['parentReplyObserved']}, child's final answer in {first['childFinalObserved']}; the parent's "
            f"final answer (request {first['finalExact']}) is exact")


JUDGEMENTS = judgements(spawned_child, child_thread, tree_message, probe_succeeded)
