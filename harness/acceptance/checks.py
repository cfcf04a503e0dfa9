"""The judgements a scenario's ``[[checks]]`` name, over a run's observations.

Each judgement reads the core's records and evidence rows, the app-server
transcripts, the rollouts and the model request log (:mod:`.observations`),
and cites what it relied on. None of them passes on a final string alone:
where a final answer matters, the judgement first ties it to the records and
the order of events that produced it.

A judgement returns its summary when it passes and raises :class:`Failed`
otherwise; evidence it collected before failing is kept in the verdict.
Something the run did not record at all (a label, a record) fails the check
too, saying what is missing.

Every scenario also gets the :data:`UNIVERSAL` checks: nothing is delivered
twice, every turn is accounted for, and (with the scripted model) every
model request matched a rule. The judgements over a collaboration tree live
in :mod:`.collab_checks` and register here too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from peerwire import envelope
from peerwire.lifecycle import BINDING, Stage

from harness.evidence.rollouts import RolloutLine

from .observations import EvidenceMissing, Observations, TranscriptLine, item_text, output_json
from .scenario import CheckSpec


class Failed(AssertionError):
    """A check's verdict is fail; the message is its summary."""


def require(condition: Any, summary: str) -> None:
    if not condition:
        raise Failed(summary)


@dataclass
class Evidence:
    """What a verdict rests on, by source (the report links each entry)."""

    records: list[str] = field(default_factory=list)
    rollout: list[str] = field(default_factory=list)
    model_requests: list[int] = field(default_factory=list)
    appserver: list[str] = field(default_factory=list)

    def cite(self, *items: Any) -> None:
        for item in items:
            if item is None:
                continue
            if isinstance(item, RolloutLine):
                _add(self.rollout, str(item.at))
            elif isinstance(item, TranscriptLine):
                _add(self.appserver, item.ref)
            elif isinstance(item, int):
                _add(self.model_requests, item)
            elif isinstance(item, str):
                _add(self.records, item)
            else:
                raise TypeError(f"cannot cite {item!r}")

    def as_dict(self) -> dict[str, list[Any]]:
        return {"records": self.records, "rollout": self.rollout, "model_requests": self.model_requests,
                "appserver": self.appserver}


def _add(bucket: list[Any], value: Any) -> None:
    if value not in bucket:
        bucket.append(value)


@dataclass(frozen=True)
class Verdict:
    id: str
    passed: bool
    summary: str
    evidence: Evidence

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "verdict": "pass" if self.passed else "fail", "summary": self.summary,
                "evidence": self.evidence.as_dict()}


Judgement = Callable[[Observations, Mapping[str, Any], Evidence], str]
JUDGEMENTS: dict[str, Judgement] = {}


def judgement(function: Judgement) -> Judgement:
    JUDGEMENTS[function.__name__] = function
    return function


def judge(spec: CheckSpec, observations: Observations) -> Verdict:
    """Apply one declared check; never raises for a failing or unjudgeable run."""
    evidence = Evidence()
    try:
        summary = JUDGEMENTS[spec.check](observations, spec.params, evidence)
        return Verdict(spec.id, True, summary, evidence)
    except Failed as failure:
        return Verdict(spec.id, False, str(failure), evidence)
    except EvidenceMissing as missing:
        return Verdict(spec.id, False, f"not recorded: {missing}", evidence)


UNIVERSAL = (
    CheckSpec("delivered-at-most-once", "delivered_at_most_once", {}),
    CheckSpec("turns-accounted-for", "turns_accounted_for", {}),
)
SCRIPTED_ONLY = (CheckSpec("model-requests-matched-rules", "model_requests_matched_rules", {}),)


# -- shared readings -------------------------------------------------------------------


def _envelope_of(text: str) -> dict[str, Any] | None:
    try:
        return envelope.parse(text)
    except ValueError:
        return None


def _carries(obs: Observations, text: str, record: Mapping[str, Any]) -> bool:
    """Whether ``text`` is the envelope of ``record``: its type, request and exact body.

    Between agents of a collaboration tree the envelope names no request but
    the recipient's and the sender's paths (:func:`peerwire.collab.render`).
    """
    parsed = _envelope_of(text)
    if parsed is None or parsed["payload"] != record["body"]:
        return False
    headers = parsed["headers"]
    if headers.get("Message Type") != envelope.MESSAGE_TYPES[record["kind"]]:
        return False
    recipient_path = obs.paths.get(record["recipient"]["agent_id"])
    if recipient_path is not None:
        sender = obs.paths.get(record["sender"]["agent_id"]) or obs.agent_name(record["sender"]["agent_id"])
        return headers.get("Task name") == recipient_path and headers.get("Sender") == sender
    return headers.get("Request") == record.get("request_id") if record.get("request_id") else True


def inject_lines(obs: Observations, agent: str, record: Mapping[str, Any]) -> list[TranscriptLine]:
    """The thread/inject_items requests in ``agent``'s transcript that carry the envelope of ``record``."""
    found = []
    for line in obs.transcript(agent):
        if line.dir == "sent" and line.method == "thread/inject_items":
            texts = [item_text(item) for item in line.params.get("items") or []]
            if any(_carries(obs, text, record) for text in texts):
                found.append(line)
    return found


def _receive_outputs(obs: Observations, agent: str, record_id: str) -> list[tuple[RolloutLine, dict[str, Any]]]:
    """(output line, the record as received) for each receive_messages output holding ``record_id``."""
    found = []
    for _call, output in obs.tool_calls(agent, "receive_messages"):
        data = output_json(output.text()) if output is not None else None
        for received in (data or {}).get("records") or []:
            if received.get("record_id") == record_id:
                found.append((output, received))
    return found


def _reply_of(obs: Observations, task: Mapping[str, Any]) -> dict[str, Any]:
    request = obs.core.request(task["request_id"])
    require(request is not None, f"no request row for {task['request_id']}")
    require(request["reply_record_id"], f"request {task['request_id']} has no reply")
    reply = obs.record(request["reply_record_id"])
    return {**reply, "reply_source": request["reply_source"]}


def _turn_of_request(obs: Observations, record: Mapping[str, Any]) -> str:
    bindings = obs.bindings_of(record["request_id"])
    require(len(bindings) == 1, f"task {record['request_id']} has {len(bindings)} bindings, not one")
    return bindings[0]["turn_id"]


# -- judgements --------------------------------------------------------------------------


@judgement
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


@judgement
def injected_without_turn(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """The record reached its recipient by thread/inject_items, and no turn started from it.

    ``recipient_was``: ``idle`` (default) — no turn was running, so the envelope
    waits in the thread's history for the next turn someone starts; ``active`` —
    it landed inside the recipient's running turn, which went on to complete,
    and no other turn started.
    """
    record = obs.select(params["record"])
    recipient = obs.agent_name(record["recipient"]["agent_id"])
    host = obs.host(recipient)
    idle = params.get("recipient_was", "idle") == "idle"
    ev.cite(record["record_id"])
    visible = obs.evidence(record["record_id"], Stage.PROVIDER_VISIBLE)
    require(len(visible) == 1, f"{len(visible)} provider_visible evidence rows, not one")
    detail = visible[0]["detail"]
    require(detail.get("via") == "thread/inject_items", f"made visible via {detail.get('via')}")
    running = detail.get("active_turn")
    if idle:
        require(running is None, f"{recipient} was in turn {running}, not idle")
    else:
        require(running is not None, f"{recipient} was idle, not in a running turn")
    injects = inject_lines(obs, host, record)
    require(len(injects) == 1, f"{host}'s transcript has {len(injects)} inject_items of it, not one")
    inject = injects[0]
    thread = inject.params.get("threadId")
    require(thread in obs.threads(recipient), f"it was injected into thread {thread}, not {recipient}'s")
    answer = obs.response_to(host, inject)
    ev.cite(inject, answer)
    require(answer is not None and "result" in answer.message, "thread/inject_items was not acknowledged")
    transcript = obs.transcript(host)
    after = [line for line in transcript[transcript.index(inject) + 1:]
             if line.generation == inject.generation and line.params.get("threadId") == thread]
    next_start = next((line for line in after if line.dir == "sent" and line.method == "turn/start"), None)
    window = after[:after.index(next_start)] if next_start else after
    started = [line for line in window if line.method == "turn/started"]
    ev.cite(*started)
    require(not started, f"a turn started on {recipient} after the inject without anyone starting it")
    if not idle:
        completed = next((line for line in window if line.method == "turn/completed"
                          and (line.params.get("turn") or {}).get("id") == running), None)
        require(completed is not None, f"{recipient}'s running turn {running} did not complete after the inject")
        ev.cite(completed)
    next_turn = None
    if next_start is not None:
        response = obs.response_to(host, next_start)
        next_turn = ((response.message.get("result") or {}).get("turn") or {}).get("id") if response else None
    text = item_text(inject.params["items"][0])
    lines = obs.rollout(recipient)
    injected = [line for line in lines if line.record_type == "response_item" and line.payload_type == "message"
                and line.text() == text]
    require(len(injected) == 1, f"{recipient}'s rollout holds the injected envelope {len(injected)} times")
    ev.cite(injected[0])
    require(injected[0].running_turn_id == running,
            f"the rollout placed the injected item in turn {injected[0].running_turn_id}, not {running}")
    later_starts = [line for line in lines[lines.index(injected[0]) + 1:]
                    if line.record_type == "event_msg" and line.payload_type == "task_started"]
    if later_starts:
        ev.cite(later_starts[0])
        require(later_starts[0].payload.get("turn_id") == next_turn,
                f"the next turn in the rollout ({later_starts[0].payload.get('turn_id')}) is not the one "
                f"the next turn/start opened ({next_turn})")
    if not idle:
        return (f"{record['record_id']} was injected into {recipient}'s running turn {running} once and "
                f"acknowledged; that turn went on to complete and no turn started from it")
    return (f"{record['record_id']} was injected into idle {recipient} once and acknowledged; no turn "
            f"started until the next turn/start{f' ({next_turn})' if next_turn else ''}")


@judgement
def received_exactly(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """The agent's receive_messages output holds the record with its exact body."""
    record = obs.select(params["record"])
    agent = params["agent"]
    ev.cite(record["record_id"])
    found = _receive_outputs(obs, agent, record["record_id"])
    require(found, f"no receive_messages output of {agent} holds {record['record_id']}")
    output, received = found[0]
    ev.cite(output)
    require(received.get("body") == record["body"], "the received body differs from the stored body")
    require(received["body"].encode("utf-8") == record["body"].encode("utf-8"), "the bodies differ byte for byte")
    require(received.get("request_id") == record.get("request_id"), "the received request_id differs")
    return (f"{agent} received {record['record_id']} with its body byte-identical "
            f"({len(record['body'].encode('utf-8'))} bytes)")


@judgement
def in_model_input(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """The record's envelope is in the agent's model input (in turn ``turn`` when given)."""
    record = obs.select(params["record"])
    agent = params["agent"]
    ev.cite(record["record_id"])
    turn = obs.turn(params["turn"])["turn_id"] if "turn" in params else None
    if obs.view.scripted:
        hits = [exchange for exchange in obs.exchanges(agent) if turn in (None, exchange.turn_id)
                and any(item.get("role") != "assistant" and _carries(obs, item_text(item), record)
                        for item in exchange.input_items() if item.get("type") == "message")]
        require(hits, f"no model request of {agent}{' in ' + params['turn'] if turn else ''} carries the envelope")
        ev.cite(*(exchange.seq for exchange in hits[:3]))
        where = f"model requests {[exchange.seq for exchange in hits]}"
    else:
        lines = [line for line in obs.rollout(agent)
                 if line.record_type == "response_item" and line.payload_type == "message"
                 and _carries(obs, line.text(), record)]
        require(lines, f"{agent}'s rollout holds no envelope of {record['record_id']}")
        ev.cite(*lines)
        where = "the rollout"
    return f"{agent}'s model saw the envelope of {record['record_id']} with the exact body in {where}"


@judgement
def task_bound(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """The task was bound once to the exact turn the adapter opened (or steered) for it."""
    task = obs.select(params["record"])
    request_id = task["request_id"]
    ev.cite(task["record_id"])
    recipient = obs.agent_name(task["recipient"]["agent_id"])
    bindings = obs.bindings_of(request_id)
    require(len(bindings) == 1, f"{request_id} has {len(bindings)} bindings, not one")
    binding = bindings[0]
    method = params.get("via", "turn/start")
    accepted = obs.evidence(task["record_id"], Stage.PROVIDER_ACCEPTED)
    require(len(accepted) == 1 and accepted[0]["detail"].get("via") == method,
            f"provider_accepted evidence {[row['detail'] for row in accepted]} does not say {method}")
    host = obs.host(recipient)
    sent = [line for line in obs.transcript(host) if line.dir == "sent" and line.method == method
            and line.params.get("clientUserMessageId") == request_id]
    require(len(sent) == 1, f"{host}'s transcript has {len(sent)} {method} for {request_id}, not one")
    answer = obs.response_to(host, sent[0])
    ev.cite(sent[0], answer)
    result = (answer.message.get("result") or {}) if answer else {}
    turn_id = (result.get("turn") or {}).get("id") or result.get("turnId")
    require(turn_id == binding["turn_id"], f"{method} opened turn {turn_id}, the binding says {binding['turn_id']}")
    require(sent[0].params.get("threadId") == binding["thread_id"], "the binding names another thread")
    require(sent[0].generation == binding["generation"], "the binding names another owner generation")
    require(any(_carries(obs, item.get("text", ""), task) for item in sent[0].params.get("input") or []),
            f"the {method} input is not the task's envelope")
    if "state" in params:
        require(binding["state"] == params["state"], f"binding state is {binding['state']}, not {params['state']}")
    return (f"{request_id} bound once ({binding['binding_id']}, {binding['state']}) to {recipient}'s turn "
            f"{turn_id} of generation {binding['generation']}, opened by {method} with its envelope")


@judgement
def reply_correlated(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """The task's one reply has the expected status, source and sender, and the requester received it.

    ``received = false``: the requester's model never asked (a tool step sent
    the task); the reply must then have been delivered into its thread once.
    """
    task = obs.select(params["record"])
    ev.cite(task["record_id"])
    reply = _reply_of(obs, task)
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
    found = _receive_outputs(obs, requester, reply["record_id"])
    require(found, f"{requester} never received {reply['record_id']} through receive_messages")
    output, received = found[0]
    ev.cite(output)
    require(received.get("request_id") == task["request_id"] and received.get("body") == reply["body"],
            "what the requester received differs from the reply record")
    return (f"{task['request_id']} has one reply {reply['record_id']} ({reply['status']}, "
            f"{reply['reply_source']}{', ' + reply.get('code') if reply.get('code') else ''}) "
            f"that {requester} received with the same request_id")


@judgement
def consumed_before_final(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """Within one turn the agent assigned the task, waited, received the correlated reply, then answered from it."""
    task = obs.select(params["record"])
    agent = params["agent"]
    turn_id = obs.turn(params["turn"])["turn_id"]
    reply = _reply_of(obs, task)
    ev.cite(task["record_id"], reply["record_id"])
    lines = [line for line in obs.rollout(agent) if line.running_turn_id == turn_id]
    assigned = [out for call, out in obs.tool_calls(agent, "followup_task") if out in lines
                and (output_json(out.text()) or {}).get("request_id") == task["request_id"]]
    require(assigned, f"{agent} did not assign {task['request_id']} in turn {params['turn']}")
    waits = [out for call, out in obs.tool_calls(agent, "wait_agent") if out in lines]
    received = [out for out, _ in _receive_outputs(obs, agent, reply["record_id"]) if out in lines]
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


@judgement
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


@judgement
def interrupted_exactly(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """Exactly the observed turn ended interrupted; every other turn of every agent completed."""
    agent = params["agent"]
    if "turn" in params:
        expected = obs.turn(params["turn"])["turn_id"]
    else:
        task = obs.select(params["record"])
        ev.cite(task["record_id"])
        expected = _turn_of_request(obs, task)
    requests = [line for line in obs.transcript(agent) if line.dir == "sent" and line.method == "turn/interrupt"]
    ev.cite(*requests)
    require([line.params.get("turnId") for line in requests] == [expected],
            f"turn/interrupt was sent for {[line.params.get('turnId') for line in requests]}, not once for {expected}")
    others = []
    for name in obs.view.agents:
        for line in obs.transcript(name):
            if line.method != "turn/completed":
                continue
            turn = line.params.get("turn") or {}
            if name == agent and turn.get("id") == expected:
                ev.cite(line)
                require(turn.get("status") == "interrupted", f"turn {expected} ended {turn.get('status')}")
            elif turn.get("status") != "completed":
                others.append(f"{name}:{turn.get('id')}={turn.get('status')}")
                ev.cite(line)
    require(not others, f"other turns did not complete: {others}")
    aborted = [line for line in obs.rollout(agent)
               if line.record_type == "event_msg" and line.payload_type == "turn_aborted"]
    ev.cite(*aborted)
    require([line.payload.get("turn_id") for line in aborted] == [expected],
            f"the rollout records aborted turns {[line.payload.get('turn_id') for line in aborted]}")
    results = [output_json(out.text()) or {} for name in obs.view.agents
               for _call, out in obs.tool_calls(name, "interrupt_agent") if out is not None]
    results += [receipt for receipt in obs.view.receipts.values() if "previous_status" in receipt]
    require(results, "no interrupt_agent result was observed")
    require(all(result.get("turn_id") == expected for result in results),
            f"interrupt_agent named turns {[r.get('turn_id') for r in results]}, expected {expected}")
    return f"only {agent}'s turn {expected} was interrupted (one turn/interrupt, one turn_aborted); all other turns completed"


@judgement
def owners_stable(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """Attached mode: every agent kept its one owner generation and thread throughout."""
    described = []
    for name in sorted({a["agent"] for a in obs.view.attachments}):
        mine = [a for a in obs.view.attachments if a["agent"] == name]
        require(len(mine) == 1, f"{name} was attached {len(mine)} times")
        generations = {line.generation for line in obs.transcript(name)}
        require(generations == {mine[0]["generation"]}, f"{name} has transcripts of generations {sorted(generations)}")
        lines = obs.transcript(name)
        ev.cite(lines[0], lines[-1])
        described.append(f"{name} g{mine[0]['generation']} thread {mine[0]['thread_id']}")
    return "each owner stayed attached on its thread for the whole run: " + ", ".join(described)


@judgement
def resumed_same_thread(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """Background mode: a new owner generation resumed the agent's same thread and took the later task."""
    agent = params["agent"]
    mine = [a for a in obs.view.attachments if a["agent"] == agent]
    require(len(mine) >= 2 and mine[-1]["resume"], f"{agent} was not re-attached with resume ({mine})")
    first, last = mine[0], mine[-1]
    require(last["generation"] > first["generation"], "the re-attached owner has no newer generation")
    require(last["thread_id"] == first["thread_id"], f"thread {last['thread_id']} is not {first['thread_id']}")
    require(last["pid"] != first["pid"], "the same app-server process served both generations")
    resume = [line for line in obs.transcript(agent) if line.generation == last["generation"] and line.dir == "sent"
              and line.method == "thread/resume"]
    require(len(resume) == 1 and resume[0].params.get("threadId") == first["thread_id"],
            f"generation {last['generation']} sent no thread/resume of {first['thread_id']}")
    answer = obs.response_to(agent, resume[0])
    ev.cite(resume[0], answer)
    require(answer is not None and ((answer.message.get("result") or {}).get("thread") or {}).get("id")
            == first["thread_id"], "thread/resume did not answer with the same thread")
    if "record" in params:
        task = obs.select(params["record"])
        ev.cite(task["record_id"])
        binding = obs.bindings_of(task["request_id"])
        require(len(binding) == 1 and binding[0]["generation"] == last["generation"]
                and binding[0]["thread_id"] == first["thread_id"],
                f"{task['request_id']} was not bound to generation {last['generation']} on the same thread")
    return (f"{agent}'s generation {last['generation']} (pid {last['pid']}) resumed thread {first['thread_id']} "
            f"of generation {first['generation']} (pid {first['pid']})")


@judgement
def recalls_from_history(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """The agent answered a later task with an earlier result found only in its own history."""
    agent, fact = params["agent"], params["fact"]
    earlier, later = obs.select(params["earlier"]), obs.select(params["record"])
    earlier_reply, later_reply = _reply_of(obs, earlier), _reply_of(obs, later)
    ev.cite(earlier["record_id"], earlier_reply["record_id"], later["record_id"],
            later_reply["record_id"])
    require(fact in earlier_reply["body"], f"the earlier result does not contain {fact!r}")
    require(fact not in later["body"], "the later task gives the result again")
    require(fact in later_reply["body"], "the later answer does not recall the result")
    if obs.view.scripted:
        turn = _turn_of_request(obs, later)
        exchanges = [exchange for exchange in obs.exchanges(agent) if exchange.turn_id == turn]
        require(exchanges, f"no model request of {agent} in turn {turn}")
        items = exchanges[0].input_items()
        ev.cite(exchanges[0].seq)
        position = next((i for i, item in enumerate(items) if item.get("type") == "message"
                         and _carries(obs, item_text(item), later)), None)
        require(position is not None, "the later task's envelope is not in the model input")
        remembered = [item for item in items[:position] if item.get("role") == "assistant" and fact in item_text(item)]
        require(remembered, "the earlier result is not in the agent's own history")
        given = [item for item in items[position:] if fact in item_text(item)]
        require(not given, "the result was given again in the later turn's input")
    return (f"{agent}'s input for {later['request_id']} held {fact!r} only in its own earlier answer; "
            f"its reply recalls it")


@judgement
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


@judgement
def nothing_admitted(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """No record was admitted (from ``sender`` when given)."""
    rows = obs.records
    if "sender" in params:
        rows = [row for row in rows if row["sender"]["agent_id"] == obs.agent_id(params["sender"])]
    ev.cite(*(row["record_id"] for row in rows))
    require(not rows, f"{len(rows)} records were admitted: {[row['record_id'] for row in rows]}")
    require(not obs.bindings, f"{len(obs.bindings)} bindings exist")
    return f"no record was admitted{' from ' + params['sender'] if 'sender' in params else ''} and nothing was bound"


@judgement
def delivered_at_most_once(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """Nothing reached a provider twice: one binding and one turn/start or steer per task, one inject per record."""
    problems = []
    per_request = Counter(row["request_id"] for row in obs.bindings)
    problems += [f"{rid} bound {n} times" for rid, n in per_request.items() if n > 1]
    submissions: Counter[str] = Counter()
    injected: Counter[str] = Counter()
    records = [row for row in obs.records if row["kind"] != "task"]
    for name in obs.view.agents:
        for line in obs.transcript(name):
            if line.dir != "sent":
                continue
            if line.method in ("turn/start", "turn/steer") and line.params.get("clientUserMessageId"):
                submissions[line.params["clientUserMessageId"]] += 1
            elif line.method == "thread/inject_items":
                texts = [item_text(item) for item in line.params.get("items") or []]
                matched = [row["record_id"] for row in records if any(_carries(obs, t, row) for t in texts)]
                if len(matched) != 1:
                    problems.append(f"{line.ref} injects {len(matched)} known records")
                for interaction_id in matched:
                    injected[interaction_id] += 1
                    ev.cite(line)
    problems += [f"{rid} submitted {n} times" for rid, n in submissions.items() if n > 1]
    problems += [f"{iid} injected {n} times" for iid, n in injected.items() if n > 1]
    visible = Counter(row["record_id"] for row in obs.core.evidence_rows if row["stage"] == Stage.PROVIDER_VISIBLE)
    problems += [f"{iid} made visible {n} times" for iid, n in visible.items() if n > 1]
    problems += [f"{iid} injected without provider_visible evidence" for iid in injected if iid not in visible]
    ev.cite(*per_request.keys())
    require(not problems, "; ".join(problems))
    return (f"{len(per_request)} tasks bound and submitted once each; {len(injected)} records injected once each, "
            f"every inject backed by provider_visible evidence")


@judgement
def turns_accounted_for(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """Every turn that started was opened by a prompt or a bound task; none started on its own."""
    problems, count = [], 0
    bound = {row["turn_id"] for row in obs.bindings}
    for name in obs.view.agents:
        opened: dict[str, str] = {}
        for line in obs.transcript(name):
            if line.dir == "sent" and line.method == "turn/start":
                answer = obs.response_to(name, line)
                turn = ((answer.message.get("result") or {}).get("turn") or {}).get("id") if answer else None
                if turn:
                    opened[turn] = line.params.get("turnTrigger", "")
        for line in obs.transcript(name):
            if line.method == "turn/started":
                count += 1
                turn = (line.params.get("turn") or {}).get("id")
                trigger = opened.get(turn)
                if trigger is None:
                    problems.append(f"{name}'s turn {turn} started without a turn/start")
                    ev.cite(line)
                elif trigger == "peerwire_task" and turn not in bound:
                    problems.append(f"{name}'s task turn {turn} has no binding")
                    ev.cite(line)
    require(not problems, "; ".join(problems))
    return f"all {count} turns were opened by an operator prompt or a bound task"


@judgement
def model_requests_matched_rules(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """Every model request matched a scenario rule (held requests cut by an interrupt count as matched)."""
    bad = [exchange for exchange in obs.model_exchanges
           if exchange.rule is None or exchange.outcome not in ("answered", "disconnected")]
    ev.cite(*(exchange.seq for exchange in bad))
    require(obs.model_exchanges, "the scripted model received no request")
    require(not bad, f"model requests {[exchange.seq for exchange in bad]} matched no rule or did not finish")
    return f"all {len(obs.model_exchanges)} model requests matched a rule"


# The collaboration tree's judgements register themselves on import.
from . import collab_checks  # noqa: E402,F401
