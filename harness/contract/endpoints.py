"""How a case reaches the server as one managed caller: an MCP session over stdio.

Two interchangeable endpoints: :class:`RawEndpoint` speaks JSON-RPC through the
suite's own :class:`~harness.contract.stdio.StdioServer`; :class:`SdkEndpoint`
goes through the official MCP Python SDK's stdio client (the interop check).
Both return a :class:`ToolOutcome` future per tool call, so a case can leave a
call running in the background.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Sequence

from .census import record_launch
from .limits import limits, record_startup
from .stdio import NoResponse, StdioServer

CLIENT_INFO = {"name": "peerwire-contract-suite", "version": "1"}
PROTOCOL_VERSION = "2025-06-18"


@dataclass
class ToolOutcome:
    """One tools/call as it happened: what was sent and what came back.

    ``response`` is the JSON-RPC response object, or ``None`` when none arrived
    (``failure`` then says why).
    """

    tool: str
    arguments: Any
    request: dict[str, Any]
    response: dict[str, Any] | None
    elapsed_ms: float
    failure: str | None = None

    @property
    def result(self) -> dict[str, Any] | None:
        if self.response is None or not isinstance(self.response.get("result"), dict):
            return None
        return self.response["result"]

    @property
    def protocol_error(self) -> dict[str, Any] | None:
        if self.response is None:
            return None
        error = self.response.get("error")
        return error if isinstance(error, dict) else None

    @property
    def structured(self) -> Any:
        result = self.result
        return None if result is None else result.get("structuredContent")

    @property
    def is_error(self) -> bool:
        result = self.result
        return bool(result is not None and result.get("isError") is True)


@dataclass
class PendingCall:
    """A tools/call in flight; :meth:`outcome` waits for it, bounded."""

    tool: str
    arguments: Any
    request: dict[str, Any]
    future: Future
    started: float
    silence: Any = None
    """``(timeout) -> str``: what the server did write while this call went unanswered."""

    def outcome(self, timeout: float) -> ToolOutcome:
        """The call's outcome, or one with ``failure`` set if nothing came within ``timeout`` s."""
        try:
            return self.future.result(timeout)
        except TimeoutError:
            elapsed = (time.monotonic() - self.started) * 1000
            failure = self.silence(timeout) if self.silence is not None else f"no response within {timeout:g}s"
            return ToolOutcome(self.tool, self.arguments, self.request, None, elapsed, failure=failure)


class Endpoint(Protocol):
    """One caller's MCP session with the server under test."""

    def handshake(self, timeout: float | None = None) -> dict[str, Any]:
        """Complete the MCP initialization (a no-op where opening did it already)."""

    def call_tool(self, name: str, arguments: Any, *, timeout: float) -> PendingCall:
        """Start a tools/call; ``timeout`` bounds how long the endpoint itself may wait."""

    def close(self) -> None:
        """End the session and stop the server process."""


class RawEndpoint:
    """An MCP session through the suite's raw stdio client."""

    def __init__(self, server: StdioServer):
        self.server = server

    @classmethod
    def open(cls, argv: Sequence[str], env: dict[str, str], *, stderr: Path, launch: str = "fresh") -> "RawEndpoint":
        """Start the server; :meth:`handshake` must follow before tool calls. ``launch``: what the run counts it
        as (:data:`~harness.contract.census.LAUNCHES`)."""
        endpoint = cls(StdioServer(argv, env, stderr=stderr))
        record_launch(launch)
        return endpoint

    def initialize(self, version: str = PROTOCOL_VERSION, timeout: float | None = None) -> dict[str, Any]:
        """Send ``initialize`` asking for ``version`` as the session's first request and return the response.

        Its wait is the start-up bound (``--startup-timeout``), not a call's: the answer marks the end of
        the server's start-up, which is recorded apart (:func:`harness.contract.limits.record_startup`).
        """
        response = self.first_request("initialize", {"protocolVersion": version, "capabilities": {},
                                                     "clientInfo": CLIENT_INFO}, timeout)
        if isinstance(response.get("result"), dict):
            negotiated = response["result"].get("protocolVersion")
            self.negotiated = negotiated if isinstance(negotiated, str) else None
            self.server.revision = self.negotiated
        return response

    def first_request(self, method: str, params: Any = None, timeout: float | None = None) -> dict[str, Any]:
        """The session's first request, waited for within the start-up bound; its answer ends start-up."""
        bound = timeout if timeout is not None else limits().startup_s
        try:
            response = self.server.call(method, params, timeout=bound)
        except NoResponse as exc:
            raise NoResponse(f"the server did not answer its first request ({method}) within the start-up "
                             f"bound of {bound:g}s (--startup-timeout): {exc}") from None
        record_startup((time.monotonic() - self.server.started_at) * 1000)
        return response

    def handshake(self, timeout: float | None = None, version: str = PROTOCOL_VERSION) -> dict[str, Any]:
        """initialize + notifications/initialized; returns the initialize response."""
        response = self.initialize(version, timeout)
        if "result" not in response:
            raise RuntimeError(f"initialize failed: {response.get('error')}")
        self.server.notify("notifications/initialized")
        self.initialized = response
        return response

    negotiated: str | None = None
    """The revision the server answered initialize with (``None`` before, or when it answered none)."""
    initialized: dict[str, Any] | None = None
    """The answer to the handshake's initialize (``None`` before a handshake)."""

    def call_tool(self, name: str, arguments: Any, *, timeout: float) -> PendingCall:
        # The raw client never gives up on its own: PendingCall.outcome() bounds the wait.
        started = time.monotonic()
        seen = self.server.line_count
        request, response_future = self.server.request("tools/call", {"name": name, "arguments": arguments})
        outcome: Future = Future()

        def settle(_: Future) -> None:
            elapsed = (time.monotonic() - started) * 1000
            try:
                response = response_future.result(0)
                failure = None
            except Exception as exc:  # the server exited
                response, failure = None, str(exc)
            outcome.set_result(ToolOutcome(name, arguments, request, response, elapsed, failure))

        response_future.add_done_callback(settle)
        return PendingCall(name, arguments, request, outcome, started,
                           silence=lambda bound: self.server.silence(request["id"], bound, seen))

    def close(self) -> None:
        self.server.close()


class SdkEndpoint:
    """An MCP session through the official MCP Python SDK's stdio client.

    The SDK is async; a blocking portal (an event loop in its own thread, shared
    by every SDK endpoint of a case) lets the synchronous driver use it.
    """

    def __init__(self, portal: Any, client: Any, stack: ExitStack):
        self._portal = portal
        self._client = client
        self._stack = stack

    @classmethod
    def open(cls, portal: Any, argv: Sequence[str], env: dict[str, str], *, stderr: Path) -> "SdkEndpoint":
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters, stdio_client

        record_launch("python-sdk")
        stack = ExitStack()
        errlog = stack.enter_context(open(stderr, "a", encoding="utf-8"))
        params = StdioServerParameters(command=argv[0], args=list(argv[1:]), env=env)
        client = Client(stdio_client(params, errlog=errlog))
        try:
            stack.enter_context(portal.wrap_async_context_manager(client))
        except BaseException:
            stack.close()
            raise
        return cls(portal, client, stack)

    def handshake(self, timeout: float | None = None) -> dict[str, Any]:
        return {}  # the SDK client performed it on entry

    def call_tool(self, name: str, arguments: Any, *, timeout: float) -> PendingCall:
        request = {"method": "tools/call", "params": {"name": name, "arguments": arguments}, "via": "mcp-sdk"}
        started = time.monotonic()
        future = self._portal.start_task_soon(self._call, name, arguments, request, timeout)
        return PendingCall(name, arguments, request, future, started)

    async def _call(self, name: str, arguments: Any, request: dict[str, Any], timeout: float) -> ToolOutcome:
        import anyio
        from mcp.shared.exceptions import MCPError

        started = time.monotonic()
        response: dict[str, Any] | None
        failure = None
        try:
            with anyio.fail_after(timeout):
                result = await self._client.call_tool(name, arguments)
            response = {"jsonrpc": "2.0", "result": result.model_dump(by_alias=True, exclude_none=True, mode="json")}
        except MCPError as exc:
            response = {"jsonrpc": "2.0", "error": {"code": exc.error.code, "message": exc.error.message}}
        except TimeoutError:
            response, failure = None, f"the SDK client got no result within {timeout:g}s"
        except Exception as exc:  # the SDK refused the result (e.g. output schema validation)
            response, failure = None, f"the SDK client raised {type(exc).__name__}: {exc}"
        return ToolOutcome(name, arguments, request, response, (time.monotonic() - started) * 1000, failure)

    def close(self) -> None:
        self._stack.close()


__all__ = ["Endpoint", "PendingCall", "RawEndpoint", "SdkEndpoint", "ToolOutcome"]
