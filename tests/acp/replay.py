"""Replay a recorded ACP exchange to the ACP adapter, with no agent process.

:class:`ReplayTransport` stands in for ``AcpClient.start``: each call opens the
next recorded session of a fixture (:mod:`tests.acp.recording`). A player walks
the recorded lines in order: what the agent said (notifications, answers) is
released to the adapter; at each line the client sent, the player waits until
the adapter sends the same message (same method, the same session it was
handed, the same literal text), so the exchange unfolds in its causal order.
An answer resolves the adapter's request the recorded one stands for. A
divergence is a :class:`ReplayMismatch` (``session.mismatch``), raised to the
adapter's pending request, which is what makes a fixture a regression test.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Sequence

from peerwire.acp.client import AgentExited
from peerwire.jsonrpc import Notification
from peerwire.stdio_peer import Arrivals, JsonRpcError

from harness.lab.recorded import replay as recorded
from harness.lab.recorded.replay import ReplayMismatch
from tests.patience import WAIT_S

SEND_TIMEOUT_S = WAIT_S
"""How long the player waits for the adapter to send what was recorded next."""

Hook = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass
class _Transcript:
    path: Path | None = None


def _texts_agree(recorded: Sequence[dict[str, Any]], live: Sequence[dict[str, Any]]) -> bool:
    """Prompt blocks agree: as many, of the same types, and each literal text (one without placeholders) equal."""
    if [b.get("type") for b in recorded] != [b.get("type") for b in live]:
        return False
    return all("<" in str(r.get("text")) or r.get("text") == entry.get("text") for r, entry in zip(recorded, live))


@dataclass
class ReplaySession:
    """One recorded ACP session, played to the adapter (the :class:`peerwire.acp.client.AcpSession` surface)."""

    lines: list[dict[str, Any]]
    name: str
    hook: Hook | None = None
    """Awaited with each released notification before the adapter hears it (to perform, at the recorded
    moment, what an MCP tool call did to the core)."""
    arrivals: Arrivals = field(default_factory=Arrivals)
    transcript: _Transcript = field(default_factory=_Transcript)
    initialize_result: dict[str, Any] | None = None
    exited: AgentExited | None = None
    pid: int = 0
    mismatch: ReplayMismatch | None = None
    sent: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._outbox: asyncio.Queue[tuple[dict[str, Any], asyncio.Future | None]] = asyncio.Queue()
        self._waiting: dict[Any, asyncio.Future] = {}
        self._live: list[asyncio.Future] = []
        """Every request the adapter made: an agent that exits answers none of them."""
        self.done = asyncio.Event()
        self._player = asyncio.ensure_future(self._play())

    # -- the player ---------------------------------------------------------------------------

    async def _play(self) -> None:
        try:
            for line in self.lines:
                if self.exited is not None:
                    break  # the agent is gone: it says nothing more
                message = line["message"]
                if line["dir"] == "sent":
                    await self._expect(message)
                elif "method" in message and "id" not in message:
                    await self._release(message)
                elif "id" in message and "method" not in message:
                    future = self._waiting.pop(message["id"], None)
                    if future is not None and not future.done():
                        if "error" in message:
                            error = message["error"]
                            future.set_exception(JsonRpcError(error["code"], error["message"], error.get("data")))
                        else:
                            future.set_result(message.get("result"))
                await asyncio.sleep(0)  # the adapter hears each line before the next one
        except ReplayMismatch as exc:
            self.mismatch = exc
            for future in self._waiting.values():
                if not future.done():
                    future.set_exception(exc)
        finally:
            self.done.set()

    async def _expect(self, recorded: dict[str, Any]) -> None:
        try:
            live, future = await asyncio.wait_for(self._outbox.get(), SEND_TIMEOUT_S)
        except TimeoutError:
            raise ReplayMismatch(f"{self.name}: the adapter never sent the recorded {recorded.get('method')}") from None
        method = recorded.get("method")
        if live["method"] != method:
            raise ReplayMismatch(f"{self.name}: the adapter sent {live['method']} where {method} was recorded")
        params, wanted = live.get("params") or {}, recorded.get("params") or {}
        if "sessionId" in wanted and params.get("sessionId") != wanted["sessionId"]:
            raise ReplayMismatch(f"{self.name}: {method} for session {params.get('sessionId')!r}, recorded "
                                 f"{wanted['sessionId']!r}")
        if method == "session/prompt" and not _texts_agree(wanted.get("prompt") or [], params.get("prompt") or []):
            raise ReplayMismatch(f"{self.name}: the prompt's blocks differ from the recorded ones: "
                                 f"{params.get('prompt')!r}")
        if "id" in recorded:
            if future is None:
                raise ReplayMismatch(f"{self.name}: the adapter notified {method}, a request was recorded")
            self._waiting[recorded["id"]] = future

    async def _release(self, message: dict[str, Any]) -> None:
        if self.hook is not None:
            await self.hook(message)
        await self.arrivals.add(message["method"], message.get("params") or {})

    async def _send(self, method: str, params: dict[str, Any], *, request: bool) -> asyncio.Future | None:
        if self.exited is not None:
            raise self.exited
        if self.mismatch is not None:
            raise self.mismatch
        future = asyncio.get_running_loop().create_future() if request else None
        if future is not None:
            self._live.append(future)
        message = {"method": method, "params": params}
        self.sent.append(message)
        await self._outbox.put((message, future))
        return future

    async def finish(self) -> None:
        """Let the player release what the agent said after the adapter's last message."""
        await asyncio.wait_for(self.done.wait(), SEND_TIMEOUT_S)

    # -- the ACP session the adapter uses ---------------------------------------------------------

    @property
    def received(self) -> list[Notification]:
        return self.arrivals.received

    async def notifications(self, *, since: int = 0) -> AsyncIterator[Notification]:
        async for note in self.arrivals.iterate(since):
            yield note

    async def _request(self, method: str, params: dict[str, Any], sent: Any = None) -> Any:
        future = await self._send(method, params, request=True)
        assert future is not None
        if sent is not None:
            sent.set()
        return await future

    async def session_new(self, cwd: str, mcp_servers: Sequence[dict[str, Any]], *, timeout: float = 0) -> Any:
        return await self._request("session/new", {"cwd": cwd, "mcpServers": list(mcp_servers)})

    async def session_load(self, session_id: str, cwd: str, mcp_servers: Sequence[dict[str, Any]], *,
                           timeout: float = 0) -> Any:
        return await self._request("session/load", {"sessionId": session_id, "cwd": cwd,
                                                    "mcpServers": list(mcp_servers)})

    async def session_prompt(self, session_id: str, prompt: Sequence[dict[str, Any]], *,
                             message_id: str | None = None, sent: Any = None, timeout: float | None = None) -> Any:
        return await self._request("session/prompt", {"sessionId": session_id, "prompt": list(prompt),
                                                      "messageId": message_id}, sent)

    async def session_cancel(self, session_id: str) -> None:
        await self._send("session/cancel", {"sessionId": session_id}, request=False)

    async def close(self, timeout: float = 0) -> int:
        self.exited = AgentExited(0, [])
        await self.arrivals.end(self.exited)
        for future in self._live:
            if not future.done():
                future.set_exception(self.exited)
        # A cancellation that races a queue read can be lost (wait_for): the player also stops on ``exited``.
        self._player.cancel()
        await asyncio.wait({self._player}, timeout=SEND_TIMEOUT_S)
        return 0


class ReplayTransport(recorded.ReplayTransport):
    """``start_client`` for :class:`peerwire.acp.adapter.AcpProvider` from one fixture."""

    started = "agents"

    def open(self, lines: list[dict[str, Any]], name: str) -> ReplaySession:  # type: ignore[override]
        # The handshake is the client's own business: skip past it, keeping the agent's answer.
        (answer_at,) = [n for n, line in enumerate(lines[:2]) if line["dir"] == "received"]
        session = ReplaySession(lines[answer_at + 1:], name, hook=self.hook)
        session.initialize_result = lines[answer_at]["message"]["result"]
        return session
