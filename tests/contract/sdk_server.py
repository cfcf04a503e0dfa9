"""A messaging core on the official MCP Python SDK: its low-level ``Server`` over its own stdio transport.

``python sdk_server.py``, one process per session, as the app-less core runs:
the same durable SQLite store (``appless/store.py``), the same environment
(``APPLESS_HOME``, ``APPLESS_TOKEN``) and the same provisioner, and the same
tool rules, taken from ``appless/server.py``. What differs is everything on the
wire: no JSON-RPC here is written by hand. The SDK frames lines, parses them,
answers ``initialize`` and ``ping``, runs each request as a task of its own and
drops what it cannot parse, which is what an implementer who picks the SDK
gets. The contract suite must give such a server one stable verdict: exit 0
with a baseline of the SDK's genuine JSON-RPC findings (``sdk-baseline.txt``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

sys.path.insert(0, str(Path(__file__).resolve().parent / "appless"))
from server import Session, load_tools  # noqa: E402  (the app-less core's tool rules)
from store import Refused  # noqa: E402

TOOLS = load_tools()


def _result(structured: dict[str, Any], is_error: bool) -> types.CallToolResult:
    text = json.dumps(structured, ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=structured,
                                is_error=is_error)


def serve(session: Session) -> Server:
    """An SDK server whose tools are ``session``'s; each call runs on a worker thread (waits poll the store)."""

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name=t["name"], description=t["description"], input_schema=t["inputSchema"],
                       output_schema=t["outputSchema"]) for t in TOOLS])

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in session.inputs:
            raise MCPError(types.INVALID_PARAMS, f"Invalid params: no tool {params.name!r}")
        arguments = params.arguments or {}

        def run() -> dict[str, Any]:
            return getattr(session, f"tool_{params.name}")(session.check(params.name, arguments))

        # Cancellable, so a session that ends (stdin closed) never waits for a worker still polling the store.
        try:
            return _result(await anyio.to_thread.run_sync(run, abandon_on_cancel=True), False)
        except Refused as refused:
            return _result({"error": {"code": refused.code, "message": refused.message}}, True)
        except Exception as exc:  # noqa: BLE001 - a store failure is still an answer
            return _result({"error": {"code": "storage_unavailable", "message": str(exc)}}, True)

    return Server("sdk-core", version="1", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    server = serve(Session(None))
    async with stdio_server() as (read_stream, write_stream):
        relay_send, relay_receive = anyio.create_memory_object_stream(0)
        async with anyio.create_task_group() as session:

            async def relay() -> None:
                async with relay_send:
                    async for message in read_stream:
                        await relay_send.send(message)
                # Left alone, the SDK lets calls in flight run out after stdin closes; the contract ends them
                # with the session (wire:stdin-close:cancels).
                session.cancel_scope.cancel()

            session.start_soon(relay)
            await server.run(relay_receive, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
    os._exit(0)  # a worker thread abandoned mid-wait must not keep the process alive
