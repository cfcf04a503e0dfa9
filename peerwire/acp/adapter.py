"""Automatic delivery into agents that speak the Agent Client Protocol (``opencode acp``, ...).

One owner per agent, as for Codex: the operator attaches an agent by starting
its ACP command (a new generation each time); the owner opens a session
(``session/new``, or ``session/load`` of the agent's known session) that hands
the agent the peerwire MCP server with the agent's own ``PEERWIRE_HOME`` and
``PEERWIRE_SESSION_ID``.

Tasks: an idle agent gets one task per ``session/prompt`` (claimed for dispatch
first, the same durable claim receive uses), carrying the structured task and
the peer's literal text as two content blocks. The prompt is admitted when the
agent shows the turn running (its first ``session/update`` of a turn) or, at the
latest, answers it: only then is the binding persisted, and always before the
answer is handled. The answer decides the reply (:mod:`.turns`). A prompt never
answered (the agent went away) leaves its task uncertain; nothing is sent again.

Declared limits (ACP has no native equivalent, ``contracts/capabilities.json``):

* **no inject**: information, replies and notices wait for the agent's next
  ``receive_messages`` or its next turn, whose prompt carries those it has not
  received yet (each then becomes ``provider_visible`` via ``session/prompt``);
* **no steer**: a task for a busy agent waits until its turn ends, then goes in
  the next prompt.

``interrupt_agent`` sends ``session/cancel``; the prompt is then answered
``cancelled`` and its task gets the ``blocked`` notice. Nothing is ever typed
into a terminal.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Mapping, Sequence

from .. import envelope
from ..errors import Code, PeerwireError
from ..lifecycle import Event
from ..providers import Committed, no_active_turn
from ..registry_rules import AgentRow
from ..stdio_peer import JsonRpcError, PeerError, PeerExited
from ..store import Store
from .client import AcpClient, AcpSession, stdio_mcp_server, text_block
from .turns import PromptTurn, outcome_of

log = logging.getLogger("peerwire.acp")

PROVIDER = "acp"
REQUEST_TIMEOUT_S = 120.0
"""Bound of ``initialize`` and the session requests: a cold OpenCode takes seconds to answer ``initialize`` (its
first start in a fresh home migrates its database), and ``session/new`` starts the MCP servers before it answers;
on a loaded machine each can take tens of seconds. A safety net against a hung agent, never a verdict."""
MCP_SERVER_NAME = "peerwire"
DEFAULT_MCP_COMMAND = (sys.executable, "-m", "peerwire", "mcp", "serve")
VIA = "session/prompt"

StartClient = Callable[..., Awaitable[AcpSession]]


@dataclass
class AcpOwner:
    """The attached ACP agent of one peerwire agent, at one generation."""

    agent_id: str
    name: str
    generation: int
    session_id: str
    client: AcpSession
    cwd: str
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    turn: PromptTurn | None = None
    """The prompt in flight (at most one: ACP has no steering)."""
    completed: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Finished turns of this generation: turn id -> {turn_id, status}."""
    deferred: list[str] = field(default_factory=list)
    """Records for it that wait for its next receive or next turn (no inject)."""
    watcher: asyncio.Task | None = None
    conversations: set[asyncio.Task] = field(default_factory=set)
    detached: bool = False

    def describe(self) -> dict[str, Any]:
        info = (self.client.initialize_result or {}).get("agentInfo") or {}
        return {"agent_id": self.agent_id, "name": self.name, "generation": self.generation, "provider": PROVIDER,
                "agent_info": info, "thread_id": self.session_id, "session_id": self.session_id,
                "active_turn": self.turn.turn_id if self.turn else None, "pid": self.client.pid,
                "completed_turns": list(self.completed.values()), "deferred": list(self.deferred),
                "transcript": str(self.client.transcript.path) if self.client.transcript.path else None}


class AcpProvider:
    """The app's provider for agents registered with provider ``acp``."""

    name = PROVIDER
    pushes = True

    def __init__(self, store: Store, committed: Committed, transcripts: Path,
                 start_client: StartClient = AcpClient.start, *, home: Path | None = None):
        self.store = store
        self.committed = committed
        self.transcripts = transcripts
        self.home = home if home is not None else transcripts.parent
        """The core's home: the ``PEERWIRE_HOME`` each agent's MCP server is given."""
        self.start_client = start_client
        self.owners: dict[str, AcpOwner] = {}

    @classmethod
    def in_process(cls, home: Path, start_client: StartClient = AcpClient.start) -> "AcpProvider":
        """An adapter on a store of its own in ``home``, with no app around it (white-box tests drive it
        directly; its agents' MCP servers then find no app). Close its store when done."""
        home.mkdir(parents=True, exist_ok=True)
        return cls(Store(home / "peerwire.db"), lambda *_: None, home / PROVIDER, start_client, home=home)

    # -- attach and detach --------------------------------------------------------

    async def attach(self, agent: AgentRow, *, command: Sequence[str], cwd: str, session_token: str,
                     env: Mapping[str, str | None] | None = None, resume: bool = False,
                     mcp_command: Sequence[str] | None = None) -> dict[str, Any]:
        """Start the agent's ACP command and open its session (a new generation).

        ``session_token`` is the agent's peerwire session credential: its MCP
        server gets it as ``PEERWIRE_SESSION_ID`` (never written to the
        transcript). ``env`` overlays the app's environment for the agent (a
        ``None`` value removes a variable). ``resume`` loads the agent's known
        session (``session/load``) instead of starting one. ``mcp_command``
        launches the MCP server (default: this Python's ``-m peerwire mcp serve``).
        """
        if agent.provider != PROVIDER:
            raise PeerwireError(Code.INVALID_ARGUMENT, f"agent {agent.name!r} uses provider {agent.provider!r}")
        if agent.agent_id in self.owners:
            raise PeerwireError(Code.INVALID_ARGUMENT, f"agent {agent.name!r} already has an owner; detach it first")
        if resume and not agent.provider_session_id:
            raise PeerwireError(Code.INVALID_ARGUMENT, f"agent {agent.name!r} has no session to resume")
        generation = agent.generation + 1
        self.transcripts.mkdir(parents=True, exist_ok=True, mode=0o700)
        stem = self.transcripts / f"{agent.name}.g{generation}"
        try:
            client = await self.start_client(command=list(command), cwd=cwd, env=dict(env or {}),
                                             transcript_path=f"{stem}.acp.jsonl", stderr_path=f"{stem}.stderr.log",
                                             timeout=REQUEST_TIMEOUT_S)
        except (PeerError, OSError, TimeoutError) as exc:
            why = (f"no answer to initialize within {REQUEST_TIMEOUT_S:.0f}s" if isinstance(exc, TimeoutError)
                   else f"{type(exc).__name__}: {exc}")
            self.store.registry.update_agent(agent.agent_id, last_error=f"attach failed: {why}"[:500])
            raise PeerwireError(Code.APP_UNAVAILABLE, f"could not start the ACP agent of {agent.name}: {why}; "
                                f"see {stem}.stderr.log") from exc
        servers = [stdio_mcp_server(MCP_SERVER_NAME, list(mcp_command or DEFAULT_MCP_COMMAND),
                                    {"PEERWIRE_HOME": os.fspath(self.home), "PEERWIRE_SESSION_ID": session_token})]
        try:
            if resume:
                assert agent.provider_session_id is not None  # a resume without one was refused above
                if not ((client.initialize_result or {}).get("agentCapabilities") or {}).get("loadSession"):
                    raise PeerwireError(Code.UNSUPPORTED, f"{agent.name}'s ACP agent cannot load a session")
                await client.session_load(agent.provider_session_id, cwd, servers, timeout=REQUEST_TIMEOUT_S)
                session_id = agent.provider_session_id
            else:
                session_id = (await client.session_new(cwd, servers, timeout=REQUEST_TIMEOUT_S))["sessionId"]
        except PeerwireError as exc:
            await client.close()
            self.store.registry.update_agent(agent.agent_id, last_error=f"attach failed: {exc.message}"[:500])
            raise
        except Exception as exc:
            await client.close()
            why = "no answer within {:.0f}s".format(REQUEST_TIMEOUT_S) if isinstance(exc, TimeoutError) else str(exc)
            raise PeerwireError(Code.APP_UNAVAILABLE, f"the ACP agent of {agent.name} opened no session: {why}") from exc
        except BaseException:
            # Cancelled or interrupted: the agent's process goes with the attach, which stays cancelled.
            await client.close()
            raise
        owner = AcpOwner(agent.agent_id, agent.name, generation, session_id, client, cwd)
        self.owners[agent.agent_id] = owner
        self.store.registry.update_agent(agent.agent_id, generation=generation, provider_session_id=session_id,
                                         status="idle", last_error=None)
        # Updates before now (a loaded session's replayed history) belong to no turn of this generation.
        owner.watcher = asyncio.ensure_future(self._watch(owner, since=len(client.received)))
        log.info("attached %s: generation %d, ACP session %s", agent.name, generation, session_id)
        await self.dispatch(self.store.registry.agent(agent.agent_id))
        return owner.describe()

    async def detach(self, agent_id: str, *, reason: str = "owner detached") -> dict[str, Any]:
        owner = self.owners.pop(agent_id, None)
        if owner is None:
            raise PeerwireError(Code.NOT_ACTIVE, "that agent has no attached owner")
        await owner.client.close()
        for task in list(owner.conversations):
            await asyncio.gather(task, return_exceptions=True)  # each ends: the agent is gone
        if owner.watcher is not None:
            owner.watcher.cancel()
        async with owner.changed:
            owner.detached = True
            owner.changed.notify_all()
        self.store.registry.update_agent(owner.agent_id, status="offline")
        return owner.describe()

    async def close(self) -> None:
        for agent_id in list(self.owners):
            await self.detach(agent_id, reason="app stopping")

    def recover(self) -> None:
        """At start-up: publish captured outcomes of ACP agents, mark their lost observations uncertain."""
        for binding in self.store.bindings.find(state="captured"):
            agent = self.store.registry.agent(binding["agent_id"])
            if agent.provider == PROVIDER:
                self._publish(binding["binding_id"], binding["outcome"], agent)
        for binding in self.store.bindings.find(state="accepted"):
            if self.store.registry.agent(binding["agent_id"]).provider == PROVIDER:
                self._uncertain(binding["request_id"], "observation of the prompt was lost when the app stopped",
                                binding_id=binding["binding_id"])
        for agent in self.store.registry.agents():
            if agent.provider == PROVIDER and agent.status != "offline":
                self.store.registry.update_agent(agent.agent_id, status="offline")

    # -- provider interface ---------------------------------------------------------

    def in_context(self, recipient: AgentRow) -> bool:
        return False  # nothing enters an ACP conversation without a turn: waiters are woken at once

    async def deliver(self, recipient: AgentRow, record: dict[str, Any]) -> None:
        """No inject: the record waits in the mailbox for receive, or for the agent's next prompt."""
        owner = self.owners.get(recipient.agent_id)
        if owner is not None and record["record_id"] not in owner.deferred:
            owner.deferred.append(record["record_id"])
        return None

    async def dispatch(self, recipient: AgentRow) -> int:
        """Give pending tasks an opportunity: an idle agent gets the oldest in a prompt; a busy one keeps
        them until its turn ends (no steer). Returns how many prompts were sent."""
        owner = self.owners.get(recipient.agent_id)
        if owner is None:
            return 0  # pending until an owner attaches
        async with owner.lock:
            if owner.turn is not None or owner.client.exited is not None:
                return 0
            for request_id in self.store.mailbox.pending_tasks(recipient.agent_id):
                claim_id = self.store.mailbox.claim_for_dispatch(request_id)
                if claim_id is None:
                    continue  # receive exposed it first
                record = self.store.mailbox.interaction(self.store.mailbox.request(request_id)["task_interaction_id"])
                turn = self._new_turn(owner, "task", request_ids=(request_id,))
                turn.claims[request_id] = claim_id
                head, body = envelope.head(record), record["body"]
                return await self._prompt(owner, turn, [text_block(head), text_block(body)])
        return 0

    async def interrupt(self, target: AgentRow) -> dict[str, Any]:
        owner = self.owners.get(target.agent_id)
        turn = owner.turn if owner else None
        if owner is None or turn is None:
            raise no_active_turn(target, attached=owner is not None)
        try:
            await owner.client.session_cancel(owner.session_id)
        except PeerExited as exc:
            raise PeerwireError(Code.NOT_ACTIVE, f"{target.name}'s ACP agent (generation {owner.generation}) exited "
                                f"while its turn was cancelled (returncode {exc.returncode}); attach it again",
                                {"target": target.ref, "previous_status": "active", "turn_id": turn.turn_id,
                                 "stderr_tail": exc.stderr_tail[-10:]}) from None
        # What interrupt_agent returns, as its outputSchema allows: the cancel itself is in the ACP transcript.
        return {"previous_status": "active", "turn_id": turn.turn_id}

    async def spawn_child(self, parent: AgentRow, child: AgentRow, fork: str | int,
                          after_call: str | None = None) -> None:
        for request_id in self.store.mailbox.pending_tasks(child.agent_id):
            receipt = self.store.bindings.fail_request(
                request_id, f"{child.name} could not be started: an ACP agent has no collaboration children",
                code="spawn_failed")
            self.committed(receipt["recipient"]["agent_id"], receipt["interaction_id"])
        self.store.registry.update_agent(child.agent_id, status="failed",
                                         last_error="ACP agents have no collaboration children")

    # -- the operator -----------------------------------------------------------------

    async def prompt(self, agent: AgentRow, text: str) -> dict[str, Any]:
        """An operator's (human) message: a new turn on an idle agent; refused while it is in a turn."""
        owner = self._owner(agent)
        async with owner.lock:
            if owner.turn is not None:
                raise PeerwireError(Code.INVALID_ARGUMENT,
                                    f"{agent.name} is in turn {owner.turn.turn_id}; prompt it when it is idle")
            turn = self._new_turn(owner, "operator")
            if not await self._prompt(owner, turn, [text_block(text)]):
                raise PeerwireError(Code.NOT_ACTIVE, f"{agent.name}'s ACP agent exited before the prompt was sent")
        return {"turn_id": turn.turn_id, "thread_id": owner.session_id, "generation": owner.generation}

    async def await_turn(self, agent: AgentRow, turn_id: str, timeout_s: float) -> dict[str, Any]:
        """Wait until ``turn_id`` of the agent's current owner has completed (operator use)."""
        owner = self._owner(agent)
        try:
            async with asyncio.timeout(timeout_s), owner.changed:
                await owner.changed.wait_for(lambda: turn_id in owner.completed or owner.detached)
        except TimeoutError:
            raise PeerwireError(Code.NOT_ACTIVE, f"turn {turn_id} of {agent.name} did not complete within "
                                f"{timeout_s:.0f}s", {"turn_id": turn_id,
                                                      "active_turn": owner.turn.turn_id if owner.turn else None}
                                ) from None
        if turn_id not in owner.completed:
            raise PeerwireError(Code.NOT_ACTIVE, f"{agent.name}'s owner (generation {owner.generation}) was detached "
                                f"before turn {turn_id} completed", {"turn_id": turn_id})
        return owner.completed[turn_id]

    def describe(self) -> list[dict[str, Any]]:
        return [o.describe() for o in self.owners.values()]

    # -- turns ---------------------------------------------------------------------------

    def _new_turn(self, owner: AcpOwner, trigger: str, request_ids: tuple[str, ...] = ()) -> PromptTurn:
        return PromptTurn(str(uuid.uuid4()), owner.session_id, trigger, request_ids=request_ids)

    def _waiting_mail(self, owner: AcpOwner) -> tuple[list[str], list[dict[str, Any]]]:
        """Deferred records the agent has not seen yet (never received, never shown): ids and their blocks."""
        ids, blocks = [], []
        for record_id in owner.deferred:
            record = self.store.mailbox.interaction(record_id)
            if record["received_at"] is None and record["state"] in ("admitted", "published"):
                ids.append(record_id)
                blocks += [text_block(envelope.head(record)), text_block(record["body"])]
        owner.deferred.clear()
        return ids, blocks

    async def _prompt(self, owner: AcpOwner, turn: PromptTurn, blocks: list[dict[str, Any]]) -> int:
        """Send ``turn``'s prompt (the mail waiting for this turn first); 1 once written, 0 when it could not be.

        Called with the owner's lock held. The conversation (:meth:`_converse`)
        runs on in the background and settles what the prompt carried.
        """
        record_ids, mail = self._waiting_mail(owner)
        turn.record_ids = tuple(record_ids)
        turn.since = len(owner.client.received)
        owner.turn = turn
        sent, attempted = asyncio.Event(), asyncio.Event()
        conversation = asyncio.ensure_future(self._converse(owner, turn, [*mail, *blocks], sent, attempted))
        owner.conversations.add(conversation)
        conversation.add_done_callback(owner.conversations.discard)
        # The conversation sets ``attempted`` before it needs the lock this caller holds.
        waiters = {asyncio.ensure_future(sent.wait()), asyncio.ensure_future(attempted.wait())}
        _, pending = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        for waiter in pending:
            waiter.cancel()
        return 1 if sent.is_set() else 0

    async def _converse(self, owner: AcpOwner, turn: PromptTurn, blocks: list[dict[str, Any]],
                        sent: asyncio.Event, attempted: asyncio.Event) -> None:
        """Run one prompt to its answer, then settle what it carried and give pending tasks their turn."""
        answer: dict[str, Any] | None = None
        error: dict[str, Any] | None = None
        lost: str | None = None
        try:
            answer = await owner.client.session_prompt(owner.session_id, blocks, message_id=turn.turn_id, sent=sent)
        except JsonRpcError as exc:
            error = {"code": exc.code, "message": exc.message, "data": exc.data}
        except (PeerError, OSError) as exc:
            lost = f"the ACP agent went away before answering prompt {turn.turn_id} ({type(exc).__name__})"
        finally:
            attempted.set()
        async with owner.lock:
            if lost is None:
                self._admitted(owner, turn, "prompt_answer" if answer is not None else "prompt_error")
                self._settle(owner, turn, answer, error)
            else:
                for request_id in turn.request_ids:
                    self._uncertain(request_id, lost, binding_id=self._binding_of(request_id, turn.turn_id))
                if not turn.bound and sent.is_set():
                    for record_id in turn.record_ids:  # written, never shown to have arrived
                        self.store.mailbox.transition(record_id, Event.PROVIDER_UNCERTAIN, {"via": VIA, "reason": lost})
            turn.finished = True
            owner.turn = None
            status = (answer or {}).get("stopReason") if answer is not None else ("error" if error else "lost")
            async with owner.changed:
                owner.completed[turn.turn_id] = {"turn_id": turn.turn_id, "status": status}
                owner.changed.notify_all()
        if self.owners.get(owner.agent_id) is owner:
            self.store.registry.update_agent(owner.agent_id, status="idle" if lost is None else "offline")
            if lost is None:
                await self.dispatch(self.store.registry.agent(owner.agent_id))
            else:
                self.owners.pop(owner.agent_id, None)
                log.warning("ACP agent of %s exited", owner.name)

    def _admitted(self, owner: AcpOwner, turn: PromptTurn, by: str) -> None:
        """The agent took the prompt: bind its tasks and mark its mail visible (once, before any outcome)."""
        if turn.acknowledged_by is None:
            turn.acknowledged_by = by
        if turn.bound:
            return
        turn.bound = True
        self.store.registry.update_agent(owner.agent_id, status="active")
        agent = self.store.registry.agent(owner.agent_id)
        facts = {"session_id": owner.session_id, "prompt_message_id": turn.turn_id,
                 "acknowledged_by": turn.acknowledged_by, "path": "idle_prompt"}
        if turn.first_message_id:
            facts["message_id"] = turn.first_message_id
        for request_id in turn.request_ids:
            self.store.bindings.bind(request_id, turn.claims[request_id], agent, owner.generation, owner.session_id,
                                     turn.turn_id, via=VIA, detail=facts)
        for record_id in turn.record_ids:
            self.store.mailbox.transition(record_id, Event.PROVIDER_VISIBLE, {
                "via": VIA, "provider": PROVIDER, "degraded": False, "generation": owner.generation,
                "thread_id": owner.session_id, **{**facts, "path": "next_turn", "trigger": turn.trigger}})

    def _settle(self, owner: AcpOwner, turn: PromptTurn, answer: dict[str, Any] | None,
                error: dict[str, Any] | None) -> None:
        updates = [note.params.get("update") or {} for note in owner.client.received[turn.since:]
                   if note.method == "session/update" and note.params.get("sessionId") == owner.session_id]
        agent = self.store.registry.agent(owner.agent_id)
        outcome = outcome_of(turn, answer, error, updates, agent.name)
        for request_id in turn.request_ids:
            binding_id = self._binding_of(request_id, turn.turn_id)
            if binding_id is None:
                continue
            if outcome is None:
                self._uncertain(request_id, f"prompt {turn.turn_id} ended with stop reason "
                                f"{(answer or {}).get('stopReason')!r}, which no rule knows", binding_id=binding_id)
            elif self.store.bindings.capture_outcome(binding_id, outcome) == "captured":
                self._publish(binding_id, outcome, agent)

    def _binding_of(self, request_id: str, turn_id: str) -> str | None:
        for binding in self.store.bindings.find(state="accepted", turn_id=turn_id):
            if binding["request_id"] == request_id:
                return binding["binding_id"]
        return None

    def _publish(self, binding_id: str, outcome: dict[str, Any], agent: AgentRow) -> None:
        sender = agent if outcome["attributed_to_recipient"] else None
        receipt = self.store.bindings.publish_outcome(binding_id, sender, outcome["reply_status"], outcome["text"],
                                                      code=outcome.get("code"))
        if receipt is not None:
            self.committed(receipt["recipient"]["agent_id"], receipt["interaction_id"])

    def _uncertain(self, request_id: str, reason: str, *, binding_id: str | None = None) -> None:
        receipt = self.store.bindings.make_uncertain(request_id, reason, binding_id=binding_id)
        self.committed(receipt["recipient"]["agent_id"], receipt["interaction_id"])

    # -- observation -------------------------------------------------------------------------

    async def _watch(self, owner: AcpOwner, since: int) -> None:
        """Admit a prompt at the first update that shows its turn running."""
        try:
            async for note in owner.client.notifications(since=since):
                if note.method != "session/update" or note.params.get("sessionId") != owner.session_id:
                    continue
                turn = owner.turn
                if turn is None or turn.finished or note.after <= turn.since:
                    continue
                if turn.observe(note.params.get("update") or {}):
                    async with owner.lock:
                        if owner.turn is turn and not turn.finished:
                            self._admitted(owner, turn, turn.acknowledged_by or "session/update")
        except PeerExited:
            # A conversation in flight settles what it carried; an idle agent that exited is gone.
            if owner.turn is None and self.owners.get(owner.agent_id) is owner:
                del self.owners[owner.agent_id]
                self.store.registry.update_agent(owner.agent_id, status="offline")
                log.warning("ACP agent of %s exited", owner.name)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("watching %s failed", owner.name)

    def _owner(self, agent: AgentRow) -> AcpOwner:
        owner = self.owners.get(agent.agent_id)
        if owner is None:
            raise PeerwireError(Code.NOT_ACTIVE, f"{agent.name} has no attached owner",
                                {"previous_status": "offline"})
        return owner
