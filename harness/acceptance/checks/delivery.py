"""Judgements over delivery: inject without a turn, the envelope in the model's input, a task bound to its
turn, nothing delivered twice.

Each judges the path the recipient's kind has (:mod:`harness.capabilities`): a Codex agent's app-server
transcript (``turn/start``, ``thread/inject_items``), an ACP agent's ACP transcript (``session/prompt``; no
inject, so information waits for its next prompt). A path the kind lacks (steering an ACP agent) is skipped,
naming the capability."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from harness.evidence.responses import is_incoming, item_text
from harness.evidence.envelope_grammar import type_header
from harness.evidence.stages import Stage

from ..observations import Observations, TranscriptLine
from .kernel import Evidence, judgements, require
from .readings import carried_by, carries, inject_lines, opened_turn

ACP_PROMPT = "session/prompt"
VIA_FEATURE = {"turn/start": "start", "turn/steer": "steer"}
"""A Codex method a check names, as the feature it is (an ACP agent's path for ``start`` is a prompt)."""


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
    if not obs.kind(recipient).can("inject"):
        if not idle:
            obs.require(recipient, "inject")  # into a running turn: no equivalent without inject
        return _waited_for_next_prompt(obs, record, recipient, ev)
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
    next_turn = opened_turn(obs, host, next_start) if next_start is not None else None
    text = item_text(inject.params["items"][0])
    lines = obs.rollout(recipient)
    injected = [line for line in lines if line.record_type == "response_item" and is_incoming(line.payload)
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


def _waited_for_next_prompt(obs: Observations, record: Mapping[str, Any], recipient: str, ev: Evidence) -> str:
    """An idle recipient without inject: the record started no turn and went, once, in its next prompt (a turn
    someone else opened), or the recipient received it first and no prompt carried it."""
    visible = obs.evidence(record["record_id"], Stage.PROVIDER_VISIBLE)
    require(len(visible) <= 1, f"{len(visible)} provider_visible evidence rows, not at most one")
    prompts = [line for line in obs.acp_transcript(recipient) if line.dir == "sent" and line.method == ACP_PROMPT]
    carrying = [line for line in prompts if _prompt_carries(obs, line, record)]
    ev.cite(*carrying)
    admitted = _wall(record.get("created_at"))
    opened = {turn["turn_id"] for turn in obs.view.turns.values()} | {row["turn_id"] for row in obs.bindings}
    since = [line for line in prompts if admitted is None or line.wall is None or line.wall >= admitted]
    unexplained = [line for line in since if line.params.get("messageId") not in opened]
    ev.cite(*unexplained)
    require(not unexplained, f"{recipient} got prompts {[line.params.get('messageId') for line in unexplained]} "
                             "that no operator prompt or bound task opened: a turn started on its own")
    limit = obs.kind(recipient).cell("inject").how
    if not visible:
        require(not carrying, f"{len(carrying)} prompts carried {record['record_id']} without provider_visible evidence")
        require(record.get("received_at") or obs.evidence(record["record_id"], Stage.RECEIVED),
                f"{record['record_id']} was neither carried by a prompt nor received by {recipient}")
        return (f"{recipient} ({obs.kind(recipient).name}) has no inject ({limit}): {record['record_id']} started "
                "no turn, and was received before any prompt could carry it")
    detail = visible[0]["detail"]
    require((detail.get("via"), detail.get("path")) == (ACP_PROMPT, "next_turn"),
            f"made visible via {detail.get('via')} path {detail.get('path')}, not the next prompt")
    require(len(carrying) == 1, f"{len(carrying)} prompts of {recipient} carry {record['record_id']}, not one")
    turn = carrying[0].params.get("messageId")
    require(detail.get("prompt_message_id") == turn, f"the evidence names prompt {detail.get('prompt_message_id')}, "
                                                     f"the transcript's carrying prompt is {turn}")
    require(turn in opened, f"the prompt {turn} that carried it was opened by neither an operator nor a task")
    return (f"{recipient} ({obs.kind(recipient).name}) has no inject ({limit}): {record['record_id']} started no "
            f"turn and went once in its next prompt {turn} (path next_turn), which "
            f"{'an operator' if turn in {t['turn_id'] for t in obs.view.turns.values()} else 'a task'} opened")


def _prompt_carries(obs: Observations, line: TranscriptLine, record: Mapping[str, Any]) -> bool:
    blocks = [block.get("text", "") for block in line.params.get("prompt") or [] if isinstance(block, Mapping)]
    return carried_by(obs, {"type": "message", "role": "user",
                            "content": [{"type": "input_text", "text": text} for text in blocks]}, record)


def _wall(stamp: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(stamp)).timestamp() if stamp else None
    except ValueError:
        return None


def in_model_input(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """The record's envelope is in the agent's model input (in turn ``turn`` when given)."""
    record = obs.select(params["record"])
    agent = params["agent"]
    ev.cite(record["record_id"])
    obs.require(agent, "model_log")
    turn = obs.turn(params["turn"])["turn_id"] if "turn" in params else None
    exchanges = obs.turn_exchanges(agent, turn) if turn is not None else obs.exchanges(agent)
    hits = [exchange for exchange in exchanges
            if any(carried_by(obs, item, record) for item in exchange.input_items() if is_incoming(item))]
    require(hits, f"no model request of {agent}{' in ' + params['turn'] if turn else ''} carries the envelope")
    ev.cite(*(exchange.seq for exchange in hits[:3]))
    where = f"model requests {[exchange.seq for exchange in hits]}"
    return f"{agent}'s model saw the envelope of {record['record_id']} with the exact body in {where}"


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
    if obs.is_acp(recipient):
        obs.require(recipient, VIA_FEATURE.get(method, "start"))
        return _bound_to_prompt(obs, task, recipient, binding, params, ev)
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
    # The input's parts are one user message (the task item, then the literal body), read joined.
    require(carries(obs, "\n".join(item.get("text", "") for item in sent[0].params.get("input") or []), task),
            f"the {method} input is not the task's envelope")
    if "state" in params:
        require(binding["state"] == params["state"], f"binding state is {binding['state']}, not {params['state']}")
    return (f"{request_id} bound once ({binding['binding_id']}, {binding['state']}) to {recipient}'s turn "
            f"{turn_id} of generation {binding['generation']}, opened by {method} with its envelope")


def _bound_to_prompt(obs: Observations, task: Mapping[str, Any], recipient: str, binding: Mapping[str, Any],
                     params: Mapping[str, Any], ev: Evidence) -> str:
    """``task_bound`` for an ACP agent: one ``session/prompt`` carried the task's envelope, its ``messageId`` is
    the bound turn, its session the bound thread, and the evidence binds the canonical request to the agent's
    session and (once it showed the turn running) its first message id."""
    request_id = task["request_id"]
    # The agent's first update binds the prompt; its tool calls reach the core on another channel, so an explicit
    # reply may land first: the prompt is bound all the same, after the reply (and owes no automatic result).
    accepted = obs.evidence(task["record_id"], Stage.PROVIDER_ACCEPTED) + \
        obs.evidence(task["record_id"], Stage.PROVIDER_ACCEPTED_AFTER_REPLY)
    require(len(accepted) == 1 and accepted[0]["detail"].get("via") == ACP_PROMPT,
            f"provider_accepted evidence {[row['detail'] for row in accepted]} does not say {ACP_PROMPT}")
    detail = accepted[0]["detail"]
    after_reply = accepted[0]["stage"] == Stage.PROVIDER_ACCEPTED_AFTER_REPLY
    require(detail.get("path") == "idle_prompt", f"the task took path {detail.get('path')}, not idle_prompt")
    prompts = [line for line in obs.acp_transcript(recipient) if line.dir == "sent" and line.method == ACP_PROMPT
               and _prompt_carries(obs, line, task)]
    require(len(prompts) == 1, f"{recipient}'s ACP transcript has {len(prompts)} {ACP_PROMPT} carrying "
                               f"{request_id}, not one")
    prompt = prompts[0]
    answer = next((line for line in obs.acp_transcript(recipient) if line.dir == "received"
                   and line.generation == prompt.generation and line.message.get("id") == prompt.message.get("id")
                   and "method" not in line.message), None)
    ev.cite(prompt, answer)
    turn_id = prompt.params.get("messageId")
    require(turn_id == binding["turn_id"], f"{ACP_PROMPT} was turn {turn_id}, the binding says {binding['turn_id']}")
    require(prompt.params.get("sessionId") == binding["thread_id"] == detail.get("session_id"),
            f"the binding names session {binding['thread_id']}, the prompt {prompt.params.get('sessionId')}")
    require(prompt.generation == binding["generation"], "the binding names another owner generation")
    require(detail.get("prompt_message_id") == turn_id, "the evidence names another prompt")
    blocks = [block.get("text") for block in prompt.params.get("prompt") or []]
    require(task["body"] in blocks, "the literal text is not a block of its own in the prompt")
    if "state" in params:
        require(binding["state"] == params["state"], f"binding state is {binding['state']}, not {params['state']}")
    message = detail.get("message_id")
    return (f"{request_id} bound once ({binding['binding_id']}, {binding['state']}) to {recipient}'s prompt "
            f"{turn_id} in session {binding['thread_id']} of generation {binding['generation']}, opened by "
            f"{ACP_PROMPT} with its envelope and literal text as blocks"
            + (f"; the agent's first message {message}" if message else "")
            + f" (acknowledged by {detail.get('acknowledged_by')})"
            + ("; bound after the agent's explicit reply reached the core" if after_reply else ""))


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
                matched = [row["record_id"] for row in records if any(carries(obs, t, row) for t in texts)]
                if not matched and not any(f"{type_header()}: " in t for t in texts):
                    continue  # a collaboration child's inherited history: it carries no mail, by construction
                if len(matched) != 1:
                    problems.append(f"{line.ref} injects {len(matched)} known records")
                for interaction_id in matched:
                    injected[interaction_id] += 1
                    ev.cite(line)
        for line in obs.acp_transcript(name):
            if line.dir != "sent" or line.method != ACP_PROMPT:
                continue
            for row in obs.records:
                if not _prompt_carries(obs, line, row):
                    continue
                ev.cite(line)
                if row["kind"] == "task":
                    submissions[row["request_id"]] += 1
                else:
                    injected[row["record_id"]] += 1  # carried by a next prompt: the ACP way in
    problems += [f"{rid} submitted {n} times" for rid, n in submissions.items() if n > 1]
    problems += [f"{iid} injected {n} times" for iid, n in injected.items() if n > 1]
    visible = Counter(row["record_id"] for row in obs.core.evidence_rows if row["stage"] == Stage.PROVIDER_VISIBLE)
    problems += [f"{iid} made visible {n} times" for iid, n in visible.items() if n > 1]
    problems += [f"{iid} injected without provider_visible evidence" for iid in injected if iid not in visible]
    ev.cite(*per_request.keys())
    require(not problems, "; ".join(problems))
    return (f"{len(per_request)} tasks bound and submitted once each; {len(injected)} records injected (or carried "
            f"by an ACP agent's next prompt) once each, every one backed by provider_visible evidence")


JUDGEMENTS = judgements(injected_without_turn, in_model_input, task_bound, delivered_at_most_once)
