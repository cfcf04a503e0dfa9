"""The calls every official client makes: each tool's success and the errors it can be led into.

A :class:`Plan` is built fresh for each client run, because its calls change
state (a reply answers its request once). :class:`Setup` arranges that state
through the server under test itself, with the suite's raw client: peers to
address, a task waiting for the caller's reply, one already replied to, one
the caller assigned (so replying to it is not the caller's to do), a record
waiting so that waits return at once. What the client then sends is fixed here;
what it must see is the contract: success, or a tool error with that code.
Interrupting a turn needs a provider turn, which an inert suite never has, so
``interrupt_agent`` contributes errors only.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from ..endpoints import RawEndpoint
from ..fixtures import Servers
from ..interface import Caller
from ..schemas import body_byte_limit

CALL_TIMEOUT_S = 20.0
"""How long a client may take over one planned call; every planned call answers at once."""
UNISSUED_REQUEST = "rq_" + "0" * 32


class SetupFailed(RuntimeError):
    """The server under test did not do what a plan's set-up needed of it."""


@dataclass(frozen=True)
class PlannedCall:
    """One tools/call a client makes, in a session, and what it must see."""

    id: str
    tool: str
    arguments: Mapping[str, Any]
    error: str | None = None
    """The contract error code the client must see; ``None``: the call succeeds."""
    session: str = "caller"
    after: str | None = None
    """A call that must have been answered first (clients that make calls at once respect it)."""

    @property
    def expectation(self) -> str:
        return f"fails with {self.error}" if self.error else "succeeds"


@dataclass(frozen=True)
class Plan:
    """Sessions (one server process each, with its environment) and the calls made in them, in order."""

    profile: str
    server_cmd: tuple[str, ...]
    sessions: Mapping[str, Mapping[str, str]]
    calls: tuple[PlannedCall, ...]

    def calls_of(self, session: str) -> list[PlannedCall]:
        return [c for c in self.calls if c.session == session]

    def one_of_each(self) -> "Plan":
        """Every tool's first success and first error only (and the calls those depend on).

        For a client that pays a process per call: each tool still shows it
        accepts both shapes of answer.
        """
        kept: dict[str, PlannedCall] = {}
        for call in self.calls:
            key = f"{call.tool} {'error' if call.error else 'success'}"
            kept.setdefault(key, call)
        ids = {c.id for c in kept.values()}
        ids |= {c.after for c in kept.values() if c.after}
        calls = tuple(c for c in self.calls if c.id in ids)
        sessions = {name: env for name, env in self.sessions.items() if any(c.session == name for c in calls)}
        return replace(self, calls=calls, sessions=sessions)


@dataclass
class Setup:
    """Arranges a plan's state through the server under test, as its callers, with the raw client."""

    servers: Servers
    profile: str = "messaging"
    _endpoints: dict[str, RawEndpoint] = field(default_factory=dict)

    def register(self, name: str, **options: Any) -> Caller:
        return self.servers.provisioner.register(name, **options)

    def env(self, caller: Caller) -> dict[str, str]:
        return self.servers.target.server_env(self.servers.provisioner.caller_env(caller))

    def stranger_env(self) -> dict[str, str]:
        return self.servers.target.server_env(self.servers.provisioner.stranger_env())

    def call(self, caller: Caller, tool: str, arguments: Mapping[str, Any]) -> Any:
        """The structured result of a call that must succeed; :class:`SetupFailed` otherwise."""
        endpoint = self._endpoints.get(caller.agent_id)
        if endpoint is None:
            endpoint = self._endpoints[caller.agent_id] = self.servers.start(caller, profile=self.profile)
        outcome = endpoint.call_tool(tool, dict(arguments), timeout=CALL_TIMEOUT_S).outcome(CALL_TIMEOUT_S)
        if outcome.result is None or outcome.is_error:
            raise SetupFailed(f"setting up the plan, {tool} {dict(arguments)} failed: "
                              f"{outcome.response or outcome.failure}")
        return outcome.structured

    def plan(self, calls: list[PlannedCall], sessions: Mapping[str, Mapping[str, str]]) -> Plan:
        return Plan(profile=self.profile, server_cmd=self.servers.target.server_cmd_for(self.profile),
                    sessions=dict(sessions), calls=tuple(calls))


def messaging_plan(setup: Setup) -> Plan:
    """Every messaging tool: a success where an inert client can reach one, and the errors it can provoke."""
    tag = secrets.token_hex(3)
    caller, peer = setup.register(f"client-{tag}"), setup.register(f"peer-{tag}")
    twin = f"twin-{tag}"
    setup.register(twin)
    setup.register(twin)  # two agents, one name: an ambiguous target
    nobody = f"nobody-{tag}"
    asked = setup.call(peer, "followup_task", {"target": caller.name, "message": "answer me"})["request_id"]
    answered = setup.call(peer, "followup_task", {"target": caller.name, "message": "answered"})["request_id"]
    setup.call(caller, "reply", {"request_id": answered, "status": "done", "message": "first answer"})
    assigned = setup.call(caller, "followup_task", {"target": peer.name, "message": "yours"})["request_id"]
    setup.call(peer, "send_message", {"target": caller.name, "message": "waiting for you"})
    too_large = "x" * (body_byte_limit() + 1)
    answer = {"status": "done", "message": "done"}
    calls = [
        PlannedCall("send", "send_message", {"target": peer.name, "message": "hello from a client"}),
        PlannedCall("send-unknown", "send_message", {"target": nobody, "message": "hello"}, "unknown_target"),
        PlannedCall("send-ambiguous", "send_message", {"target": twin, "message": "hello"}, "ambiguous_target"),
        PlannedCall("send-broadcast", "send_message", {"target": "*", "message": "hello"}, "broadcast_not_supported"),
        PlannedCall("send-too-large", "send_message", {"target": peer.name, "message": too_large}, "message_too_large"),
        PlannedCall("task", "followup_task", {"target": peer.name, "message": "count the apples"}),
        PlannedCall("task-empty", "followup_task", {"target": peer.name, "message": ""}, "invalid_argument"),
        PlannedCall("receive", "receive_messages", {}),
        PlannedCall("receive-forged", "receive_messages", {"cursor": "not-a-cursor"}, "cursor_invalid"),
        PlannedCall("reply", "reply", {"request_id": asked, **answer}),
        PlannedCall("reply-again", "reply", {"request_id": answered, **answer}, "already_replied"),
        PlannedCall("reply-not-mine", "reply", {"request_id": assigned, **answer}, "not_authorized"),
        PlannedCall("reply-unknown", "reply", {"request_id": UNISSUED_REQUEST, **answer}, "unknown_request"),
        PlannedCall("wait", "wait_agent", {"timeout_ms": 0}),
        PlannedCall("wait-too-long", "wait_agent", {"timeout_ms": 60_001}, "invalid_argument"),
        PlannedCall("interrupt-manual", "interrupt_agent", {"target": peer.name}, "unsupported"),
        PlannedCall("list", "list_agents", {}),
        PlannedCall("list-long-prefix", "list_agents", {"name_prefix": "x" * 65}, "invalid_argument"),
        PlannedCall("list-stranger", "list_agents", {}, "unknown_caller", session="stranger"),
    ]
    return setup.plan(calls, {"caller": setup.env(caller), "stranger": setup.stranger_env()})


ACTIVE_CHILDREN = 4
"""Active children a tree holds (``collab:limit:active``): the plan fills it to provoke limit_exceeded."""


def collab_plan(setup: Setup) -> Plan:
    """Every collaboration tool, on a provisioner of its own whose tree root is the caller."""
    root = setup.register(f"root-{secrets.token_hex(3)}", collab_root=True)
    for n in range(ACTIVE_CHILDREN - 1):
        setup.call(root, "spawn_agent", {"task_name": f"w{n}", "message": "stand by"})
    setup.call(root, "send_message", {"target": "/root", "message": "a note, so a wait returns at once"})
    too_large = "x" * (body_byte_limit() + 1)
    last = f"w{ACTIVE_CHILDREN - 1}"
    calls = [
        PlannedCall("spawn", "spawn_agent", {"task_name": last, "message": "help"}),
        PlannedCall("spawn-over-limit", "spawn_agent", {"task_name": "extra", "message": "help"}, "limit_exceeded",
                    after="spawn"),
        PlannedCall("spawn-bad-name", "spawn_agent", {"task_name": "Not A Name", "message": "help"},
                    "invalid_argument"),
        PlannedCall("send", "send_message", {"target": "/root/w0", "message": "hello"}),
        PlannedCall("send-unknown", "send_message", {"target": "/root/nobody", "message": "hello"}, "unknown_target"),
        PlannedCall("task", "followup_task", {"target": "/root/w1", "message": "count the apples"}),
        PlannedCall("task-too-large", "followup_task", {"target": "/root/w1", "message": too_large},
                    "message_too_large"),
        PlannedCall("wait", "wait_agent", {"timeout_ms": 60_000}),
        PlannedCall("wait-too-long", "wait_agent", {"timeout_ms": 3_600_001}, "invalid_argument"),
        PlannedCall("list", "list_agents", {}),
        PlannedCall("list-bad-prefix", "list_agents", {"path_prefix": "root"}, "invalid_argument"),
        PlannedCall("interrupt-root", "interrupt_agent", {"target": "/root"}, "not_authorized"),
        PlannedCall("list-stranger", "list_agents", {}, "unknown_caller", session="stranger"),
    ]
    return setup.plan(calls, {"caller": setup.env(root), "stranger": setup.stranger_env()})
