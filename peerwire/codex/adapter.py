"""Automatic delivery into Codex agents through ``codex app-server``.

One owner per agent: the app attaches an agent by starting its app-server
(a new generation each time), starting or resuming its thread, and watching
``turn/started``, ``item/completed``, ``turn/completed`` and
``thread/status/changed`` to know whether a turn is active and which.

Tasks: claim for dispatch (the same durable claim receive uses), then an idle
owner gets ``turn/start`` and an active one ``turn/steer`` fenced by
``expectedTurnId``. The binding is persisted before the completion of that turn
is handled (the owner's lock orders the two). A stale-turn rejection releases
the claim for the next opportunity; any other failure makes the task uncertain
and it is never sent again. Information, replies and notices are appended with
``thread/inject_items`` and start no turn.

Capabilities: at attach the owner judges the version the app-server reports
against :mod:`peerwire.codex.capabilities` (narrowed to the ``capabilities``
the operator enabled, if given). What it lacks is never attempted: tasks wait
in the mailbox instead of being started or steered, information is left to
``receive_messages``, and operator requests fail with ``unsupported``.

Attached TUI (``listen``, capability ``attached_tui``): the owner's app-server
also listens on a Unix socket where a person's Codex TUI connects
(``codex --remote unix://SOCKET``). The owner then opens no thread of its own:
it adopts the one the TUI starts, and delivers nothing before it subscribed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Sequence

from .. import collab, collab_fork, envelope
from ..errors import Code, PeerwireError
from ..providers import Committed, ProviderResult, no_active_turn
from ..registry_rules import AgentRow
from ..store import Store
from .app_server import (AppServerClient, AppServerError, AppServerExited, AppServerSession, JsonRpcError,
                         Notification)
from .capabilities import Assessment, Capability, evaluate, version_from_user_agent
from .owner import Owner, OwnerSetup
from .publication import Publication
from .readiness import await_mcp_ready, configured_servers, core_servers, listed_ready

log = logging.getLogger("peerwire.codex")

REQUEST_TIMEOUT_S = 30.0
TUI_ADOPT_TIMEOUT_S = 120.0
ROLLOUT_CATCH_UP_S = 5.0
"""How long a spawn waits for the parent's rollout to record the spawn call (Codex writes it behind)."""
"""How long an owner with a listen socket waits for its TUI to start a thread."""
STALE_TURN_CODE = -32600


def is_stale_turn(error: JsonRpcError) -> bool:
    """A steer rejected because no turn, or another turn, is active: nothing was admitted."""
    text = error.message.lower()
    return error.code == STALE_TURN_CODE and ("active turn" in text or "expected" in text)


AGENT_MESSAGE_FORM = "agent_message"
USER_MESSAGE_FORM = "user_message"
"""How mail entered a collaboration agent's thread (evidence ``form``): a native agent message (followed by
``/plaintext`` or ``/encrypted``) or a user message. A task opens or joins a turn, whose input the pinned
protocol takes only as user input (text, images, skills, mentions), so tasks are always user messages."""

TASK_CONTEXT_NAME = "peerwire_task_delivery"
"""The name of the routing metadata a steer carries in ``additionalContext`` (where Codex takes it)."""


def inject_item(*parts: str) -> dict[str, Any]:
    """A raw Responses user message carrying ``parts`` (an envelope's head, then the literal body) into
    the thread's history."""
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": p} for p in parts]}


def task_input(head: str, body: str) -> list[dict[str, Any]]:
    """The ``turn/start`` input of a task: the structured task item (request, sender, how to answer) and
    the peer's literal text, as two parts of one user message (see :mod:`peerwire.envelope`)."""
    return [{"type": "text", "text": head}, {"type": "text", "text": body}]


def steer_request(head: str, body: str, assessment: Assessment) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(input, extra params) of the ``turn/steer`` that joins a task to the active turn.

    The input is the peer's literal text; the routing metadata goes apart, in
    ``additionalContext``, where the Codex version takes it (capability
    ``steer_context``). Otherwise it stays a separate part of the same input,
    as for ``turn/start``: never merged into the peer's text.
    """
    if assessment.allows(Capability.STEER_CONTEXT):
        return ([{"type": "text", "text": body}],
                {"additionalContext": [{"kind": "application", "name": TASK_CONTEXT_NAME, "value": head}]})
    return task_input(head, body), {}


class CodexProvider:
    name = "codex"
    pushes = True

    def __init__(self, store: Store, committed: Committed, transcripts: Path,
                 start_client: Callable[..., Awaitable[AppServerSession]] = AppServerClient.start):
        self.store = store
        self.committed = committed
        self.transcripts = transcripts
        # The transport: a real app-server, or a recorded exchange replayed in tests.
        self.start_client = start_client
        self.owners: dict[str, Owner] = {}
        self.publication = Publication(store, committed)
        self._adopting: dict[str, tuple[asyncio.Future, AppServerSession, dict[str, Any]]] = {}
        """Owners started with a listen socket, still waiting for their TUI's thread (see :meth:`attach`)."""

    @classmethod
    def in_process(cls, home: Path) -> "CodexProvider":
        """An adapter on a store of its own in ``home``, with no app around it (white-box tests and
        fixture recording drive it directly). Close its store (``provider.store.close()``) when done."""
        home.mkdir(parents=True, exist_ok=True)
        return cls(Store(home / "peerwire.db"), lambda *_: None, home / "codex")

    # -- attach and detach --------------------------------------------------------

    async def attach(self, agent: AgentRow, *, codex: str, codex_home: str, cwd: str,
                     env: dict[str, str] | None = None, resume: bool = False,
                     capabilities: Sequence[str] | None = None,
                     child_mcp_servers: Sequence[str] = (), listen: str | None = None) -> dict[str, Any]:
        """Start the agent's owner; resume its known thread when ``resume`` is set.

        ``capabilities``, when given, are the only ones delivery may use (those
        a live probe proved), on top of what the reported version allows. The
        root of a collaboration tree starts its thread with its role
        instructions; its children keep, of its other MCP servers, only
        ``child_mcp_servers``.

        ``listen`` (a Unix socket path; capability ``attached_tui``): the
        app-server also listens there, so a Codex TUI can attach to it
        (``codex --remote unix://PATH``). The owner then opens no thread: it
        waits for the thread the TUI starts, observes it (``thread/started``),
        subscribes to it and only then enables delivery. Until then the answer
        has ``thread_id`` None, the owner is not listed, and tasks wait in the
        mailbox; a TUI that starts no thread within :data:`TUI_ADOPT_TIMEOUT_S`
        leaves the agent offline with ``last_error`` saying so. With ``resume``
        it is refused: the TUI starts its own thread.
        """
        if agent.provider != "codex":
            raise PeerwireError(Code.INVALID_ARGUMENT, f"agent {agent.name!r} uses provider {agent.provider!r}")
        if listen is not None and resume:
            raise PeerwireError(Code.INVALID_ARGUMENT, "an attached TUI starts its own thread: listen cannot resume")
        if agent.agent_id in self.owners or agent.agent_id in self._adopting:
            raise PeerwireError(Code.INVALID_ARGUMENT, f"agent {agent.name!r} already has an owner; detach it first")
        generation = agent.generation + 1
        self.transcripts.mkdir(parents=True, exist_ok=True, mode=0o700)
        stem = self.transcripts / f"{agent.name}.g{generation}"
        child_env = {**os.environ, **(env or {})}
        # With a listen socket the owner talks to the app-server through the bridge (WebSocket on the socket).
        launch = ({"codex": [sys.executable, "-m", "peerwire.codex.listen_bridge", codex],
                   "args": ["--listen", f"unix://{listen}"]} if listen else {"codex": codex})
        try:
            client = await self.start_client(
                **launch, codex_home=codex_home, cwd=cwd, env=child_env,
                transcript_path=f"{stem}.appserver.jsonl", stderr_path=f"{stem}.stderr.log",
            )
        except (AppServerError, OSError, TimeoutError) as exc:
            self.store.registry.update_agent(agent.agent_id, last_error=f"attach failed: {exc}")
            raise PeerwireError(Code.APP_UNAVAILABLE,
                                f"could not start codex app-server for {agent.name}: {exc}") from exc
        servers = tuple(configured_servers(codex_home))
        try:
            assessment = assess(client, capabilities)
            if listen:
                _require(assessment, Capability.ATTACHED_TUI)
                awaiting = {"agent_id": agent.agent_id, "name": agent.name, "generation": generation,
                            "codex_version": assessment.version, "thread_id": None, "listen": listen,
                            "pid": client.pid, "awaiting": "the thread an attached TUI starts"}
                self._adopting[agent.agent_id] = (asyncio.ensure_future(
                    self._adopt(agent, client, generation, cwd, assessment, servers, codex_home, child_mcp_servers)),
                    client, awaiting)
                return awaiting
            since = len(client.received)
            if resume:
                _require(assessment, Capability.RESUME)
                if not agent.provider_session_id:
                    raise PeerwireError(Code.INVALID_ARGUMENT, f"agent {agent.name!r} has no thread to resume")
                result = await client.thread_resume(agent.provider_session_id, timeout=REQUEST_TIMEOUT_S)
            else:
                role = {"developerInstructions": collab_fork.role_instructions(agent.path)} if agent.path else {}
                result = await client.thread_start(cwd=cwd, extra=role, timeout=REQUEST_TIMEOUT_S)
            thread_id = result["thread"]["id"]
            await _tools_ready(client, assessment, thread_id, servers, since=since, agent=agent.name)
        except PeerwireError as exc:
            await client.close()
            self.store.registry.update_agent(agent.agent_id, last_error=f"attach failed: {exc.message}")
            raise
        except Exception as exc:
            await client.close()
            raise PeerwireError(Code.APP_UNAVAILABLE, f"codex could not open the thread of {agent.name}: {exc}") from exc
        except BaseException:
            # Cancelled or interrupted: the app-server goes with the attach, which stays cancelled.
            await client.close()
            raise
        return await self._enable(agent, client, generation, result["thread"], cwd, assessment, servers, codex_home,
                                  child_mcp_servers)

    async def _enable(self, agent: AgentRow, client: AppServerSession, generation: int, thread: dict[str, Any],
                      cwd: str, assessment: Assessment, servers: tuple[str, ...], codex_home: str,
                      child_mcp_servers: Sequence[str], since: int = 0) -> dict[str, Any]:
        """The owner's thread (as thread/start or thread/resume answered it) is ready: record it, watch it
        (from notification ``since``), and give pending tasks their first opportunity."""
        thread_id = thread["id"]
        owner = Owner(agent.agent_id, agent.name, generation, thread_id, client, OwnerSetup(
            cwd=cwd, capabilities=assessment, mcp_servers=servers, rollout=thread.get("path"),
            tree_servers=tuple(core_servers(codex_home)), child_servers=tuple(child_mcp_servers)))
        self.owners[agent.agent_id] = owner
        self.store.registry.update_agent(agent.agent_id, generation=generation, provider_session_id=thread_id,
                                         status="idle", last_error=None)
        owner.watcher = asyncio.ensure_future(self._watch(owner, since=since))
        log.info("attached %s: generation %d, thread %s", agent.name, generation, thread_id)
        await self.dispatch(self.store.registry.agent(agent.agent_id))
        return owner.describe()

    async def _adopt(self, agent: AgentRow, client: AppServerSession, generation: int, cwd: str,
                     assessment: Assessment, servers: tuple[str, ...], codex_home: str,
                     child_mcp_servers: Sequence[str]) -> None:
        """Observe the thread an attached TUI starts, subscribe to it, then enable delivery into it.

        Codex resumes only a thread it has written down; naming the thread
        (``thread/name/set``) does that before any turn, so the owner can
        subscribe (``thread/resume``) to the TUI's empty thread. Nothing is
        delivered before the subscription is confirmed and the thread's MCP
        servers are ready.
        """
        try:
            async with asyncio.timeout(TUI_ADOPT_TIMEOUT_S):
                started = await anext(n async for n in client.notifications() if n.method == "thread/started")
            thread_id = started.params["thread"]["id"]
            await client.thread_set_name(thread_id, agent.name, timeout=REQUEST_TIMEOUT_S)
            resumed = await client.thread_resume(thread_id, timeout=REQUEST_TIMEOUT_S)
            if resumed["thread"]["id"] != thread_id:
                raise AppServerError(f"thread/resume of {thread_id} answered thread {resumed['thread']['id']}")
            if servers and assessment.allows(Capability.MCP_STARTUP_STATUS):
                # The TUI's thread started its servers before the owner subscribed: some may have reported
                # already, to the TUI only.
                ready = await listed_ready(client, thread_id, list(servers), timeout=REQUEST_TIMEOUT_S)
                await _tools_ready(client, assessment, thread_id, [s for s in servers if s not in ready],
                                   since=started.after - 1, agent=agent.name)
        except (AppServerError, TimeoutError, KeyError, StopAsyncIteration, PeerwireError) as exc:
            why = exc.message if isinstance(exc, PeerwireError) else f"{type(exc).__name__}: {exc}"
            self.store.registry.update_agent(agent.agent_id, last_error=f"no attached TUI thread to adopt: {why}"[:500])
            await client.close()
            return
        finally:
            self._adopting.pop(agent.agent_id, None)
        await self._enable(self.store.registry.agent(agent.agent_id), client, generation, resumed["thread"], cwd,
                           assessment, servers, codex_home, child_mcp_servers, since=started.after)

    async def detach(self, agent_id: str, *, reason: str = "owner detached") -> dict[str, Any]:
        if agent_id in self._adopting:  # its TUI never started a thread: nothing was delivered
            adopting, client, awaiting = self._adopting.pop(agent_id)
            adopting.cancel()
            await client.close()
            return {**awaiting, "awaiting": None, "detached": "before its TUI started a thread"}
        owner = self.owners.pop(agent_id, None)
        if owner is None:
            raise PeerwireError(Code.NOT_ACTIVE, "that agent has no attached owner")
        if not owner.setup.shared:
            # Threads hosted in this app-server (collaboration children) go with it.
            for other in [o for o in self.owners.values() if o.client is owner.client]:
                await self.detach(other.agent_id, reason=reason)
            await owner.client.close()
        if owner.watcher is not None:
            owner.watcher.cancel()
        if owner.turn_limit is not None:
            owner.turn_limit.cancel()
        async with owner.changed:
            if not owner.turns.over:
                owner.turns.detach()
            owner.changed.notify_all()
        self._owner_gone(owner, reason)
        return owner.describe()

    async def close(self) -> None:
        for agent_id in list(self._adopting):
            await self.detach(agent_id, reason="app stopping")
        for agent_id in list(self.owners):
            if agent_id in self.owners:
                await self.detach(agent_id, reason="app stopping")

    # -- collaboration children ----------------------------------------------------------

    async def spawn_child(self, parent: AgentRow, child: AgentRow, fork: str | int,
                          after_call: str | None = None) -> None:
        """Start a child as a new thread in its tree's app-server and give it its first task.

        The thread starts with the child's role instructions, the model and
        reasoning effort of the parent's latest turn, and the parent's tools
        but its other MCP servers (:func:`peerwire.collab_fork.child_settings`).
        ``fork``: ``none`` gives it no history; ``all`` or N appends the
        parent's history, or its latest N user turns, read from the parent's
        rollout and cleaned (:func:`peerwire.collab_fork.fork_history`).
        """
        parent_owner = self.owners.get(parent.agent_id)
        if parent_owner is None:
            self.store.registry.update_agent(
                child.agent_id, last_error="its parent has no live owner; it starts when one attaches")
            return
        client, setup = parent_owner.client, parent_owner.setup
        kept = tuple(s for s in setup.mcp_servers if s in setup.tree_servers or s in setup.child_servers)
        try:
            if fork != "none":
                _require(setup.capabilities, Capability.INJECT)
            records = await _rollout_through(setup.rollout, after_call if fork != "none" else None)
            settings = collab_fork.child_settings(child.path,  # type: ignore[arg-type]  # a spawned child has a path
                                                  collab_fork.latest_settings(records),
                                                  setup.mcp_servers, setup.tree_servers, setup.child_servers)
            since = len(client.received)
            result = await client.thread_start(cwd=setup.cwd, extra=settings, timeout=REQUEST_TIMEOUT_S)
            items = collab_fork.fork_history(records, fork, until_call=after_call)
            if items:
                await client.thread_inject_items(result["thread"]["id"], items, timeout=REQUEST_TIMEOUT_S)
            await _tools_ready(client, setup.capabilities, result["thread"]["id"], kept, since=since,
                               agent=child.name)
        except (AppServerError, TimeoutError, PeerwireError) as exc:
            # Nothing was submitted to the child: its first task fails, attributed to peerwire.
            self.store.registry.update_agent(child.agent_id, status="failed", last_error=f"spawn failed: {exc}")
            for request_id in self.store.mailbox.pending_tasks(child.agent_id):
                receipt = self.store.bindings.fail_request(request_id, f"{child.name} could not be started: {exc}",
                                                           code="spawn_failed")
                self.committed(receipt["recipient"]["agent_id"], receipt["interaction_id"])
            return
        thread_id = result["thread"]["id"]
        owner = Owner(child.agent_id, child.name, 1, thread_id, client, OwnerSetup(
            cwd=setup.cwd, shared=True, capabilities=setup.capabilities, mcp_servers=kept,
            rollout=result["thread"].get("path"), tree_servers=setup.tree_servers,
            child_servers=setup.child_servers))
        self.owners[child.agent_id] = owner
        self.store.registry.update_agent(child.agent_id, generation=1, provider_session_id=thread_id, status="idle")
        owner.watcher = asyncio.ensure_future(self._watch(owner, since=len(client.received)))
        log.info("spawned %s: thread %s (fork %s)", child.name, thread_id, fork)
        await self.dispatch(self.store.registry.agent(child.agent_id))

    def _limit_turn(self, owner: Owner, turn_id: str) -> None:
        """A child's turn may run collab.CHILD_TURN_LIMIT_S; then it is interrupted."""
        if owner.turn_limit is not None:
            owner.turn_limit.cancel()

        def expire() -> None:
            if owner.active_turn == turn_id:
                log.warning("%s: turn %s hit the %.0fs limit", owner.name, turn_id, collab.CHILD_TURN_LIMIT_S)
                asyncio.ensure_future(owner.client.turn_interrupt(owner.thread_id, turn_id))

        owner.turn_limit = asyncio.get_running_loop().call_later(collab.CHILD_TURN_LIMIT_S, expire)

    def _owner_gone(self, owner: Owner, reason: str) -> None:
        """Turns in flight can no longer be observed: their tasks become uncertain."""
        self.publication.owner_gone(owner.agent_id, owner.generation, reason)
        self.store.registry.update_agent(owner.agent_id, status="offline")

    def recover(self) -> None:
        """At startup: publish captured outcomes, mark lost observations uncertain."""
        self.publication.recover()
        for agent in self.store.registry.agents():
            if agent.provider == "codex" and agent.status != "offline":
                self.store.registry.update_agent(agent.agent_id, status="offline")

    # -- turns -------------------------------------------------------------------------

    async def prompt(self, agent: AgentRow, text: str) -> dict[str, Any]:
        """An operator's (human) message: starts a turn on an idle owner.

        An agent of a collaboration tree in a turn takes it as new input of that
        turn (a steer fenced by its id; ``steered`` true), as a person typing
        into a running conversation does; any other agent is refused while busy.
        """
        owner = self._owner(agent)
        _require(owner.setup.capabilities, Capability.IDLE_START)
        async with owner.lock:
            if owner.active_turn is not None and agent.path:
                _require(owner.setup.capabilities, Capability.STEER)
                turn_id = owner.active_turn
                try:
                    await owner.client.turn_steer(owner.thread_id, turn_id, text, timeout=REQUEST_TIMEOUT_S)
                except JsonRpcError as exc:
                    raise PeerwireError(Code.NOT_ACTIVE, f"{agent.name}'s turn {turn_id} did not take the input "
                                        f"({exc.message}); prompt again", {"turn_id": turn_id}) from None
                except AppServerExited as exc:
                    raise _exited(agent, owner, "the prompt was given", exc) from None
                return {"turn_id": turn_id, "thread_id": owner.thread_id, "generation": owner.generation,
                        "steered": True}
            if owner.active_turn is not None:
                raise PeerwireError(Code.INVALID_ARGUMENT,
                                    f"{agent.name} is in turn {owner.active_turn}; prompt it when it is idle")
            try:
                result = await owner.client.turn_start(owner.thread_id, text, timeout=REQUEST_TIMEOUT_S,
                                                       extra={"turnTrigger": "operator"})
            except AppServerExited as exc:
                raise _exited(agent, owner, "the prompt was given", exc) from None
            turn_id = result["turn"]["id"]
            _accepted_turn(owner, turn_id)
        return {"turn_id": turn_id, "thread_id": owner.thread_id, "generation": owner.generation}

    def in_context(self, recipient: AgentRow) -> bool:
        owner = self.owners.get(recipient.agent_id)
        return owner is not None and owner.client.exited is None

    async def dispatch(self, recipient: AgentRow) -> int:
        owner = self.owners.get(recipient.agent_id)
        if owner is None:
            return 0  # pending until an owner attaches
        if not self.store.registry.agent(recipient.agent_id).enabled:
            return 0  # disabled: its tasks wait in the mailbox until it is enabled again
        accepted = 0
        async with owner.lock:
            needed = Capability.IDLE_START if owner.active_turn is None else Capability.STEER
            if not owner.setup.capabilities.allows(needed):
                # Never attempted: the tasks stay pending (receive can take them) until a turn can carry them.
                if self.store.mailbox.has_pending_tasks(recipient.agent_id):
                    self.store.registry.update_agent(recipient.agent_id,
                                                     last_error=owner.setup.capabilities.refusal(needed))
                return 0
            for request_id in self.store.mailbox.pending_tasks(recipient.agent_id):
                if owner.client.exited is not None:
                    break
                claim_id = self.store.mailbox.claim_for_dispatch(request_id)
                if claim_id is None:
                    continue  # receive exposed it first
                accepted += await self._submit(owner, recipient, request_id, claim_id)
        return accepted

    async def _submit(self, owner: Owner, recipient: AgentRow, request_id: str, claim_id: str) -> bool:
        """Start or steer a turn with the claimed task; True when Codex accepted it into a turn."""
        req = self.store.mailbox.request(request_id)
        record = self.store.mailbox.interaction(req["task_interaction_id"])
        head, body = self._envelope(record)
        steering = owner.active_turn
        try:
            if steering is None:
                extra = {"clientUserMessageId": request_id, "turnTrigger": "peerwire_task"}
                parent = (record.get("tool_receipt") or {}).get("turn_id")
                if parent:
                    extra["parentTurnId"] = parent
                result = await owner.client.turn_start(owner.thread_id, task_input(head, body),
                                                       extra=_accepted(owner, "turn/start", extra),
                                                       timeout=REQUEST_TIMEOUT_S)
                turn_id = result["turn"]["id"]
                _accepted_turn(owner, turn_id)
            else:
                steer_input, context = steer_request(head, body, owner.setup.capabilities)
                result = await owner.client.turn_steer(owner.thread_id, steering, steer_input,
                                                       extra={**_accepted(owner, "turn/steer",
                                                                          {"clientUserMessageId": request_id}),
                                                              **context},
                                                       timeout=REQUEST_TIMEOUT_S)
                turn_id = result["turnId"]
        except JsonRpcError as exc:
            if steering is not None and is_stale_turn(exc):
                self.store.mailbox.release_claim(request_id, f"stale turn {steering}: {exc.message}")
                return False  # nothing admitted; the next opportunity dispatches it again
            method = "turn/steer" if steering else "turn/start"
            self.publication.uncertain(request_id, f"{method} error {exc.code}: {exc.message}")
            return False
        except (AppServerExited, TimeoutError, ConnectionError) as exc:
            self.publication.uncertain(request_id, f"no acknowledgement from codex ({type(exc).__name__})")
            return False
        self.store.bindings.bind(request_id, claim_id, recipient, owner.generation, owner.thread_id, turn_id,
                                 via="turn/steer" if steering else "turn/start")
        return True

    async def interrupt(self, target: AgentRow) -> dict[str, Any]:
        owner = self.owners.get(target.agent_id)
        turn_id = owner.active_turn if owner else None
        if owner is None or turn_id is None:
            raise no_active_turn(target, attached=owner is not None)
        _require(owner.setup.capabilities, Capability.INTERRUPT)
        # turn/start answers before Codex runs the turn, and until turn/started it refuses an interrupt
        # ("no active turn"): wait for the turn to start (or end), bounded.
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT_S), owner.changed:
                await owner.changed.wait_for(lambda: not owner.turns.waits_to_start(turn_id))
        except TimeoutError:
            pass  # ask anyway: Codex's answer says what it makes of the turn
        try:
            await owner.client.turn_interrupt(owner.thread_id, turn_id, timeout=REQUEST_TIMEOUT_S)
        except JsonRpcError as exc:
            raise PeerwireError(Code.NOT_ACTIVE, f"codex refused to interrupt turn {turn_id}: {exc.message}",
                                {"target": target.ref, "previous_status": "active", "turn_id": turn_id}) from None
        except AppServerExited as exc:
            raise _exited(target, owner, f"turn {turn_id} was interrupted", exc, target=target.ref,
                          previous_status="active", turn_id=turn_id) from None
        return {"previous_status": "active", "turn_id": turn_id}

    # -- information, replies, notices ------------------------------------------------------

    async def deliver(self, recipient: AgentRow, record: dict[str, Any]) -> ProviderResult | None:
        owner = self.owners.get(recipient.agent_id)
        if owner is None or not self.store.registry.agent(recipient.agent_id).enabled:
            return None  # it stays in the mailbox for receive (a disabled agent's runtime gets nothing)
        if not owner.setup.capabilities.allows(Capability.INJECT):
            # Never attempted: receive_messages still returns it.
            self.store.registry.update_agent(recipient.agent_id,
                                             last_error=owner.setup.capabilities.refusal(Capability.INJECT))
            return None
        where = {"thread_id": owner.thread_id, "generation": owner.generation, "active_turn": owner.active_turn}
        item, form = self._mail_item(owner, recipient, record)
        if form:
            where["form"] = form
        try:
            await owner.client.thread_inject_items(owner.thread_id, [item], timeout=REQUEST_TIMEOUT_S)
        except TimeoutError:
            # The request was written; its acknowledgement never came. That proves a start, not a delivery.
            result = ProviderResult(self.name, "thread/inject_items", accepted=True, degraded=True, evidence={
                **where, "unverified": f"no acknowledgement within {REQUEST_TIMEOUT_S:.0f}s"})
        except AppServerError as exc:
            result = ProviderResult(self.name, "thread/inject_items", accepted=False, error=str(exc)[:500])
        else:
            result = ProviderResult(self.name, "thread/inject_items", accepted=True, evidence=where)
        self.store.mailbox.transition(record["record_id"], result.event, result.detail())
        return result

    # -- observation -------------------------------------------------------------------------

    async def _watch(self, owner: Owner, since: int = 0) -> None:
        """Observe the owner's thread until its app-server exits. A notification whose handling fails (the
        store refusing a write) is logged and costs only what it was writing: the watch goes on."""
        try:
            async for note in owner.client.notifications(since=since):
                if note.params.get("threadId") not in (None, owner.thread_id):
                    continue
                try:
                    await self._observe(owner, note)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("%s: handling %s failed; still watching", owner.name, note.method)
        except AppServerExited:
            if self.owners.get(owner.agent_id) is owner:
                del self.owners[owner.agent_id]
                log.warning("codex app-server of %s exited", owner.name)
                async with owner.changed:
                    owner.turns.exit()  # waits for its turns end now: they can no longer end
                    owner.changed.notify_all()
                self._owner_gone(owner, "codex app-server exited")

    async def _observe(self, owner: Owner, note: Notification) -> None:
        params = note.params
        ended = None
        async with owner.lock:
            if note.method == "turn/started":
                owner.turns.started(params["turn"]["id"])
                if owner.setup.shared:
                    self._limit_turn(owner, params["turn"]["id"])
                self._status(owner, "active")
            elif note.method == "item/completed":
                item = params.get("item") or {}
                if item.get("type") == "agentMessage":
                    owner.items[params.get("turnId", "")].append(item)
            elif note.method == "turn/completed":
                ended = params["turn"]
                if owner.turns.ended(ended["id"]) and owner.turn_limit is not None:
                    owner.turn_limit.cancel()
                self._status(owner, "idle")
                items = owner.items.pop(ended["id"], []) or list(ended.get("items") or [])
                try:
                    self.publication.turn_ended(self.store.registry.agent(owner.agent_id), ended, items)
                except Exception:  # what it could not record is owed or uncertain at start-up; the turn ended
                    log.exception("%s: the outcome of turn %s was not recorded", owner.name, ended["id"])
        if note.method == "turn/started":
            async with owner.changed:
                owner.changed.notify_all()
        if ended is not None:
            async with owner.changed:
                owner.completed[ended["id"]] = {"turn_id": ended["id"], "status": ended.get("status")}
                owner.changed.notify_all()
            await self.dispatch(self.store.registry.agent(owner.agent_id))

    def _status(self, owner: Owner, status: str) -> None:
        """Record the agent's status; a store that refuses it now is told again at the next change."""
        try:
            self.store.registry.update_agent(owner.agent_id, status=status)
        except PeerwireError as exc:
            log.error("%s: status %s not recorded: %s", owner.name, status, exc.message)

    def publish_captured(self) -> None:
        """Publish the turn outcomes the store refused earlier (see :mod:`.publication`)."""
        self.publication.pay()

    async def await_turn(self, agent: AgentRow, turn_id: str, timeout_s: float) -> dict[str, Any]:
        """Wait until ``turn_id`` of the agent's current owner has completed (operator use)."""
        owner = self._owner(agent)
        try:
            async with asyncio.timeout(timeout_s):
                async with owner.changed:
                    await owner.changed.wait_for(lambda: turn_id in owner.completed or owner.turns.over)
        except TimeoutError:
            raise PeerwireError(Code.NOT_ACTIVE, f"turn {turn_id} of {agent.name} did not complete within "
                                f"{timeout_s:.0f}s", {"turn_id": turn_id, "active_turn": owner.active_turn}) from None
        if turn_id not in owner.completed:
            raise PeerwireError(Code.NOT_ACTIVE, f"{agent.name}'s owner (generation {owner.generation}) was detached "
                                f"before turn {turn_id} completed", {"turn_id": turn_id})
        return owner.completed[turn_id]

    def _envelope(self, record: dict[str, Any]) -> tuple[str, str]:
        """(head, literal body) of a record's envelope: the collaboration form (paths) between agents of a
        tree. Joined by a line break they are the rendered envelope."""
        recipient = self.store.registry.agent(record["recipient"]["agent_id"])
        if recipient.path:
            return (collab.head(envelope.MESSAGE_TYPES[record["kind"]], recipient.path, self._tree_sender(record)),
                    record["body"])
        return envelope.head(record), record["body"]

    def _mail_item(self, owner: Owner, recipient: AgentRow, record: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """The item that injects ``record`` and, for an agent of a collaboration tree, the form it takes.

        Mail between agents of a tree is a native agent message (author and
        recipient paths, the envelope) where the Codex version takes one
        (capability ``agent_message``); otherwise, and outside a tree, a user
        message. Its body is ``encrypted_content`` only when the sending call's
        raw ``encrypted_function_args`` reached the core (``encrypted_call_args``)
        and say so (:func:`peerwire.collab.message_encryption`).
        """
        head, body = self._envelope(record)
        if not recipient.path:
            return inject_item(head, body), ""
        if not owner.setup.capabilities.allows(Capability.AGENT_MESSAGE):
            return inject_item(head, body), USER_MESSAGE_FORM
        call = (record.get("tool_receipt") or {}).get("function_call")
        encryption = (collab.message_encryption(call) if isinstance(call, dict)
                      and owner.setup.capabilities.allows(Capability.ENCRYPTED_CALL_ARGS) else collab.PLAINTEXT)
        item = collab.agent_message(self._tree_sender(record), recipient.path, head, body, encryption)
        return item, f"{AGENT_MESSAGE_FORM}/{encryption}"

    def _tree_sender(self, record: dict[str, Any]) -> str:
        """The path a collaboration envelope names as Sender. A turn's outcome that peerwire wrote (a failed
        or interrupted child turn) comes from the child whose turn it was: its parent hears of each child
        turn, finished or failed, from that child's path (the body says peerwire observed the failure)."""
        sender_id = record["sender"]["agent_id"]
        if sender_id is None and record.get("request_id"):
            sender_id = self.store.mailbox.request(record["request_id"])["recipient_id"]
        if sender_id is None:
            return record["sender"]["name"] or "peerwire"
        return self.store.registry.agent(sender_id).path or record["sender"]["name"]

    def _owner(self, agent: AgentRow) -> Owner:
        owner = self.owners.get(agent.agent_id)
        if owner is None:
            raise PeerwireError(Code.NOT_ACTIVE, f"{agent.name} has no attached owner",
                                {"previous_status": "offline"})
        return owner

    def describe(self) -> list[dict[str, Any]]:
        return [o.describe() for o in self.owners.values()]


def assess(client: AppServerSession, enabled: Sequence[str] | None = None) -> Assessment:
    """What an owner's Codex may be asked to do: its reported version's capabilities, within ``enabled``.

    The version comes from the ``initialize`` answer's userAgent; a transport
    that reports none (a replayed exchange) is not gated by version. Raises
    PeerwireError ``invalid_argument`` for an unknown capability name.
    """
    version = version_from_user_agent((client.initialize_result or {}).get("userAgent"))
    if version is None:
        log.warning("codex app-server reported no version; its capabilities are not checked")
    assessment = evaluate(version) if version is not None else Assessment.unchecked()
    if enabled is None:
        return assessment
    try:
        return assessment.restricted_to(enabled, "not enabled: the live capability probe did not prove it")
    except ValueError as exc:
        raise PeerwireError(Code.INVALID_ARGUMENT, str(exc)) from None


async def _tools_ready(client: AppServerSession, assessment: Assessment, thread_id: str, servers: Sequence[str], *,
                       since: int, agent: str) -> None:
    """Hold a new thread's first input until its MCP servers are ready (see :mod:`.readiness`); a Codex
    that does not report their startup is given input at once, as before."""
    if servers and assessment.allows(Capability.MCP_STARTUP_STATUS):
        await await_mcp_ready(client, thread_id, list(servers), since=since, agent=agent)


async def _rollout_through(path: str | None, call_id: str | None) -> list[dict[str, Any]]:
    """The rollout's records once they reach the function call ``call_id`` (the parent's spawn call).

    Codex writes a rollout behind the conversation, from a queue: read the moment the spawn call
    arrives, the file may still lack the call and the items before it. The file has no event to wait
    on, so it is read again, bounded by :data:`ROLLOUT_CATCH_UP_S`; past that (or with no call id to
    look for) the child inherits what is written.
    """
    deadline = time.monotonic() + ROLLOUT_CATCH_UP_S
    while True:
        records = _rollout_records(path)
        if call_id is None or time.monotonic() >= deadline or any(
                (r.get("payload") or {}).get("call_id") == call_id for r in records):
            return records
        await asyncio.sleep(0.02)


def _rollout_records(path: str | None) -> list[dict[str, Any]]:
    """The records of a thread's rollout file; none when Codex named no file or it is not there yet (a thread
    whose first turn has not run has none). A line cut short by a write in progress is skipped."""
    if not path:
        return []
    try:
        lines = Path(path).read_text("utf-8").splitlines()
    except OSError:
        return []
    records = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def _exited(agent: AgentRow, owner: Owner, during: str, exc: AppServerExited, **details: Any) -> PeerwireError:
    """An owner's app-server that went away under an operation: the agent is not active, which is no bug of
    the core's (that would be ``internal``)."""
    return PeerwireError(Code.NOT_ACTIVE, f"{agent.name}'s owner (generation {owner.generation}) exited while "
                         f"{during} (codex app-server returncode {exc.returncode}); attach it again",
                         {**details, "generation": owner.generation, "stderr_tail": exc.stderr_tail[-10:]})


def _accepted_turn(owner: Owner, turn_id: str) -> None:
    """turn/start answered with ``turn_id``. The owner's lock held meanwhile the turn's notifications back, so
    it has neither started nor ended yet in the owner's eyes, unless it completed in an earlier generation of
    this thread's notifications (an id already completed is not waited for again)."""
    if turn_id not in owner.completed:
        owner.turns.accepted(turn_id)


def _require(assessment: Assessment, capability: Capability) -> None:
    if not assessment.allows(capability):
        raise PeerwireError(Code.UNSUPPORTED, assessment.refusal(capability),
                            {"capability": capability.value, "codex_version": assessment.version})


def _accepted(owner: Owner, method: str, extra: dict[str, Any]) -> dict[str, Any]:
    """The optional attribution fields this owner's Codex knows; the others are left out."""
    return {k: v for k, v in extra.items() if owner.setup.capabilities.accepts_field(method, k)}
