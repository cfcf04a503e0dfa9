"""The collaboration profile's operations (``collab.*`` on the control socket).

The same store, claims and adapter as the messaging contract; what differs is
the surface: agents are named by tree paths, ``spawn_agent`` creates a child,
successful calls return empty output, and ``wait_agent`` answers with a short
``message`` naming what arrived, never its contents (the contents reach the
model through its thread, injected by the adapter).
"""

from __future__ import annotations

import time
from typing import Any

from . import collab
from .envelope import MESSAGE_TYPES
from .delivery import Delivery
from .errors import Code, PeerwireError
from .hub import USER_INPUT, require_present
from .receipts import tool_receipt
from .registry_rules import AgentRow
from .store import Store

class CollabOperations:
    def __init__(self, store: Store, delivery: Delivery):
        self.store = store
        self.delivery = delivery

    def handlers(self) -> dict[str, Any]:
        return {
            "spawn_agent": self.spawn_agent,
            "send_message": self.send_message,
            "followup_task": self.followup_task,
            "wait_agent": self.wait_agent,
            "list_agents": self.list_agents,
            "interrupt_agent": self.interrupt_agent,
        }

    # -- identity ---------------------------------------------------------------------

    def caller(self, holder: AgentRow, meta: dict | None) -> AgentRow:
        """The calling session: the token holder, or the descendant whose thread made the call.

        Children run as threads of their root's app-server, so they share its MCP
        server and token; Codex's turn metadata names the exact thread. Only a
        descendant of the token's own agent can be selected this way.
        """
        if not holder.path:
            raise PeerwireError(Code.NOT_AUTHORIZED,
                                f"{holder.name} is not in a collaboration tree; register the root with "
                                "`peerwire agent register NAME --provider codex --collab-root`")
        thread_id = ((meta or {}).get("turn") or {}).get("thread_id")
        if thread_id and thread_id != holder.provider_session_id:
            agent = self.store.registry.agent_by_thread(thread_id)
            if agent is not None and agent.path and agent.path.startswith(holder.path + "/"):
                return agent
        return holder

    def _target(self, caller: AgentRow, target: Any) -> AgentRow:
        if not collab.is_path(target):
            raise PeerwireError(Code.INVALID_ARGUMENT,
                                f"target must be a path such as {collab.ROOT} or {collab.ROOT}/review",
                                {"target": target})
        return self.store.registry.agent_by_path(target)

    # -- tools --------------------------------------------------------------------------------

    async def spawn_agent(self, caller: AgentRow, args: dict, meta: dict) -> dict:
        path = collab.child_path(caller.path, args.get("task_name"))  # type: ignore[arg-type]  # task_name is checked there; a collab tool's caller is a tree member
        fork = collab.fork_turns(args.get("fork_turns"))
        message = args.get("message")
        if not isinstance(message, str) or not message:
            raise PeerwireError(Code.INVALID_ARGUMENT, "message is the child's first task and must not be empty")
        collab.check_capacity({"status": c.status} for c in self.store.registry.descendants(collab.ROOT))
        # Capacity is reserved here, synchronously: the row exists before the child starts.
        child, _ = self.store.registry.register_agent(path, collab.CHILD_PROVIDER, source="spawn_agent",
                                                      status="starting", path=path, parent_agent_id=caller.agent_id)
        self.store.mailbox.admit_task(caller, child, message, receipt=tool_receipt(meta))
        runtime = self.delivery.providers.get(child.provider)
        if runtime is not None:
            self.delivery.in_background(runtime.spawn_child(caller, child, fork, after_call=meta.get("call_id")),
                                        f"spawn {path}")
        return {"task_name": path}

    async def send_message(self, caller: AgentRow, args: dict, meta: dict) -> dict:
        recipient = self._target(caller, args.get("target"))
        receipt = self.store.mailbox.admit_information(caller, recipient, self._body(args), receipt=tool_receipt(meta),
                                                       entry=meta.get("entry"))
        self.delivery.after_commit(recipient, receipt["interaction_id"])
        return {}

    async def followup_task(self, caller: AgentRow, args: dict, meta: dict) -> dict:
        recipient = self._target(caller, args.get("target"))
        if recipient.agent_id == caller.agent_id:
            raise PeerwireError(Code.INVALID_ARGUMENT, "an agent cannot assign a task to itself")
        self.store.mailbox.admit_task(caller, recipient, self._body(args), receipt=tool_receipt(meta),
                                      entry=meta.get("entry"))
        self.delivery.task_admitted(recipient)
        return {}

    async def wait_agent(self, caller: AgentRow, args: dict, meta: dict) -> dict:
        """Wait for mail or new user input; its ``message`` names what arrived, never its contents.

        Only the mailbox and the user wake it: a child that finishes frees
        capacity, and that alone completes no wait (its final answer, which is
        mail, does). User input counts from the moment the wait subscribed.
        """
        timeout_ms = collab.wait_timeout_ms(args.get("timeout_ms"))
        deadline = time.monotonic() + timeout_ms / 1000
        user_input = False
        with self.delivery.hub.subscribe(caller.agent_id) as sub:
            while True:
                require_present()  # a caller that has left takes nothing
                arrived = [self._take_arrivals(caller)] + ([collab.USER_INPUT_MESSAGE] if user_input else [])
                if any(arrived):
                    return {"message": "; ".join(filter(None, arrived)), "timed_out": False}
                if not await sub.wait(deadline - time.monotonic()):
                    return {"message": "", "timed_out": True}
                user_input = USER_INPUT in sub.reasons  # read before rearm clears it; no await in between
                sub.rearm()

    def _take_arrivals(self, caller: AgentRow) -> str:
        """Name what arrived since the last wait, and mark it seen (its contents are in the thread)."""
        page = self.store.mailbox.receive(caller, limit=100)
        if not page.records:
            return ""
        self.store.mailbox.receive(caller, ack_cursor=page.cursor, limit=1)
        # A task the adapter delivered as a turn's input is that turn, not news.
        news = [r for r in page.records
                if not (r["kind"] == "task" and self.store.mailbox.interaction(r["record_id"])["state"] != "pending")]
        return "; ".join(f"{MESSAGE_TYPES[r['kind']]} from {self._path(r['sender'])}" for r in news)

    def _path(self, ref: dict) -> str:
        if not ref.get("agent_id"):
            return ref["name"]
        return self.store.registry.agent(ref["agent_id"]).path or ref["name"]

    async def list_agents(self, caller: AgentRow, args: dict, meta: dict) -> dict:
        rows = self.store.registry.in_tree(args.get("path_prefix") or collab.ROOT)
        return {"agents": [{"name": a.path, "status": a.status} for a in rows]}

    async def interrupt_agent(self, caller: AgentRow, args: dict, meta: dict) -> dict:
        target = self._target(caller, args.get("target"))
        if target.path == collab.ROOT:
            raise PeerwireError(Code.NOT_AUTHORIZED, "the root cannot be interrupted through the tree")
        if target.agent_id == caller.agent_id:
            raise PeerwireError(Code.NOT_AUTHORIZED, "an agent cannot interrupt itself")
        provider = self.delivery.providers.get(target.provider)
        if provider is None:
            raise PeerwireError(Code.UNSUPPORTED, f"{target.path} has no provider that can be interrupted")
        result = await provider.interrupt(target)
        return {"previous_status": result["previous_status"]}

    @staticmethod
    def _body(args: dict) -> str:
        message = args.get("message")
        if not isinstance(message, str) or not message:
            raise PeerwireError(Code.INVALID_ARGUMENT, "message must be a non-empty string")
        return message
