"""Judgements over a task's one reply: correlation, consumption before the final answer, the binding's end,
an earlier result recalled from history."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.model.responses import item_text
from peerwire.lifecycle import BINDING, Stage

from ..observations import Observations, output_json
from .kernel import Evidence, judgements, require
from .readings import carries, receive_outputs, reply_of, turn_of_request


def reply_correlated(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """The task's one reply has the expected status, source and sender, and the requester received it.

    ``received = false``: the requester's model never asked (a tool step sent
    the task); the reply must then have been delivered into its thread once.
    """
    task = obs.select(params["record"])
    ev.cite(task["record_id"])
    reply = reply_of(obs, task)
    ev.cite(reply["record_id"])
    require(reply["request_id"] == task["request_id"], "the reply names another request")
    require(reply["recipient"]["agent_id"] == task["sender"]["agent_id"],
            "the reply went to someone other than the requester")
    require(reply["status"] == params.get("status", "done"),
            f"reply status {reply['status']}, expected {params.get('status', 'done')}")
    source = params.get("source")
    if source is not None:
        require(reply["reply_source"] == source, f"reply source {reply['reply_source']}, expected {source}")
    if source == "peerwire":
        require(reply["sender"]["agent_id"] is None, "a peerwire outcome is attributed to an agent")
    else:
        require(reply["sender"]["agent_id"] == task["recipient"]["agent_id"],
                "the reply is not from the task's recipient")
    if "code" in params:
        require(reply.get("code") == params["code"], f"reply code {reply.get('code')}, expected {params['code']}")
    requester = obs.agent_name(task["sender"]["agent_id"])
    if params.get("received", True) is False:
        # The requester's tools, not its model, sent this task: it is delivered, not read.
        visible = obs.evidence(reply["record_id"], Stage.PROVIDER_VISIBLE)
        require(len(visible) == 1, f"the reply was made visible to {requester} {len(visible)} times, not once")
        return (f"{task['request_id']} has one reply {reply['record_id']} ({reply['status']}, "
                f"{reply['reply_source']}{', ' + reply.get('code') if reply.get('code') else ''}) "
                f"delivered to {requester}")
    found = receive_outputs(obs, requester, reply["record_id"])
    require(found, f"{requester} never received {reply['record_id']} through receive_messages")
    output, received = found[0]
    ev.cite(output)
    require(received.get("request_id") == task["request_id"] and received.get("body") == reply["body"],
            "what the requester received differs from the reply record")
    return (f"{task['request_id']} has one reply {reply['record_id']} ({reply['status']}, "
            f"{reply['reply_source']}{', ' + reply.get('code') if reply.get('code') else ''}) "
            f"that {requester} received with the same request_id")


def consumed_before_final(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """Within one turn the agent assigned the task, waited, received the correlated reply, then answered from it."""
    task = obs.select(params["record"])
    agent = params["agent"]
    turn_id = obs.turn(params["turn"])["turn_id"]
    reply = reply_of(obs, task)
    ev.cite(task["record_id"], reply["record_id"])
    lines = [line for line in obs.rollout(agent) if line.running_turn_id == turn_id]
    assigned = [out for call, out in obs.tool_calls(agent, "followup_task") if out in lines
                and (output_json(out.text()) or {}).get("request_id") == task["request_id"]]
    require(assigned, f"{agent} did not assign {task['request_id']} in turn {params['turn']}")
    waits = [out for call, out in obs.tool_calls(agent, "wait_agent") if out in lines]
    received = [out for out, _ in receive_outputs(obs, agent, reply["record_id"]) if out in lines]
    require(received, f"{agent} did not receive the reply {reply['record_id']} in turn {params['turn']}")
    finals = [line for line in obs.final_messages(agent) if line in lines]
    require(finals, f"{agent}'s turn {params['turn']} has no final answer")
    final = finals[-1]
    ev.cite(assigned[0], *(waits[:1]), received[0], final)
    order = [lines.index(assigned[0]), lines.index(received[0]), lines.index(final)]
    require(order == sorted(order), "the rollout does not show assign < receive < final answer")
    require(any(lines.index(assigned[0]) < lines.index(w) < lines.index(received[0]) for w in waits),
            f"{agent} did not wait (wait_agent) between assigning and receiving")
    final_text = final.text()
    require(reply["body"] in final_text, "the final answer is not built from the reply's body")
    if obs.view.scripted:
        producer = next((exchange for exchange in obs.exchanges(agent)
                         if any(item.get("id") == final.payload.get("id") for item in exchange.items)), None)
        require(producer is not None, "no model request produced the final answer")
        call_id = received[0].payload.get("call_id")
        require(any(item.get("type") == "function_call_output" and item.get("call_id") == call_id
                    for item in producer.input_items()),
                f"model request {producer.seq} that produced the final answer did not contain the reply")
        ev.cite(producer.seq)
    return (f"in turn {params['turn']} {agent} assigned {task['request_id']}, waited, received reply "
            f"{reply['record_id']} and only then gave a final answer quoting it")


def binding_state(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """The task's binding ended in ``state`` (e.g. suppressed by an explicit reply)."""
    task = obs.select(params["record"])
    ev.cite(task["record_id"])
    bindings = obs.bindings_of(task["request_id"])
    require(len(bindings) == 1, f"{task['request_id']} has {len(bindings)} bindings, not one")
    state = bindings[0]["state"]
    require(state == params["state"], f"binding {bindings[0]['binding_id']} is {state}, not {params['state']}")
    # The evidence of reaching that state: a row of a stage whose event leads into it.
    stages = sorted(BINDING.stages_into(state))
    rows = [row for stage in stages for row in obs.evidence(task["record_id"], stage)]
    stage = " or ".join(stages)
    require(rows, f"no {stage} evidence row for {task['request_id']}")
    return f"binding {bindings[0]['binding_id']} of {task['request_id']} is {state} ({stage} evidence recorded)"


def recalls_from_history(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """The agent answered a later task with an earlier result found only in its own history."""
    agent, fact = params["agent"], params["fact"]
    earlier, later = obs.select(params["earlier"]), obs.select(params["record"])
    earlier_reply, later_reply = reply_of(obs, earlier), reply_of(obs, later)
    ev.cite(earlier["record_id"], earlier_reply["record_id"], later["record_id"],
            later_reply["record_id"])
    require(fact in earlier_reply["body"], f"the earlier result does not contain {fact!r}")
    require(fact not in later["body"], "the later task gives the result again")
    require(fact in later_reply["body"], "the later answer does not recall the result")
    if obs.view.scripted:
        turn = turn_of_request(obs, later)
        exchanges = [exchange for exchange in obs.exchanges(agent) if exchange.turn_id == turn]
        require(exchanges, f"no model request of {agent} in turn {turn}")
        items = exchanges[0].input_items()
        ev.cite(exchanges[0].seq)
        position = next((i for i, item in enumerate(items) if item.get("type") == "message"
                         and carries(obs, item_text(item), later)), None)
        require(position is not None, "the later task's envelope is not in the model input")
        remembered = [item for item in items[:position] if item.get("role") == "assistant" and fact in item_text(item)]
        require(remembered, "the earlier result is not in the agent's own history")
        given = [item for item in items[position:] if fact in item_text(item)]
        require(not given, "the result was given again in the later turn's input")
    return (f"{agent}'s input for {later['request_id']} held {fact!r} only in its own earlier answer; "
            f"its reply recalls it")


JUDGEMENTS = judgements(reply_correlated, consumed_before_final, binding_state, recalls_from_history)
