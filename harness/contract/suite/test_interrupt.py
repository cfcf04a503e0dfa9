"""interrupt_agent on an agent with no active turn, for every kind of agent the provisioner registers.

The tool's contract says it fails with ``not_active`` when the peer has no
active turn. An implementation that answers success whenever the target
exists "interrupts" nothing and tells its caller it did. The suite has no live
runtime, so every agent it registers of a kind with turns (every kind the
provisioner declares in ``agent_kinds`` but ``manual``, which has none) has no
active turn: by name, alias and agent_id, and again, each must be
``not_active``.
"""

from __future__ import annotations

import secrets

from harness.contract.fixtures import tool_call
from harness.contract.manifest import requirement


@requirement("interrupt:idle:not-active")
def test_an_agent_without_an_active_turn_is_not_active(servers, contract_target, votes):
    kinds = [k for k in contract_target.agent_kinds() if k != "manual"]
    if not kinds:
        votes.not_applicable("interrupt:idle:not-active", "the provisioner registers no agent kind with turns "
                                                          f"(agent_kinds: {contract_target.agent_kinds()})")
        return
    caller = servers.start()
    problems = []
    for kind in kinds:
        tag = secrets.token_hex(2)
        agent = servers.provisioner.register(f"idle-{kind}-{tag}", provider=kind, aliases=(f"quiet-{kind}-{tag}",))
        for target in (agent.name, agent.aliases[0], agent.agent_id, agent.name):
            outcome = tool_call(caller, "interrupt_agent", {"target": target})
            error = (outcome.structured or {}).get("error") if outcome.is_error else None
            if not error or error.get("code") != "not_active":
                problems.append(f"{kind} agent, target {target!r}: {outcome.response or outcome.failure}")
    assert not problems, ("interrupt_agent on agents with no active turn must fail with not_active:\n  "
                          + "\n  ".join(problems[:6]))
