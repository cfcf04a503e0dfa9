"""Replay a recorded app-server exchange to the Codex adapter, with no Codex process.

:class:`ReplayTransport` stands in for ``AppServerClient.start``: each call
opens the next recorded session of a fixture (:mod:`harness.acceptance.record`). The
adapter's requests must come in the recorded order with the recorded method;
the ids it fences with (``threadId``, ``turnId``, ``expectedTurnId``) must be
exactly the ones the replay handed it. Recorded notifications are released up
to the next recorded request, so the exchange unfolds in its causal order: what
the server said after a request is only heard once the adapter made it.
A divergence raises :class:`ReplayMismatch`, which is what makes a fixture a
regression test.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator

from peerwire.codex.app_server import AppServerExited, JsonRpcError, Notification
from peerwire.stdio_peer import Arrivals

from harness.codex.fixtures import load

# Parameters that carry ids the adapter learned from the server: they must match exactly.
_FENCED = ("threadId", "turnId", "expectedTurnId")


class ReplayMismatch(AssertionError):
    pass


def sessions(lines: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    out: list[list[dict[str, Any]]] = []
    for line in lines:
        if line["dir"] == "session":
            out.append([])
        else:
            out[-1].append(line)
    return out


@dataclass
class _Transcript:
    path: Path | None = None


@dataclass
class ReplaySession:
    lines: list[dict[str, Any]]
    name: str
    cursor: int = 0
    arrivals: Arrivals = field(default_factory=Arrivals)
    sent: list[dict[str, Any]] = field(default_factory=list)
    transcript: _Transcript = field(default_factory=_Transcript)
    exited: AppServerExited | None = None
    pid: int = 0
    initialize_result: dict[str, Any] | None = None
    hook: Any = None
    """Awaited with each recorded notification before the adapter hears it (e.g. to
    perform, at the recorded moment, what an MCP tool call did to the core)."""

    def __post_init__(self) -> None:
        self._pending: asyncio.Future | None = None

    # -- the exchange -----------------------------------------------------------------

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        if self._pending is not None:
            await self._pending  # everything said before this request has been heard
        self.sent.append({"method": method, "params": params})
        while self.cursor < len(self.lines):
            line = self.lines[self.cursor]
            message = line["message"]
            if line["dir"] == "sent" and "id" in message:
                break
            self.cursor += 1
            if line["dir"] == "received" and "method" in message and "id" not in message:
                await self._release(message)
        else:
            raise ReplayMismatch(f"{self.name}: the adapter sent {method} after the recorded exchange ended")
        recorded = self.lines[self.cursor]["message"]
        if recorded["method"] != method:
            raise ReplayMismatch(f"{self.name}: the adapter sent {method} where {recorded['method']} was recorded")
        for key in _FENCED:
            if key in recorded.get("params", {}) and params.get(key) != recorded["params"][key]:
                raise ReplayMismatch(f"{self.name}: {method} {key}={params.get(key)!r}, recorded "
                                     f"{recorded['params'][key]!r}")
        missing = set(recorded.get("params", {})) - set(params)
        if missing:
            raise ReplayMismatch(f"{self.name}: {method} lacks recorded params {sorted(missing)}")
        self.cursor += 1
        answer, after = None, []
        while self.cursor < len(self.lines):
            line = self.lines[self.cursor]
            message = line["message"]
            if line["dir"] == "sent":
                if "id" in message:
                    break
                self.cursor += 1
                continue
            self.cursor += 1
            if message.get("id") == recorded["id"] and "method" not in message:
                answer = message
            elif "method" in message and "id" not in message:
                if answer is None:
                    await self._release(message)  # said before the answer: heard before it
                else:
                    after.append(message)
        if answer is None:
            raise ReplayMismatch(f"{self.name}: no recorded answer to {method}")
        # What the server said after answering is heard only once the adapter has
        # acted on the answer, as with a live server.
        self._pending = asyncio.ensure_future(self._release_all(after))
        if "error" in answer:
            error = answer["error"]
            raise JsonRpcError(error["code"], error["message"], error.get("data"), method=method)
        return answer.get("result")

    async def _release_all(self, messages: list[dict[str, Any]]) -> None:
        await asyncio.sleep(0)  # yield once: the adapter's continuation runs first
        for message in messages:
            await self._release(message)

    async def _release(self, message: dict[str, Any]) -> None:
        if self.hook is not None:
            await self.hook(message)
        await self.arrivals.add(message["method"], message.get("params") or {})

    async def finish(self) -> None:
        """Release what the server said after the adapter's last request."""
        if self._pending is not None:
            await self._pending
        while self.cursor < len(self.lines):
            line = self.lines[self.cursor]
            self.cursor += 1
            message = line["message"]
            if line["dir"] == "received" and "method" in message and "id" not in message:
                await self._release(message)

    # -- the app-server session the adapter uses (peerwire.codex.app_server.AppServerSession) ---

    @property
    def received(self) -> list[Notification]:
        return self.arrivals.received

    async def notifications(self, *, since: int = 0) -> AsyncIterator[Notification]:
        async for note in self.arrivals.iterate(since):
            yield note

    async def thread_start(self, *, cwd: Any = None, extra: Any = None, timeout: float = 0) -> Any:
        return await self.request("thread/start", {**(extra or {}), **({"cwd": str(cwd)} if cwd else {})})

    async def thread_resume(self, thread_id: str, *, extra: Any = None, timeout: float = 0) -> Any:
        return await self.request("thread/resume", {**(extra or {}), "threadId": thread_id})

    async def thread_fork(self, thread_id: str, *, extra: Any = None, timeout: float = 0) -> Any:
        return await self.request("thread/fork", {**(extra or {}), "threadId": thread_id})

    async def thread_set_name(self, thread_id: str, name: str, *, timeout: float = 0) -> Any:
        return await self.request("thread/name/set", {"threadId": thread_id, "name": name})

    async def mcp_server_status(self, thread_id: str, *, timeout: float = 0) -> Any:
        return await self.request("mcpServerStatus/list", {"threadId": thread_id, "detail": "toolsAndAuthOnly"})

    async def thread_read(self, thread_id: str, *, include_turns: bool = False, timeout: float = 0) -> Any:
        return await self.request("thread/read", {"threadId": thread_id, "includeTurns": include_turns})

    async def turn_start(self, thread_id: str, input: Any, *, extra: Any = None, timeout: float = 0) -> Any:
        return await self.request("turn/start", {**(extra or {}), "threadId": thread_id, "input": input})

    async def turn_steer(self, thread_id: str, expected_turn_id: str, input: Any, *, extra: Any = None,
                         timeout: float = 0) -> Any:
        return await self.request("turn/steer", {**(extra or {}), "threadId": thread_id,
                                                 "expectedTurnId": expected_turn_id, "input": input})

    async def turn_interrupt(self, thread_id: str, turn_id: str, *, timeout: float = 0) -> Any:
        return await self.request("turn/interrupt", {"threadId": thread_id, "turnId": turn_id})

    async def thread_inject_items(self, thread_id: str, items: Any, *, timeout: float = 0) -> Any:
        return await self.request("thread/inject_items", {"threadId": thread_id, "items": items})

    async def close(self, timeout: float = 0) -> int:
        if self._pending is not None:
            await self._pending
        self.exited = AppServerExited(0, [])
        await self.arrivals.end(self.exited)
        return 0


class ReplayTransport:
    """``start_client`` for :class:`peerwire.codex.adapter.CodexProvider` from one fixture: each call opens
    the fixture's next recorded session (:meth:`open`; another protocol's replay overrides it)."""

    started = "app-servers"
    """What the adapter starts, for the mismatch that it started more than were recorded."""

    def __init__(self, fixture: Path, hook: Any = None):
        self.name = fixture.stem
        self.pending = sessions(load(fixture))
        self.opened: list[Any] = []
        self.hook = hook

    async def __call__(self, **_: Any) -> Any:
        if not self.pending:
            raise ReplayMismatch(f"{self.name}: the adapter started more {self.started} than were recorded")
        session = self.open(self.pending.pop(0), f"{self.name}#{len(self.opened) + 1}")
        self.opened.append(session)
        return session

    def open(self, lines: list[dict[str, Any]], name: str) -> ReplaySession:
        session = ReplaySession(lines, name, hook=self.hook)
        # The handshake is the client's own business; skip past it, keeping the server's answer.
        while session.cursor < len(lines) and not (
                lines[session.cursor]["dir"] == "sent" and lines[session.cursor]["message"].get("method") == "initialized"):
            message = lines[session.cursor]["message"]
            if lines[session.cursor]["dir"] == "received" and isinstance(message.get("result"), dict):
                session.initialize_result = message["result"]
            session.cursor += 1
        session.cursor += 1
        return session
