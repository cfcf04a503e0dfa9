"""Judgements over what the agents' tool calls left: receipts, received records, refusals."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.model.responses import item_text

from ..observations import Observations, output_json
from .kernel import Evidence, judgements, require
from .readings import receive_outputs


def tool_receipt(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """The record carries the exact Codex thread, turn and call of the agent's tool call."""
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
    require(len(calls) == 1, f"{agent}'s rollout shows {len(calls)} {tool} calls answered with {value}")
    call, output = calls[0]
    ev.cite(call, output)
    call_id = call.payload["call_id"]
    require(receipt.get("call_id") == call_id, f"receipt call {receipt.get('call_id')} is not the rollout's {call_id}")
    require(receipt.get("turn_id") == call.running_turn_id,
            f"receipt turn {receipt.get('turn_id')} is not {call.running_turn_id}")
    if "turn" in params:
        expected = obs.turn(params["turn"])["turn_id"]
        require(call.running_turn_id == expected,
                f"the call was made in turn {call.running_turn_id}, not {params['turn']} ({expected})")
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
    """The agent's receive_messages output holds the record with its exact body."""
    record = obs.select(params["record"])
    agent = params["agent"]
    ev.cite(record["record_id"])
    found = receive_outputs(obs, agent, record["record_id"])
    require(found, f"no receive_messages output of {agent} holds {record['record_id']}")
    output, received = found[0]
    ev.cite(output)
    require(received.get("body") == record["body"], "the received body differs from the stored body")
    require(received["body"].encode("utf-8") == record["body"].encode("utf-8"), "the bodies differ byte for byte")
    require(received.get("request_id") == record.get("request_id"), "the received request_id differs")
    return (f"{agent} received {record['record_id']} with its body byte-identical "
            f"({len(record['body'].encode('utf-8'))} bytes)")


def tool_error_seen(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """The agent's model saw the tool fail with the machine-readable ``code`` for ``target``."""
    agent, tool, code = params["agent"], params["tool"], params["code"]
    seen = []
    for call, out in obs.tool_calls(agent, tool):
        data = output_json(out.text()) if out is not None else None
        error = (data or {}).get("error") or {}
        arguments = output_json(call.payload.get("arguments") or "") or {}
        if error.get("code") == code and params.get("target") in (None, arguments.get("target")):
            seen.append((call, out))
    require(seen, f"{agent}'s rollout shows no {tool} output with error {code}")
    ev.cite(*seen[0])
    if obs.view.scripted:
        call_id = seen[0][0].payload.get("call_id")
        exchanges = [exchange for exchange in obs.exchanges(agent)
                     if any(item.get("type") == "function_call_output" and item.get("call_id") == call_id
                            and code in item_text(item) for item in exchange.input_items())]
        require(exchanges, "no model request carried that error output")
        ev.cite(exchanges[0].seq)
    return f"{agent}'s model saw {tool} fail with {code}"


def nothing_admitted(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """No record was admitted (from ``sender`` when given)."""
    rows = obs.records
    if "sender" in params:
        rows = [row for row in rows if row["sender"]["agent_id"] == obs.agent_id(params["sender"])]
    ev.cite(*(row["record_id"] for row in rows))
    require(not rows, f"{len(rows)} records were admitted: {[row['record_id'] for row in rows]}")
    require(not obs.bindings, f"{len(obs.bindings)} bindings exist")
    return f"no record was admitted{' from ' + params['sender'] if 'sender' in params else ''} and nothing was bound"


JUDGEMENTS = judgements(tool_receipt, received_exactly, tool_error_seen, nothing_admitted)
