"""Judgements over what the agents' tool calls left: receipts, received records, refusals."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from harness.names import TOOL_NAMESPACES
from harness.evidence.responses import item_text

from ..observations import Observations, output_json
from .kernel import Evidence, judgements, require
from .readings import arrivals, receive_outputs


def tool_receipt(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """The record carries the exact Codex thread, turn and call of the agent's tool call.

    The call itself is judged for any agent (one call of the tool in its history, answered with this record,
    in the expected turn); binding the receipt to it needs the provider's call metadata (``call_meta``), which
    an agent whose ``tools/call`` carries no ``_meta`` (OpenCode) cannot give: skipped for it, naming that."""
    record = obs.select(params["record"])
    agent, tool = params["agent"], params["tool"]
    ev.cite(record["record_id"])
    receipt = record["tool_receipt"] or {}
    require(receipt.get("via") == "mcp", f"{record['record_id']} was not admitted through MCP: {receipt}")
    # The tool's receipt names a task by its request, anything else by the record.
    key, value = ("request_id", record["request_id"]) if record["kind"] == "task" else ("interaction_id",
                                                                                        record["record_id"])
    calls = [(call, out) for call, out in obs.tool_calls(agent, tool)
             if out is not None and (output_json(out.text()) or {}).get(key) == value]
    require(len(calls) == 1, f"{agent}'s history shows {len(calls)} {tool} calls answered with {value}")
    call, output = calls[0]
    ev.cite(call, output)
    if "turn" in params:
        expected = obs.turn(params["turn"])["turn_id"]
        require(call.running_turn_id == expected,
                f"the call was made in turn {call.running_turn_id}, not {params['turn']} ({expected})")
    obs.require(agent, "call_meta")
    call_id = call.payload["call_id"]
    require(receipt.get("call_id") == call_id, f"receipt call {receipt.get('call_id')} is not the rollout's {call_id}")
    require(receipt.get("turn_id") == call.running_turn_id,
            f"receipt turn {receipt.get('turn_id')} is not {call.running_turn_id}")
    require(receipt.get("thread_id") in obs.threads(agent),
            f"receipt thread {receipt.get('thread_id')} is none of {agent}'s threads {obs.threads(agent)}")
    item = next((line for line in obs.transcript(obs.host(agent)) if line.method == "item/completed"
                 and (line.params.get("item") or {}).get("type") == "mcpToolCall"
                 and line.params["item"].get("id") == call_id), None)
    require(item is not None, f"{agent}'s app-server reported no mcpToolCall {call_id}")
    ev.cite(item)
    require(item.params.get("turnId") == call.running_turn_id, "the app-server placed the call in another turn")
    return (f"{record['record_id']} ({record['kind']}) carries {agent}'s thread {receipt['thread_id']}, "
            f"turn {receipt['turn_id']} and call {call_id}, as the rollout and the app-server report them")


def received_exactly(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """The record reached the agent's model with its exact body: in a receive_messages output, or as its
    envelope delivered into the thread (a model may answer from that without calling receive)."""
    record = obs.select(params["record"])
    agent = params["agent"]
    ev.cite(record["record_id"])
    for output, received in receive_outputs(obs, agent, record["record_id"]):
        ev.cite(output)
        require(received.get("body") == record["body"], "the received body differs from the stored body")
        require(received["body"].encode("utf-8") == record["body"].encode("utf-8"), "the bodies differ byte for byte")
        require(received.get("request_id") == record.get("request_id"), "the received request_id differs")
    found = arrivals(obs, agent, record)
    require(found, f"{record['record_id']} never reached {agent}'s model: no receive_messages output holds it and "
                   f"no envelope with its exact body was delivered into its thread")
    line, how = found[0]
    ev.cite(line)
    return (f"{record['record_id']} reached {agent}'s model ({how}) with its body byte-identical "
            f"({len(record['body'].encode('utf-8'))} bytes)")


def acted_before_claiming(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """In the prompted turn the agent called one of the core's tools before its final answer: a final answer
    claiming the job is done with no call behind it is the fault this names."""
    agent, label = params["agent"], params["turn"]
    turn_id = obs.turn(label)["turn_id"]
    lines = [line for line in obs.rollout(agent) if line.running_turn_id == turn_id]
    finals = [line for line in obs.final_messages(agent) if line in lines]
    require(finals, f"{agent}'s turn {label} has no final answer")
    calls = [line for line in lines if line.record_type == "response_item" and line.payload_type == "function_call"
             and line.payload.get("namespace") in TOOL_NAMESPACES and lines.index(line) < lines.index(finals[-1])]
    ev.cite(*calls[:3], finals[-1])
    require(calls, f"{agent} claimed a result in turn {label} without calling any tool: its final answer "
                   f"{finals[-1].text()[:120]!r} rests on no call")
    return f"{agent} made {len(calls)} tool call(s) in turn {label} before its final answer"


def tasks_addressed(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """Every task the agent's model admitted in the turn went to the agent it was asked to task (``target``),
    and there was one."""
    agent, target, label = params["agent"], params["target"], params["turn"]
    turn_id = obs.turn(label)["turn_id"]
    admitted, wrong = [], []
    for call, out in obs.tool_calls(agent, "followup_task"):
        if call.running_turn_id != turn_id or out is None:
            continue
        request_id = (output_json(out.text()) or {}).get("request_id")
        if request_id is None:
            continue  # refused: no task
        request = obs.core.request(request_id) or {}
        recipient = obs.agent_name(request.get("recipient_id")) if request else None
        (admitted if recipient == target else wrong).append((call, out, recipient))
        ev.cite(call, out)
    require(not wrong, f"{agent} sent its task to the wrong agent: " + ", ".join(
        f"{(output_json(out.text()) or {}).get('request_id')} went to {recipient}, not {target}"
        for _call, out, recipient in wrong))
    require(admitted, f"{agent} tasked no agent in turn {label}, though asked to task {target}")
    return f"{agent}'s {len(admitted)} task(s) in turn {label} all went to {target}"


def replied_once_per_task(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """No agent called ``reply`` twice for one request (the core refuses the second; a model that tries has
    not understood the contract)."""
    per_request: dict[tuple[str, str], list[Any]] = {}
    for row in obs.agents:
        name = row["name"]
        try:
            calls = list(obs.tool_calls(name, "reply"))
        except Exception:  # an agent without a rollout (a peer) made no calls
            continue
        for call, _out in calls:
            request_id = (output_json(call.payload.get("arguments") or "") or {}).get("request_id")
            per_request.setdefault((name, str(request_id)), []).append(call)
    twice = {key: calls for key, calls in per_request.items() if len(calls) > 1}
    for calls in twice.values():
        ev.cite(*calls)
    require(not twice, "; ".join(f"{name} replied {len(calls)} times to {request_id}"
                                 for (name, request_id), calls in twice.items()))
    return f"{len(per_request)} reply call(s), none repeated for a request"


def tool_error_seen(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """The agent's model saw the tool fail with the machine-readable ``code`` for ``target``: in the error's
    structured content (what Codex shows a model), or its text ``code: message`` (what a client that shows
    only the content text, such as OpenCode, shows)."""
    agent, tool, code = params["agent"], params["tool"], params["code"]
    seen = []
    for call, out in obs.tool_calls(agent, tool):
        arguments = output_json(call.payload.get("arguments") or "") or {}
        if out is not None and error_code(out.text()) == code and params.get("target") in (None, arguments.get("target")):
            seen.append((call, out))
    require(seen, f"{agent}'s history shows no {tool} output with error {code}")
    ev.cite(*seen[0])
    obs.require(agent, "model_log")
    call, out = seen[0]
    call_id = call.payload.get("call_id")
    # An ACP agent's call id is its own; the model saw the same output text under the id it gave the call.
    exchanges = [exchange for exchange in obs.exchanges(agent)
                 if any(item.get("type") == "function_call_output" and code in item_text(item)
                        and (item.get("call_id") == call_id or (obs.is_acp(agent) and item_text(item) == out.text()))
                        for item in exchange.input_items())]
    require(exchanges, "no model request carried that error output")
    ev.cite(exchanges[0].seq)
    return f"{agent}'s model saw {tool} fail with {code}"


def error_code(text: str) -> str | None:
    """The error code a tool output shows: ``error.code`` of its JSON, or the ``code`` of a ``code: message``
    text (the core's content text of an error)."""
    data = output_json(text) or {}
    found = (data.get("error") or {}).get("code") if isinstance(data.get("error"), Mapping) else None
    if found:
        return str(found)
    match = _ERROR_TEXT.match(text)
    return match.group(1) if match else None


_ERROR_TEXT = re.compile(r"([a-z_]+): ")


def nothing_admitted(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """No record was admitted (from ``sender`` when given)."""
    rows = obs.records
    if "sender" in params:
        rows = [row for row in rows if row["sender"]["agent_id"] == obs.agent_id(params["sender"])]
    ev.cite(*(row["record_id"] for row in rows))
    require(not rows, f"{len(rows)} records were admitted: {[row['record_id'] for row in rows]}")
    require(not obs.bindings, f"{len(obs.bindings)} bindings exist")
    return f"no record was admitted{' from ' + params['sender'] if 'sender' in params else ''} and nothing was bound"


JUDGEMENTS = judgements(tool_receipt, received_exactly, tool_error_seen, nothing_admitted, acted_before_claiming,
                        tasks_addressed, replied_once_per_task)
