"""What the app does with each control-socket operation.

A tool operation runs as: authenticate the caller, validate the arguments
against the contract, one store transaction (plus its evidence), then wake the
recipient's waiters and hand the committed record to the provider adapter
(:mod:`.delivery`). The order is the point: nothing is delivered or signalled
before it is durable. The collaboration profile's tools are in :mod:`.collab_ops`.
"""

from __future__ import annotations

import asyncio
import hmac
import time
from typing import Any, Awaitable, Callable

from . import collab, contract, export
from .collab_ops import CollabOperations
from .contract_data import providers as known_providers
from .delivery import Delivery
from .errors import Code, PeerwireError
from .hub import PROVIDER_CONTEXT_AVAILABLE, require_present
from .limits import DEFAULT_RECEIVE_LIMIT, DEFAULT_RECEIVE_TIMEOUT_MS, DEFAULT_WAIT_TIMEOUT_MS
from .providers import RuntimeOwner, require_known
from .receipts import tool_receipt
from .registry_rules import AgentRow, validate_name
from .store import Call, Entry, Store

Handler = Callable[..., Awaitable[dict[str, Any]]]

OPERATOR_OPS = frozenset({"status", "register_agent", "agents", "set_agent", "revoke_sessions", "trace",
                          "attach_codex", "detach_codex", "prompt", "await_turn", "owners", "await_change",
                          "export"})
"""Control operations only the operator may run: they need the operator credential, never a session token."""

SEND_PIPELINE = frozenset({"send_message", "followup_task", "reply", "collab.send_message", "collab.followup_task"})
"""Operations that admit records: each request to them is an entry, admitted or rejected."""


class Operations:
    def __init__(self, store: Store, delivery: Delivery, operator: str | None = None):
        self.store = store
        self.operator = operator
        """The operator credential (:data:`OPERATOR_OPS` need it); ``None`` leaves them open (in-process use)."""
        self.delivery = delivery
        self.hub = delivery.hub
        self.providers = delivery.providers
        self._tools: dict[str, Handler] = {
            "send_message": self.send_message,
            "followup_task": self.followup_task,
            "receive_messages": self.receive_messages,
            "reply": self.reply,
            "wait_agent": self.wait_agent,
            "interrupt_agent": self.interrupt_agent,
            "list_agents": self.list_agents,
        }
        self._admin: dict[str, Handler] = {
            "status": self.status,
            "register_agent": self.register_agent,
            "agents": self.agents,
            "set_agent": self.set_agent,
            "revoke_sessions": self.revoke_sessions,
            "trace": self.trace,
            "whoami": self.whoami,
            "attach_codex": self.attach_codex,
            "detach_codex": self.detach_codex,
            "attach_acp": self.attach_acp,
            "detach_acp": self.detach_acp,
            "prompt": self.prompt,
            "await_turn": self.await_turn,
            "owners": self.owners,
            "await_change": self.await_change,
            "export": self.export,
        }
        self.sessions_epoch = 0
        """Incremented whenever session credentials are revoked: connections then check their caller again."""
        self._changed = asyncio.Event()
        store.database.on_commit.append(self._committed)
        self.collab = CollabOperations(store, delivery)
        self._collab = self.collab.handlers()

    async def call(self, op: str, args: dict[str, Any] | None, token: str | None, meta: dict | None,
                   operator: Any = None) -> dict:
        """A one-shot control operation: a tool by name (``collab.NAME`` for the collab profile) or an operator op.

        An operator op needs ``operator``, the operator credential: without it,
        with another value, or with only an agent's session ``token``, it is
        ``not_authorized``.
        """
        profile, _, tool = op.rpartition(".") if op.startswith("collab.") else ("messaging", "", op)
        if tool in (self._collab if profile == "collab" else self._tools):
            return await self.call_tool(profile, tool, args, meta, caller=lambda: self.store.registry.caller(token))
        if op in self._admin:
            if op in OPERATOR_OPS:
                self._require_operator(op, operator, token)
            return await self._admin[op](args or {}, token)
        raise PeerwireError(Code.INVALID_ARGUMENT, f"unknown operation {op!r}")

    def _require_operator(self, op: str, operator: Any, token: str | None) -> None:
        if self.operator is None:
            return
        if isinstance(operator, str) and hmac.compare_digest(operator.encode(), self.operator.encode()):
            return
        held = ("an agent's session token does not grant it" if token is not None and operator is None else
                "the credential given is not the operator's" if operator is not None else "none was given")
        raise PeerwireError(Code.NOT_AUTHORIZED,
                            f"{op} is an operator operation and needs the operator credential ({held}); the "
                            "operator's peerwire reads it from the home's operator.token")

    async def call_tool(self, profile: str, tool: Any, args: Any, meta: dict | None, *,
                        caller: Callable[[], AgentRow]) -> dict:
        """One tool call of ``profile`` by the session ``caller()`` names: arguments validated, defaults applied, run.

        A request to the send pipeline enters it before anything is checked (the
        caller included): admitted, its record's first stage is ``entered``;
        refused, it is recorded as a rejected request whose ``entry_id`` the
        error's details carry, so ``trace`` explains it.
        """
        handlers = self._collab if profile == "collab" else self._tools if profile == "messaging" else None
        if handlers is None or not isinstance(tool, str) or tool not in handlers:
            raise PeerwireError(Code.INVALID_ARGUMENT, f"no tool {tool!r} in profile {profile!r}")
        op = f"collab.{tool}" if profile == "collab" else tool
        if op not in SEND_PIPELINE:
            return await self._run_tool(profile, tool, args, meta or {}, caller)
        entry = Entry.begin(op, meta)
        try:
            return await self._run_tool(profile, tool, args, {**(meta or {}), "entry": entry}, caller)
        except PeerwireError as error:
            if error.code is not Code.STORAGE_UNAVAILABLE:  # a full disk could not record it either
                await self._rejected(entry, caller, args, error)
            raise

    async def _run_tool(self, profile: str, tool: str, args: Any, meta: dict, caller: Callable[[], AgentRow]) -> dict:
        holder = caller()
        who = self.collab.caller(holder, meta) if profile == "collab" else holder
        arguments = contract.validate_arguments(tool, args, profile)
        return await (self._collab if profile == "collab" else self._tools)[tool](who, arguments, meta)

    async def _rejected(self, entry: Entry, caller: Callable[[], AgentRow], args: Any, error: PeerwireError) -> None:
        try:
            caller_id: str | None = caller().agent_id
        except PeerwireError:
            caller_id = None
        try:
            await self.store.database.commit(self.store.mailbox.rejection_job(entry, caller_id, error, _summary(args)))
        except PeerwireError:
            return  # the refusal stands; only its record is missing
        error.details["entry_id"] = entry.entry_id

    # -- tools ------------------------------------------------------------------

    async def _retried(self, caller: AgentRow, call: Call | None) -> dict | None:
        """A retry's first receipt (nothing is admitted or delivered again), or None for a new call."""
        if not self.store.mailbox.knows_call(caller, call):
            return None
        assert call is not None
        return await self.store.database.commit(self.store.mailbox.retry_job(caller, call))

    async def send_message(self, caller: AgentRow, args: dict, meta: dict) -> dict:
        call = Call.of(meta, "send_message", args)
        if (prior := await self._retried(caller, call)) is not None:
            return prior
        recipient = self.store.registry.resolve(args["target"], strict=bool(args.get("strict") or meta.get("strict")))
        require_known(recipient.provider, self.providers)
        receipt = await self.store.database.commit(self.store.mailbox.information_job(
            caller, recipient, args["message"], receipt=tool_receipt(meta), run_id=meta.get("run_id"), call=call,
            entry=meta.get("entry")))
        self.delivery.after_commit(recipient, receipt["interaction_id"])
        return receipt

    async def followup_task(self, caller: AgentRow, args: dict, meta: dict) -> dict:
        call = Call.of(meta, "followup_task", args)
        if (prior := await self._retried(caller, call)) is not None:
            return prior
        recipient = self.store.registry.resolve(args["target"], strict=bool(args.get("strict") or meta.get("strict")))
        require_known(recipient.provider, self.providers)
        receipt = await self.store.database.commit(self.store.mailbox.task_job(
            caller, recipient, args["message"], receipt=tool_receipt(meta), run_id=meta.get("run_id"), call=call,
            entry=meta.get("entry")))
        self.delivery.task_admitted(recipient)
        return receipt

    async def reply(self, caller: AgentRow, args: dict, meta: dict) -> dict:
        call = Call.of(meta, "reply", args)
        if (prior := await self._retried(caller, call)) is not None:
            return prior
        receipt = await self.store.database.commit(self.store.mailbox.reply_job(
            caller, args["request_id"], args["status"], args["message"], receipt=tool_receipt(meta), call=call,
            entry=meta.get("entry")))
        recipient = self.store.registry.agent(receipt["recipient"]["agent_id"])
        self.delivery.after_commit(recipient, receipt["interaction_id"])
        return receipt

    async def receive_messages(self, caller: AgentRow, args: dict, meta: dict) -> dict:
        self.delivery.publish_captured()  # a turn's reply the store refused earlier is published before reading
        limit = args.get("limit", DEFAULT_RECEIVE_LIMIT)
        timeout_ms = args.get("timeout_ms", DEFAULT_RECEIVE_TIMEOUT_MS)
        deadline = time.monotonic() + timeout_ms / 1000
        ack = args.get("ack_cursor")
        woke_by: str | None = None
        with self.hub.subscribe(caller.agent_id) as sub:
            while True:
                require_present()  # a caller that has left claims nothing
                page = await self.store.database.commit(self.store.mailbox.receive_job(
                    caller, cursor=args.get("cursor"), ack_cursor=ack, limit=limit))
                ack = None  # acknowledged once; a wake re-reads without acknowledging again
                if page.records:
                    out = _page(page, timed_out=False)
                    if woke_by:
                        out["wake_reason"] = woke_by
                    return out
                if not await sub.wait(deadline - time.monotonic()):
                    return _page(page, timed_out=True)
                woke_by = sub.reason
                if woke_by == PROVIDER_CONTEXT_AVAILABLE:
                    # The record is already in the caller's conversation: return at once, without its
                    # body (no duplicate) and without acknowledging it; it stays readable from ``cursor``.
                    return {**_page(page, timed_out=False), "has_more": True, "wake_reason": woke_by}
                sub.rearm()

    async def wait_agent(self, caller: AgentRow, args: dict, meta: dict) -> dict:
        timeout_ms = args.get("timeout_ms", DEFAULT_WAIT_TIMEOUT_MS)
        with self.hub.subscribe(caller.agent_id) as sub:
            # Asked, not counted: whether anything waits is one probe of the mailbox index, and how much
            # waits a difference of two mailbox numbers, so a wait costs the same at any mailbox size.
            if self.store.mailbox.has_unacknowledged(caller.agent_id):
                return {"woke": True, "timed_out": False, "wake_reason": "unacknowledged_activity",
                        "pending": self.store.mailbox.unacknowledged(caller.agent_id)}
            if await sub.wait(timeout_ms / 1000):
                return {"woke": True, "timed_out": False, "wake_reason": sub.reason or "mailbox_activity",
                        "pending": self.store.mailbox.unacknowledged(caller.agent_id)}
            return {"woke": False, "timed_out": True, "wake_reason": "timeout", "pending": 0}

    async def interrupt_agent(self, caller: AgentRow, args: dict, meta: dict) -> dict:
        target = self.store.registry.resolve(args["target"])
        provider = require_known(target.provider, self.providers)
        result = await provider.interrupt(target)
        return {"target": target.ref, "state": "interrupt_requested", **result}

    async def list_agents(self, caller: AgentRow, args: dict, meta: dict) -> dict:
        agents = self.store.registry.peers(name_prefix=args.get("name_prefix") or "", provider=args.get("provider"),
                                           include_disabled=bool(args.get("include_disabled")))
        return {"agents": [a.public(caller.agent_id) for a in agents]}

    # -- operator operations (the operator credential is their authentication) ----

    async def status(self, args: dict, token: str | None) -> dict:
        database = self.store.database
        return {"ok": True, "node_id": database.node_id, "schema_version": database.schema_version,
                "providers": sorted(self.providers), "waiting": self.hub.waiting(),
                "subscribed": self.hub.subscribed(), "group_commit": database.group_stats,
                "losses": database.losses()}

    async def register_agent(self, args: dict, token: str | None) -> dict:
        name = validate_name(args.get("name"))
        aliases = [validate_name(a, "alias") for a in args.get("aliases") or []]
        provider = args.get("provider") or "manual"
        if not isinstance(provider, str) or not provider.isidentifier():
            raise PeerwireError(Code.INVALID_ARGUMENT, "provider must be a short identifier such as manual or codex")
        if args.get("collab_root"):
            collab.check_root_provider(provider)
        row, token_out = self.store.registry.register_agent(
            name, provider, aliases=aliases, provider_session_id=args.get("provider_session_id"),
            source=args.get("source") or "control", path="/root" if args.get("collab_root") else None,
        )
        out = {"agent": row.public(), "session_token": token_out}
        if provider not in self.providers:
            out["warning"] = (f"provider {provider!r} has no delivery adapter in this app "
                              f"(known: {', '.join(known_providers())}); sends to it fail with unknown_provider")
        return out

    async def agents(self, args: dict, token: str | None) -> dict:
        return {"agents": [
            {**a.public(), "identity_key": a.identity_key, "node_id": a.node_id, "source": a.source,
             "provider_session_id": a.provider_session_id, "created_at": a.created_at,
             "updated_at": a.updated_at, "last_error": a.last_error}
            for a in self.store.registry.agents()
        ]}

    async def set_agent(self, args: dict, token: str | None) -> dict:
        agent_id = args.get("agent_id")
        if not isinstance(agent_id, str):
            raise PeerwireError(Code.INVALID_ARGUMENT, "set_agent needs the agent_id to change")
        self.store.registry.agent(agent_id)
        fields = {k: bool(args[k]) for k in ("enabled", "sendable") if k in args}
        if not fields:
            raise PeerwireError(Code.INVALID_ARGUMENT, "set_agent changes enabled and/or sendable")
        row = self.store.registry.update_agent(agent_id, **fields)
        if fields.get("enabled"):
            self.delivery.task_admitted(row)  # what waited while it was disabled gets its opportunity now
        return {"agent": row.public()}

    async def revoke_sessions(self, args: dict, token: str | None) -> dict:
        """Revoke every session credential of an agent (its callers then get unknown_caller)."""
        agent = self._agent_arg(args)
        revoked = self.store.registry.revoke_sessions(agent.agent_id)
        self.sessions_epoch += 1
        return {"agent": agent.public(), "revoked": revoked}

    async def trace(self, args: dict, token: str | None) -> dict:
        ident = args.get("id")
        if not isinstance(ident, str) or not ident:
            raise PeerwireError(Code.INVALID_ARGUMENT, "trace needs an interaction_id (ix_…) or request_id (rq_…)")
        return self.store.trace(ident)

    async def export(self, args: dict, token: str | None) -> dict:
        """Everything the store recorded, in the versioned export format (``contracts/export.schema.json``)."""
        return export.of_store(self.store)

    async def whoami(self, args: dict, token: str | None) -> dict:
        return {"agent": self.store.registry.caller(token).public()}

    def _codex(self) -> RuntimeOwner:
        codex = self.providers.get("codex")
        if codex is None or not isinstance(codex, RuntimeOwner):
            raise PeerwireError(Code.UNKNOWN_PROVIDER, "this app runs no codex adapter")
        return codex

    def _runtime(self, agent: AgentRow) -> RuntimeOwner:
        """The runtime owner of ``agent``'s provider (an agent of no runtime provider: the codex adapter's
        refusal, as before)."""
        runtime = self.providers.get(agent.provider)
        return runtime if agent.provider != "codex" and isinstance(runtime, RuntimeOwner) else self._codex()

    def _acp(self) -> Any:
        acp = self.providers.get("acp")
        if acp is None or not isinstance(acp, RuntimeOwner):
            raise PeerwireError(Code.UNKNOWN_PROVIDER, "this app runs no acp adapter")
        return acp

    def _agent_arg(self, args: dict) -> AgentRow:
        agent_id = args.get("agent_id")
        if not isinstance(agent_id, str):
            raise PeerwireError(Code.INVALID_ARGUMENT, "this operation needs agent_id")
        return self.store.registry.agent(agent_id)

    async def attach_codex(self, args: dict, token: str | None) -> dict:
        """Start an agent's Codex owner (operator): codex, codex_home, cwd, env, resume, capabilities, and
        listen (a Unix socket path where an attached Codex TUI connects)."""
        if args.get("listen") is not None and not (isinstance(args["listen"], str) and args["listen"]):
            raise PeerwireError(Code.INVALID_ARGUMENT, "attach_codex listen must be a socket path")
        for key in ("codex", "codex_home", "cwd"):
            if not isinstance(args.get(key), str):
                raise PeerwireError(Code.INVALID_ARGUMENT, f"attach_codex needs {key}")
        capabilities = args.get("capabilities")
        if capabilities is not None and not (isinstance(capabilities, list)
                                             and all(isinstance(c, str) for c in capabilities)):
            raise PeerwireError(Code.INVALID_ARGUMENT, "attach_codex capabilities must be a list of names")
        children = args.get("child_mcp_servers", [])
        if not isinstance(children, list) or not all(isinstance(name, str) for name in children):
            raise PeerwireError(Code.INVALID_ARGUMENT, "attach_codex child_mcp_servers must be a list of names")
        return await self._codex().attach(self._agent_arg(args), codex=args["codex"],
                                          codex_home=args["codex_home"], cwd=args["cwd"],
                                          env=args.get("env") or {}, resume=bool(args.get("resume")),
                                          capabilities=capabilities, child_mcp_servers=children,
                                          **({"listen": args["listen"]} if args.get("listen") else {}))

    async def detach_codex(self, args: dict, token: str | None) -> dict:
        return await self._codex().detach(self._agent_arg(args).agent_id)

    async def attach_acp(self, args: dict, token: str | None) -> dict:
        """Start an ACP agent's owner (operator): command (its ACP command, a list), cwd, session_token (the
        agent's peerwire credential, for its MCP server), env (overlay; null removes), resume, mcp_command."""
        command, mcp_command, env = args.get("command"), args.get("mcp_command"), args.get("env") or {}
        if not (isinstance(command, list) and command and all(isinstance(c, str) and c for c in command)):
            raise PeerwireError(Code.INVALID_ARGUMENT, "attach_acp needs command, the agent's ACP command as a list")
        if mcp_command is not None and not (isinstance(mcp_command, list) and mcp_command
                                            and all(isinstance(c, str) and c for c in mcp_command)):
            raise PeerwireError(Code.INVALID_ARGUMENT, "attach_acp mcp_command must be a command as a list")
        for key in ("cwd", "session_token"):
            if not isinstance(args.get(key), str) or not args[key]:
                raise PeerwireError(Code.INVALID_ARGUMENT, f"attach_acp needs {key}")
        if not isinstance(env, dict) or not all(isinstance(k, str) and (v is None or isinstance(v, str))
                                                for k, v in env.items()):
            raise PeerwireError(Code.INVALID_ARGUMENT, "attach_acp env maps names to strings (or null to unset)")
        return await self._acp().attach(self._agent_arg(args), command=command, cwd=args["cwd"],
                                        session_token=args["session_token"], env=env,
                                        resume=bool(args.get("resume")), mcp_command=mcp_command)

    async def detach_acp(self, args: dict, token: str | None) -> dict:
        return await self._acp().detach(self._agent_arg(args).agent_id)

    async def prompt(self, args: dict, token: str | None) -> dict:
        """An operator's message to an agent: a new turn on its idle owner (for an agent of a collaboration
        tree, also the input of its active turn, which wakes its wait_agent)."""
        text = args.get("text")
        if not isinstance(text, str) or not text:
            raise PeerwireError(Code.INVALID_ARGUMENT, "prompt needs text")
        agent = self._agent_arg(args)
        result = await self._runtime(agent).prompt(agent, text)
        if agent.path:  # only the collaboration profile's wait_agent completes on user input
            self.delivery.user_input(agent)
        return result

    async def await_turn(self, args: dict, token: str | None) -> dict:
        """Wait for one turn of an attached agent to complete: turn_id, timeout_ms."""
        turn_id, timeout_ms = args.get("turn_id"), args.get("timeout_ms", DEFAULT_WAIT_TIMEOUT_MS)
        if not isinstance(turn_id, str) or not isinstance(timeout_ms, int) or not 0 <= timeout_ms <= 600_000:
            raise PeerwireError(Code.INVALID_ARGUMENT, "await_turn needs turn_id and timeout_ms (0-600000)")
        agent = self._agent_arg(args)
        return await self._runtime(agent).await_turn(agent, turn_id, timeout_ms / 1000)

    def _committed(self) -> None:
        # Wake everyone waiting on the current event; later waiters take a fresh one.
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def await_change(self, args: dict, token: str | None) -> dict:
        """Wait until the store has committed a change since ``mark`` (operator use).

        Returns the current ``mark`` at once when it differs from the one given (or
        none was given); otherwise waits up to ``timeout_ms`` for the next commit.
        Observers re-read what they watch after each return: this is a signal, not
        a diff. Marks restart with the app, and any different mark counts as a change.
        """
        timeout_ms = args.get("timeout_ms", 0)
        if not isinstance(timeout_ms, int) or not 0 <= timeout_ms <= 600_000:
            raise PeerwireError(Code.INVALID_ARGUMENT, "await_change takes timeout_ms from 0 to 600000")
        changed = self._changed  # subscribe before looking, so no commit slips between
        if args.get("mark") != self.store.database.commits:
            return {"mark": self.store.database.commits, "timed_out": False}
        try:
            await asyncio.wait_for(changed.wait(), timeout_ms / 1000)
        except TimeoutError:
            return {"mark": self.store.database.commits, "timed_out": True}
        return {"mark": self.store.database.commits, "timed_out": False}

    async def owners(self, args: dict, token: str | None) -> dict:
        return {"owners": [owner for provider in self.providers.values() if isinstance(provider, RuntimeOwner)
                           for owner in provider.describe()]}


def _summary(args: Any) -> dict[str, Any]:
    """What a rejected request asked for, without its body (which may be the very thing refused)."""
    if not isinstance(args, dict):
        return {"arguments": type(args).__name__}
    out: dict[str, Any] = {}
    for key in ("target", "request_id", "status"):
        if key in args:
            value = args[key]
            out[key] = value[:256] if isinstance(value, str) else repr(value)[:256]
    if isinstance(args.get("message"), str):
        out["bytes"] = len(args["message"].encode("utf-8", "surrogatepass"))
    return out


def _page(page: Any, *, timed_out: bool) -> dict[str, Any]:
    return {"records": page.records, "cursor": page.cursor, "has_more": page.has_more,
            "timed_out": timed_out, "new_work": page.new_work, "claims": page.claims}
