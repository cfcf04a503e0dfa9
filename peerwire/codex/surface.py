"""The part of the ``codex app-server`` protocol peerwire depends on, as data.

Every method, notification and server request that the adapter
(:mod:`peerwire.codex`) or the harness's evidence readers send or read is one
:class:`Use` here, with the fields involved:

* ``sends``: the ``params`` fields peerwire writes in a request, as dotted
  paths like ``reads`` (or, for a server request, the fields of the answer it
  sends back);
* ``reads``: dotted paths peerwire reads in a request's ``result`` or a
  notification's ``params``. A path walks through arrays transparently
  (``thread.turns.items.type`` is the type of every item of every turn) and
  through every variant of a union (``item.phase`` exists when some variant of
  ``item`` has it);
* ``values``: for a read path, the enum values peerwire branches on.

A Codex upgrade is judged against this table alone (``runner.py drift``): a
field that is not here cannot break peerwire, and one that is here must still
exist with a compatible type. A test compares the table with the string
literals of the modules listed in :data:`READERS`, so the table follows the
code rather than anyone's memory of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["request", "notification", "server_request"]

READERS = (
    "peerwire/codex/adapter.py",
    "peerwire/codex/app_server.py",
    "peerwire/codex/outcome.py",
    "peerwire/codex/readiness.py",
    "peerwire/stdio_peer.py",
    "peerwire/collab.py",
    "peerwire/collab_fork.py",
    "harness/acceptance/checks/collab.py",
    "harness/acceptance/checks/delivery.py",
    "harness/acceptance/checks/readings.py",
    "harness/acceptance/checks/tools.py",
    "harness/acceptance/checks/turns.py",
    "harness/report/sequence.py",
    "harness/codex/capability_probe.py",
)
"""Modules (relative to the project root) whose protocol use the table declares."""


@dataclass(frozen=True)
class Use:
    """One method peerwire uses and exactly the fields it touches."""

    method: str
    kind: Kind
    sends: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()
    values: dict[str, tuple[str, ...]] = field(default_factory=dict)
    why: str = ""

    def __hash__(self) -> int:
        return hash((self.method, self.kind))


_DECISION = ("decision",)

SURFACE: tuple[Use, ...] = (
    # -- requests ---------------------------------------------------------------------------
    Use("initialize", "request", sends=("clientInfo.name", "clientInfo.version", "capabilities.experimentalApi"),
        reads=("userAgent",),
        why="the handshake; userAgent carries the server's version"),
    Use("thread/start", "request", sends=("cwd", "developerInstructions", "model", "config"),
        reads=("thread.id", "thread.path"),
        why="an owner's new thread; a collaboration agent's thread with its role (a child's also with its "
            "parent's model, effort and MCP servers); the rollout a child's history is copied from"),
    Use("thread/resume", "request", sends=("threadId",), reads=("thread.id", "thread.path"),
        why="a new generation on the same thread; an attached TUI's thread, subscribed to (attached_tui)"),
    Use("mcpServerStatus/list", "request", sends=("threadId", "detail"), reads=("data",),
        why="an attached TUI's thread started its MCP servers before the owner subscribed (attached_tui)"),
    Use("thread/name/set", "request", sends=("threadId", "name"),
        why="an attached TUI's thread is written down so the owner can subscribe to it (attached_tui)"),
    Use("thread/fork", "request", sends=("threadId",), reads=("thread.id",),
        why="the capability probe forks a thread (fork)"),
    Use("thread/read", "request", sends=("threadId", "includeTurns"),
        reads=("thread.turns.items.type", "thread.turns.items.text", "thread.turns.items.content",
               "thread.turns.items.status", "thread.turns.items.result", "thread.turns.items.id",
               "thread.turns.items.tool", "thread.turns.items.arguments"),
        values={"thread.turns.items.type": ("userMessage", "agentMessage", "mcpToolCall")},
        why="a thread's turns read back (the capability probe's history_read check)"),
    Use("turn/start", "request",
        sends=("threadId", "input.type", "input.text", "clientUserMessageId", "turnTrigger", "parentTurnId"),
        reads=("turn.id",),
        why="a task or an operator prompt opens a turn on an idle owner"),
    Use("turn/steer", "request", sends=("threadId", "expectedTurnId", "input.type", "input.text",
                                        "clientUserMessageId"),
        reads=("turnId",), why="a task joins the active turn, fenced by expectedTurnId"),
    Use("turn/interrupt", "request", sends=("threadId", "turnId"), why="interrupt_agent"),
    Use("thread/inject_items", "request", sends=("threadId", "items"),
        why="information, replies and notices enter the history without a turn"),
    # -- notifications --------------------------------------------------------------------------
    Use("thread/started", "notification", reads=("thread.id",),
        why="the thread an attached TUI started, which the owner adopts (attached_tui)"),
    Use("turn/started", "notification", reads=("threadId", "turn.id"), why="the owner's active turn"),
    Use("item/completed", "notification",
        reads=("threadId", "turnId", "item.type", "item.id", "item.phase", "item.text"),
        values={"item.type": ("agentMessage", "mcpToolCall"), "item.phase": ("commentary", "final_answer")},
        why="the final answer of a turn; the app-server's view of an MCP call"),
    Use("turn/completed", "notification",
        reads=("threadId", "turn.id", "turn.status", "turn.items", "turn.error.message"),
        values={"turn.status": ("completed", "interrupted", "failed")},
        why="a turn's outcome becomes the task's reply"),
    Use("mcpServer/startupStatus/updated", "notification", reads=("threadId", "name", "status", "error"),
        values={"status": ("ready", "failed")},
        why="nothing is delivered into a thread before its MCP servers started; the probe's attachment check"),
    # -- server requests: how peerwire declines them ----------------------------------------------
    Use("item/commandExecution/requestApproval", "server_request", sends=_DECISION),
    Use("item/fileChange/requestApproval", "server_request", sends=_DECISION),
    Use("execCommandApproval", "server_request", sends=_DECISION),
    Use("applyPatchApproval", "server_request", sends=_DECISION),
    Use("mcpServer/elicitation/request", "server_request", sends=("action",)),
    Use("item/permissions/requestApproval", "server_request", sends=("permissions",)),
    Use("item/tool/call", "server_request", sends=("success", "contentItems")),
)


def use_of(method: str) -> Use:
    """The declared use of ``method``; KeyError when peerwire does not use it."""
    for use in SURFACE:
        if use.method == method:
            return use
    raise KeyError(method)
