"""Judgements over a task's one reply: correlation, consumption before the final answer, the binding's end,
an earlier result recalled from history."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.evidence.responses import is_incoming, item_text
from harness.evidence.stages import BINDING, Stage

from ..observations import Observations, output_json
from .kernel import Evidence, assess_content, judgements, require
from .readings import arrivals, carried_by, reply_of, turn_of_request, why_not_carried


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
    # Any valid reply status and either source (an explicit reply, the turn's outcome) is delivery; a
    # scenario that is about one of them names it (a string or a list).
    statuses = _allowed(params.get("status"), ("done", "blocked", "failed"))
    require(reply["status"] in statuses, f"reply status {reply['status']}, expected {' or '.join(statuses)}")
    sources = _allowed(params.get("source"), ("explicit", "turn_outcome"))
    require(reply["reply_source"] in sources, f"reply source {reply['reply_source']}, expected {' or '.join(sources)}")
    source = reply["reply_source"]
    if source == "peerwire":
        require(reply["sender"]["agent_id"] is None, "a peerwire outcome is attributed to an agent")
    else:
        require(reply["sender"]["agent_id"] == task["recipient"]["agent_id"],
                "the reply is not from the task's recipient")
    if "code" in params:
        require(reply.get("code") == params["code"], f"reply code {reply.get('code')}, expected {params['code']}")
    requester = obs.agent_name(task["sender"]["agent_id"])
    if params.get("received", True) is False and not obs.kind(requester).can("inject"):
        # Delivered the way its kind allows: it waits in the requester's mailbox for a receive or a next prompt.
        visible = obs.evidence(reply["record_id"], Stage.PROVIDER_VISIBLE)
        require(len(visible) <= 1, f"the reply was made visible to {requester} {len(visible)} times")
        require(reply["state"] in ("published", "provider_visible"), f"the reply is {reply['state']}")
        where = ("carried by its next prompt" if visible else "waiting in its mailbox for its next receive or "
                 f"prompt ({requester} is {obs.kind(requester).name}: no inject)")
        return (f"{task['request_id']} has one reply {reply['record_id']} ({reply['status']}, "
                f"{reply['reply_source']}{', ' + reply.get('code') if reply.get('code') else ''}) for {requester}, "
                f"{where}")
    if params.get("received", True) is False:
        # The requester's tools, not its model, sent this task: it is delivered, not read.
        visible = obs.evidence(reply["record_id"], Stage.PROVIDER_VISIBLE)
        require(len(visible) == 1, f"the reply was made visible to {requester} {len(visible)} times, not once")
        return (f"{task['request_id']} has one reply {reply['record_id']} ({reply['status']}, "
                f"{reply['reply_source']}{', ' + reply.get('code') if reply.get('code') else ''}) "
                f"delivered to {requester}")
    found = arrivals(obs, requester, reply)
    if not found:
        offered = [line.text() for line in obs.rollout(requester)
                   if line.record_type == "response_item" and is_incoming(line.payload)]
        require(False, f"{reply['record_id']} never reached {requester}'s model (no receive_messages output and no "
                       f"injected envelope of it; {why_not_carried(obs, offered, reply)})")
    line, how = found[0]
    ev.cite(line)
    return (f"{task['request_id']} has one reply {reply['record_id']} ({reply['status']}, "
            f"{reply['reply_source']}{', ' + reply.get('code') if reply.get('code') else ''}) "
            f"that reached {requester} ({how}) with the same request_id and exact body")


def _allowed(value: Any, default: tuple[str, ...]) -> tuple[str, ...]:
    if value is None:
        return default
    return (value,) if isinstance(value, str) else tuple(value)


def consumed_before_final(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """Within one turn the agent assigned the task, waited, received the correlated reply, then answered from it."""
    task = obs.select(params["record"])
    agent = params["agent"]
    turn_id = obs.turn(params["turn"])["turn_id"]
    reply = reply_of(obs, task)
    ev.cite(task["record_id"], reply["record_id"])
    lines = obs.rollout(agent)
    in_turn = [line for line in lines if line.running_turn_id == turn_id]
    assigned = [out for call, out in obs.tool_calls(agent, "followup_task") if out in in_turn
                and (output_json(out.text()) or {}).get("request_id") == task["request_id"]]
    require(assigned, f"{agent} did not assign {task['request_id']} in turn {params['turn']}")
    finals = [line for line in obs.final_messages(agent) if line in in_turn]
    require(finals, f"{agent}'s turn {params['turn']} has no final answer")
    final = finals[-1]
    # Delivery: the reply reached the model (received, or injected into its context: both valid; so is any
    # way of waiting) after the task was assigned and before the final answer.
    reached = [(line, how) for line, how in arrivals(obs, agent, reply)
               if lines.index(assigned[0]) < lines.index(line) < lines.index(final)]
    require(reached, f"{agent} gave its final answer before the reply {reply['record_id']} reached its model "
                     f"(turn {params['turn']}: assigned at {assigned[0].at}, final answer at {final.at})")
    line, how = reached[0]
    ev.cite(assigned[0], line, final)
    obs.require(agent, "model_log")
    producer = obs.producer(agent, final)
    require(producer is not None, "no model request produced the final answer")
    require(any(_holds(obs, item, reply) for item in producer.input_items()),
            f"model request {producer.seq} that produced the final answer did not contain the reply")
    ev.cite(producer.seq)
    grade = ev.assess("the final answer states the fact the reply carried", reply["body"], final.text())
    return (f"in turn {params['turn']} {agent} assigned {task['request_id']}, the reply {reply['record_id']} "
            f"reached its model ({how}) and only then did it answer (content: {grade})")


def _holds(obs: Observations, item: Mapping[str, Any], reply: Mapping[str, Any]) -> bool:
    """Whether a model input item carries the reply: a tool output holding its record, or its envelope."""
    if item.get("type") == "function_call_output":
        data = output_json(item_text(item)) or {}
        return any(r.get("record_id") == reply["record_id"] for r in data.get("records") or [])
    return item.get("type") == "message" and item.get("role") != "assistant" and carried_by(obs, item, reply)


def binding_state(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """The task's binding ended in ``state`` (e.g. suppressed by an explicit reply)."""
    task = obs.select(params["record"])
    ev.cite(task["record_id"])
    bindings = obs.bindings_of(task["request_id"])
    require(len(bindings) == 1, f"{task['request_id']} has {len(bindings)} bindings, not one")
    state = bindings[0]["state"]
    wanted = _allowed(params["state"], ())
    require(state in wanted, f"binding {bindings[0]['binding_id']} is {state}, not {' or '.join(wanted)}")
    # The evidence of reaching that state: a row of a stage whose event leads into it. A binding made after the
    # recipient's explicit reply is suppressed from birth: its acceptance after the reply says so.
    stages = sorted(BINDING.stages_into(state) | ({Stage.PROVIDER_ACCEPTED_AFTER_REPLY} if state == "suppressed"
                                                   else set()))
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
    # The recall is the scenario's point: in the model's own words, but the fact must be there.
    require(assess_content(fact, later_reply["body"]) != "missing", "the later answer does not recall the result")
    turn = turn_of_request(obs, later)
    obs.require(agent, "model_log")
    exchanges = obs.turn_exchanges(agent, turn)
    require(exchanges, f"no model request of {agent} in turn {turn}")
    items = exchanges[0].input_items()
    ev.cite(exchanges[0].seq)
    position = next((i for i, item in enumerate(items) if item.get("type") == "message"
                     and carried_by(obs, item, later)), None)
    require(position is not None, "the later task's envelope is not in the model input")
    remembered = [item for item in items[:position] if item.get("role") == "assistant" and fact in item_text(item)]
    require(remembered, "the earlier result is not in the agent's own history")
    given = [item for item in items[position:] if fact in item_text(item)]
    require(not given, "the result was given again in the later turn's input")
    return (f"{agent}'s input for {later['request_id']} held {fact!r} only in its own earlier answer; "
            f"its reply recalls it")


JUDGEMENTS = judgements(reply_correlated, consumed_before_final, binding_state, recalls_from_history)
