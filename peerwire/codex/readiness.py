"""An owner's thread is ready for input once Codex reports its MCP servers started.

Codex starts a thread's MCP servers after ``thread/start`` (or ``thread/resume``)
has answered, and a model request made before a server is ready is offered
no tools from it: a model that names such a tool gets "unsupported call" and
the turn goes nowhere. So the adapter gives an owner no input (no prompt, no
task) until every MCP server configured in its ``CODEX_HOME`` has reported
``mcpServer/startupStatus/updated`` with ``ready`` for that thread. A server
that reports ``failed`` or ``cancelled``, or stays silent past the bound,
fails the attach with an error that names the server.
"""

from __future__ import annotations

import asyncio
import tomllib
from pathlib import Path
from typing import Any, Protocol, cast

from ..errors import Code, PeerwireError
from ..home import SESSION_ENV
from ..jsonrpc import Notification
from .app_server import AppServerError, AppServerSession


class _AwaitsNotifications(Protocol):
    """What readiness needs beyond a session's surface: a live client's wait for a notification (a replayed
    session has its notifications already, and never waits for readiness)."""

    async def wait_for_notification(self, method: str, *, since: int = 0, timeout: float) -> Notification: ...

STARTUP_METHOD = "mcpServer/startupStatus/updated"
MCP_READY_TIMEOUT_S = 45.0
"""How long an attach waits for the thread's MCP servers; their start includes a Python interpreter's."""
_TERMINAL = ("ready", "failed", "cancelled")


def configured_servers(codex_home: str | Path) -> list[str]:
    """The MCP servers ``CODEX_HOME/config.toml`` registers and does not disable, in file order.

    A missing or unreadable config registers none (Codex then starts none either)."""
    try:
        config = tomllib.loads((Path(codex_home) / "config.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []
    servers = config.get("mcp_servers")
    if not isinstance(servers, dict):
        return []
    return [name for name, entry in servers.items() if not (isinstance(entry, dict) and entry.get("enabled") is False)]


def core_servers(codex_home: str | Path) -> list[str]:
    """Of :func:`configured_servers`, the messaging core's own: those whose environment names a session
    (``PEERWIRE_SESSION_ID``), so they act for the agent."""
    try:
        config = tomllib.loads((Path(codex_home) / "config.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []
    servers = config.get("mcp_servers")
    servers = servers if isinstance(servers, dict) else {}
    return [name for name in configured_servers(codex_home)
            if isinstance(servers.get(name), dict) and SESSION_ENV in (servers[name].get("env") or {})]


async def await_mcp_ready(client: AppServerSession, thread_id: str, names: list[str], *, since: int,
                          agent: str, timeout: float = MCP_READY_TIMEOUT_S) -> dict[str, str]:
    """Wait until each of ``names`` reported ``ready`` for ``thread_id`` (at index ``since`` or later of
    ``client.received``); returns each server's status.

    Raises :class:`PeerwireError` (``app_unavailable``) naming the server that failed, was cancelled or did
    not report within ``timeout`` (with the last status it reported, if any)."""
    status: dict[str, str] = {}
    errors: dict[str, Any] = {}

    def settled() -> bool:
        return all(status.get(name) in _TERMINAL for name in names)

    try:
        async with asyncio.timeout(timeout):
            index = since
            while not settled():
                note = await cast(_AwaitsNotifications, client).wait_for_notification(
                    STARTUP_METHOD, since=index, timeout=timeout)
                index = note.after
                if note.params.get("threadId") not in (None, thread_id):
                    continue
                name = str(note.params.get("name"))
                status[name] = str(note.params.get("status"))
                errors[name] = note.params.get("error")
    except TimeoutError:
        waiting = [name for name in names if status.get(name) not in _TERMINAL]
        raise PeerwireError(Code.APP_UNAVAILABLE, f"{agent}: Codex did not report the MCP server"
                            f"{'s' if len(waiting) > 1 else ''} "
                            + ", ".join(f"{name!r} ({'last status ' + status[name] if name in status else 'no status'})"
                                        for name in waiting)
                            + f" ready within {timeout:.0f}s; no input was given to thread {thread_id}") from None
    broken = [name for name in names if status[name] != "ready"]
    if broken:
        raise PeerwireError(Code.APP_UNAVAILABLE, f"{agent}: Codex could not start the MCP server"
                            f"{'s' if len(broken) > 1 else ''} "
                            + ", ".join(f"{name!r} ({status[name]}{': ' + str(errors[name]) if errors[name] else ''})"
                                        for name in broken))
    return {name: status[name] for name in names}


_LISTED = {"connected": "ready", "failed": "failed", "cancelled": "cancelled"}


async def listed_ready(client: AppServerSession, thread_id: str, names: list[str], *, timeout: float) -> list[str]:
    """Those of ``names`` that ``mcpServerStatus/list`` shows connected for ``thread_id`` already.

    A connection that subscribes to a thread another client started (an
    attached TUI's) missed the startup notifications sent before it
    subscribed: what they said is asked for instead. A server listed as failed
    or cancelled raises :class:`PeerwireError` naming it; a version or a
    moment where the list says nothing leaves the names to the notifications.
    """
    try:
        listed = await client.mcp_server_status(thread_id, timeout=timeout)
    except (AppServerError, TimeoutError):
        return []
    status = {str(entry.get("name")): _LISTED.get(str(entry.get("runtimeStatus")))
              for entry in listed.get("data") or [] if isinstance(entry, dict)}
    broken = [name for name in names if status.get(name) in ("failed", "cancelled")]
    if broken:
        raise PeerwireError(Code.APP_UNAVAILABLE, f"Codex could not start the MCP server"
                            f"{'s' if len(broken) > 1 else ''} " + ", ".join(f"{n!r} ({status[n]})" for n in broken))
    return [name for name in names if status.get(name) == "ready"]
