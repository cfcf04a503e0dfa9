"""Recipient isolation by name: agents whose names look alike each read only their own records.

A mailbox found by name, not by identity, leaks: a ``LIKE name%`` query gives
``bo`` the records of ``bob``, ignores ASCII case and reads ``_`` and ``%`` as
wildcards; a trimmed or case-folded lookup merges ``bo``, ``bo `` and ``BO``.
Here one family of names (a stem; the stem with a letter, a dot or a space
after it; a letter before it; in capitals; split by a space; with its last
character replaced by ``_`` and by ``%``) is registered, each addressed by its
``agent_id`` so that target resolution plays no part. The stem itself gets
nothing. Then every path that returns records is read by each: receive, the
wait's wake, the agent list's ``is_caller``, and replies, which only a task's
own recipient can send and which reach the requester from the right agent. A
name the implementation refuses to register is left out (at least five must
register).
"""

from __future__ import annotations

import secrets

from harness.contract.fixtures import succeed, tool_call
from harness.contract.manifest import requirement

MIN_NAMES = 5


def _family(stem: str) -> list[str]:
    return [stem, stem + "b", stem + ".", stem + " x", "x" + stem, stem.upper(), stem[:3] + " " + stem[3:],
            stem[:-1] + "_", stem[:-1] + "%"]


@requirement("receive:isolation:names-alike")
def test_agents_with_names_alike_read_only_their_own_records(servers):
    names = _family(f"iso{secrets.token_hex(3)}")
    agents, refused = [], []
    for name in names:
        try:
            agents.append(servers.provisioner.register(name))
        except Exception as exc:  # noqa: BLE001 - a name the implementation refuses is no finding here
            refused.append(f"{name!r}: {exc}")
    assert len(agents) >= MIN_NAMES, f"only {len(agents)} of {names} registered: {refused}"
    requester = servers.caller("requester")
    asking = servers.start(requester)
    quiet, addressed = agents[0], agents[1:]
    tasks = {}
    for agent in addressed:
        succeed(asking, "send_message", {"target": agent.agent_id, "message": f"information for {agent.agent_id}"})
        tasks[agent.agent_id] = succeed(asking, "followup_task", {"target": agent.agent_id,
                                                                  "message": f"a task for {agent.agent_id}"})["request_id"]
    endpoints = {agent.agent_id: servers.start(agent) for agent in agents}
    problems = []

    woke = succeed(endpoints[quiet.agent_id], "wait_agent", {"timeout_ms": 0})
    if woke.get("woke") is not False:
        problems.append(f"{quiet.name!r}, sent nothing, woke: {woke}")
    for agent in agents:
        own = endpoints[agent.agent_id]
        page = succeed(own, "receive_messages", {"timeout_ms": 0})
        foreign = [r for r in page["records"] if (r.get("recipient") or {}).get("agent_id") != agent.agent_id
                   or agent.agent_id not in r.get("body", agent.agent_id)]
        expected = 0 if agent is quiet else 2
        if foreign or len(page["records"]) != expected:
            problems.append(f"{agent.name!r} read {len(page['records'])} records (its own: {expected}); not its own: "
                            + "; ".join(f"{r.get('body')!r} to {r.get('recipient')}" for r in foreign[:3]))
        offered = set(page.get("new_work", [])) | {c.get("request_id") for c in page.get("claims", [])}
        if offered - {tasks.get(agent.agent_id)}:
            problems.append(f"{agent.name!r} was offered another agent's work: {sorted(offered)}")
        listed = succeed(own, "list_agents", {"name_prefix": agent.name})["agents"]
        callers = [a.get("agent_id") for a in listed if a.get("is_caller")]
        if callers != [agent.agent_id]:
            problems.append(f"{agent.name!r} listing its own name finds is_caller on {callers}")
    for agent, neighbour in zip(addressed, addressed[1:] + addressed[:1]):
        stolen = tool_call(endpoints[agent.agent_id], "reply", {"request_id": tasks[neighbour.agent_id],
                                                                 "status": "done", "message": "not mine"})
        code = ((stolen.structured or {}).get("error") or {}).get("code") if stolen.is_error else None
        if code != "not_authorized":
            problems.append(f"{agent.name!r} replying to {neighbour.name!r}'s task: expected not_authorized, got "
                            f"{stolen.response}")
        succeed(endpoints[agent.agent_id], "reply", {"request_id": tasks[agent.agent_id], "status": "done",
                                                     "message": f"done by {agent.agent_id}"})
    replies = [r for r in succeed(asking, "receive_messages", {"timeout_ms": 0, "limit": 100})["records"]
               if r.get("kind") == "reply"]
    senders = {r.get("request_id"): (r.get("sender") or {}).get("agent_id") for r in replies}
    if senders != {request_id: agent_id for agent_id, request_id in tasks.items()}:
        problems.append(f"replies reached the requester from the wrong agents: {senders}")
    assert not problems, f"names alike {[a.name for a in agents]} (refused: {refused}):\n  " + "\n  ".join(problems)
