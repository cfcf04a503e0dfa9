"""What the benchmark drives: a ``peerwire app`` it starts itself, MCP servers over raw stdio lines.

Nothing here comes from the harness: the core's benchmark must run from an
core and the MCP SDK alone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from peerwire.control import ControlClient
from peerwire.home import HOME_ENV, SESSION_ENV, Home

READY_TIMEOUT_S = 300.0
"""Generous: the app checks its store at start-up, which takes seconds at a million records on a busy machine."""
PROTOCOL = "2025-11-25"


class BenchApp:
    """``peerwire app`` on a fresh home, as a subprocess of the benchmark."""

    def __init__(self, home: Path):
        self.home = Home(home)
        self.process: subprocess.Popen | None = None

    def start(self) -> "BenchApp":
        self.process = subprocess.Popen([sys.executable, "-m", "peerwire", "app", "--home", str(self.home.path)],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert self.process.stdout is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        line = self.process.stdout.readline()
        if not line or json.loads(line).get("event") != "ready" or time.monotonic() > deadline:
            raise RuntimeError(f"peerwire app did not start for {self.home.path}")
        return self

    def register(self, name: str) -> str:
        return ControlClient(self.home).call("register_agent", {"name": name})["session_token"]

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(READY_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        assert self.process.stdout is not None
        self.process.stdout.close()
        self.process = None


class StdioMcp:
    """An MCP server subprocess spoken to with raw JSON-RPC lines, one request at a time."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None):
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self._id = 0
        self.initialize = self.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                                      "clientInfo": {"name": "peerwire-bench", "version": "1"}})
        self.ready_s = time.perf_counter() - self.started
        self.notify("notifications/initialized")

    @classmethod
    def peerwire(cls, home: Home, token: str) -> "StdioMcp":
        env = {**os.environ, HOME_ENV: str(home.path), SESSION_ENV: token}
        return cls([sys.executable, "-m", "peerwire", "mcp", "serve"], env)

    def write(self, method: str, params: dict) -> int:
        self._id += 1
        self._line({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params})
        return self._id

    def notify(self, method: str) -> None:
        self._line({"jsonrpc": "2.0", "method": method})

    def _line(self, message: dict) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def read(self) -> dict:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the MCP server exited")
        return json.loads(line)

    def request(self, method: str, params: dict) -> dict:
        self.write(method, params)
        return self.read()

    def tool(self, name: str, arguments: dict) -> Any:
        result = self.request("tools/call", {"name": name, "arguments": arguments})["result"]
        if result.get("isError"):
            raise RuntimeError(f"{name} failed: {result['content'][0]['text']}")
        return result.get("structuredContent")

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(READY_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()


FASTMCP_ECHO = textwrap.dedent('''
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("echo")

    @server.tool()
    def echo(text: str) -> str:
        """Return the text."""
        return text

    server.run("stdio")
''')


def fastmcp_argv(directory: Path) -> list[str] | None:
    """The official SDK's high-level server with one echo tool, or ``None`` when ``mcp`` is not installed."""
    try:
        import mcp.server.mcpserver  # noqa: F401  (only checks that it is there)
    except ImportError:
        return None
    script = directory / "fastmcp_echo.py"
    script.write_text(FASTMCP_ECHO, "utf-8")
    return [sys.executable, str(script)]
