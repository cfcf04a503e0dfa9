"""Judgements over turns and owners: exactly one interrupted turn, stable or resumed owners, every turn
accounted for, every model request matched."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..observations import Observations, output_json
from .kernel import Evidence, judgements, require
from .readings import opened_turn, result_thread, turn_of_request


def interrupted_exactly(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """Exactly the observed turn ended interrupted; every other turn of every agent completed.

    The interrupt is the kind's own: ``turn/interrupt`` of that turn (Codex), or ``session/cancel`` while that
    prompt ran, answered ``cancelled`` (ACP)."""
    agent = params["agent"]
    obs.require(agent, "interrupt")
    if "turn" in params:
        expected = obs.turn(params["turn"])["turn_id"]
    else:
        task = obs.select(params["record"])
        ev.cite(task["record_id"])
        expected = turn_of_request(obs, task)
    requests = obs.interrupts(agent)
    ev.cite(*(line for _turn, line in requests))
    require([turn for turn, _line in requests] == [expected],
            f"interrupts were sent for turns {[turn for turn, _line in requests]}, not once for {expected}")
    others = []
    for name in obs.view.agents:
        for turn, status, line in obs.turn_outcomes(name):
            if name == agent and turn == expected:
                ev.cite(line)
                require(status == "interrupted", f"turn {expected} ended {status}")
            elif status != "completed":
                others.append(f"{name}:{turn}={status}")
                ev.cite(line)
    require(any(name == agent and turn == expected for name in obs.view.agents
                for turn, _status, _line in obs.turn_outcomes(name)), f"turn {expected} never ended")
    require(not others, f"other turns did not complete: {others}")
    aborted = [line for line in obs.rollout(agent)
               if line.record_type == "event_msg" and line.payload_type == "turn_aborted"]
    ev.cite(*aborted)
    require([line.payload.get("turn_id") for line in aborted] == [expected],
            f"the agent's history records aborted turns {[line.payload.get('turn_id') for line in aborted]}")
    results = [output_json(out.text()) or {} for name in obs.view.agents
               for _call, out in obs.tool_calls(name, "interrupt_agent") if out is not None]
    results += [receipt for receipt in obs.view.receipts.values() if "previous_status" in receipt]
    require(results, "no interrupt_agent result was observed")
    require(all(result.get("turn_id") == expected for result in results),
            f"interrupt_agent named turns {[r.get('turn_id') for r in results]}, expected {expected}")
    how = "one session/cancel, the prompt answered cancelled" if obs.is_acp(agent) else \
        "one turn/interrupt, one turn_aborted"
    return f"only {agent}'s turn {expected} was interrupted ({how}); all other turns completed"


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
    require(result_thread(obs, agent, resume[0]) == first["thread_id"],
            "thread/resume did not answer with the same thread")
    if "record" in params:
        task = obs.select(params["record"])
        ev.cite(task["record_id"])
        binding = obs.bindings_of(task["request_id"])
        require(len(binding) == 1 and binding[0]["generation"] == last["generation"]
                and binding[0]["thread_id"] == first["thread_id"],
                f"{task['request_id']} was not bound to generation {last['generation']} on the same thread")
    return (f"{agent}'s generation {last['generation']} (pid {last['pid']}) resumed thread {first['thread_id']} "
            f"of generation {first['generation']} (pid {first['pid']})")


def turns_accounted_for(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """Every turn that started was opened by a prompt or a bound task; none started on its own. An ACP agent's
    turns are the core's prompts: each is an operator's prompt or a bound task's, and the agent showed no turn
    activity (messages, tool calls) outside them."""
    problems, count = [], 0
    bound = {row["turn_id"] for row in obs.bindings}
    prompted = {turn["turn_id"] for turn in obs.view.turns.values()}
    for name in obs.view.agents:
        if obs.is_acp(name):
            history = obs.history(name)
            for turn in history.turns:
                count += 1
                if turn.turn_id not in bound and turn.turn_id not in prompted:
                    problems.append(f"{name}'s prompt {turn.turn_id} was opened by neither an operator nor a task")
                    ev.cite(turn.prompt)
            if history.stray:
                problems.append(f"{name} worked outside every prompt ({len(history.stray)} updates)")
                ev.cite(*history.stray[:3])
            continue
        opened: dict[str, str] = {}
        for line in obs.transcript(name):
            if line.dir == "sent" and line.method == "turn/start":
                turn = opened_turn(obs, name, line)
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


def model_requests_matched_rules(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """Every model request matched a scenario rule and was answered, or Codex hung up on it for a
    reason its rollout shows (the turn interrupted, aborted or cut short, or input steered in)."""
    bad = [exchange for exchange in obs.model_exchanges
           if exchange.rule is None or exchange.outcome not in ("answered", "disconnected")]
    ev.cite(*(exchange.seq for exchange in bad))
    require(obs.model_exchanges, "the scripted model received no request")
    require(not bad, f"model requests {[exchange.seq for exchange in bad]} matched no rule or did not finish")
    return f"all {len(obs.model_exchanges)} model requests matched a rule{_cuts_explained(obs, ev)}{_unlogged(obs)}"


def model_requests_answered(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """Every model request the recording proxy carried to the real provider was answered, or Codex hung up on it
    for a reason its rollout shows; one the provider failed passes only when Codex asked again in the same turn
    and that request was answered (a retry)."""
    require(obs.model_exchanges, "the recording proxy carried no model request")
    answered = {(exchange.turn_id, exchange.seq) for exchange in obs.model_exchanges if exchange.outcome == "answered"}
    failed = [exchange for exchange in obs.model_exchanges if exchange.outcome not in ("answered", "disconnected")]
    retried = [exchange for exchange in failed if exchange.turn_id is not None and any(
        turn == exchange.turn_id and seq > exchange.seq for turn, seq in answered)]
    bad = [exchange for exchange in failed if exchange not in retried]
    ev.cite(*(exchange.seq for exchange in failed))
    require(not bad, "model requests " + ", ".join(f"{exchange.seq} ({exchange.outcome}: {exchange.error})"
                                                   for exchange in bad) + " were not answered, nor asked again")
    again = f"; {len(retried)} failed and were asked again ({[e.seq for e in retried]})" if retried else ""
    return (f"all {len(obs.model_exchanges)} model requests were answered{again}{_cuts_explained(obs, ev)}"
            f"{_unlogged(obs)}")


def _cuts_explained(obs: Observations, ev: Evidence) -> str:
    """Each request the agent hung up on is explained by its history (else :class:`Failed`): a Codex rollout, or
    an ACP turn that ended cancelled while the request ran; the reasons, said."""
    cut = {exchange.seq: _why_cut(obs, exchange) for exchange in obs.model_exchanges
           if exchange.outcome == "disconnected"}
    unexplained = [seq for seq, why in cut.items() if why is None]
    ev.cite(*unexplained)
    require(not unexplained, f"Codex hung up on model requests {unexplained} although their turns ran on "
            "without an interrupt or steered input: an answer went missing")
    return f"; {len(cut)} cut by Codex ({', '.join(sorted(set(cut.values())))})" if cut else ""


def _unlogged(obs: Observations) -> str:
    """Agents whose model requests the run cannot see (an ACP agent on its own provider), said as such."""
    names = [f"{name} ({obs.kind(name).name})" for name in obs.view.kinds if not obs.kind(name).can("model_log")]
    return f"; not judged: the requests of {', '.join(names)}, which talk to their own provider" if names else ""


def _why_cut(obs: Observations, exchange: Any) -> str | None:
    if exchange.agent and obs.is_acp(exchange.agent):
        for turn in obs.history(exchange.agent).turns:
            if turn.turn_id and exchange in obs.turn_exchanges(exchange.agent, turn.turn_id):
                return "interrupted" if turn.status == "interrupted" else None
        return None
    return obs.rollouts.why_cut(exchange.turn_id, exchange.received_at)


JUDGEMENTS = judgements(interrupted_exactly, owners_stable, resumed_same_thread, turns_accounted_for,
                        model_requests_matched_rules, model_requests_answered)
