"""A minimal MCP stdio server that stalls where a test wants to interrupt the run.

``python stalling_server.py MODE MARKER_DIR``. It answers ``initialize``, ``ping`` and
``tools/list`` (no tools), and a method it does not know with -32601. Where it stalls it first
creates a file in MARKER_DIR, so a test knows the run has reached that point:

* ``initialize``: reads ``initialize`` (marker ``initialize``) and never answers it;
* ``request``: answers ``initialize``; the first other request creates ``request`` and gets no answer;
* ``exit``: answers everything; when stdin closes it creates ``closing`` and, ignoring SIGTERM, takes a
  minute to exit (a teardown in progress);
* ``wrong``: answers a method it does not know with -32602 (not -32601), a long message quoting an object's
  repr and a long ``data`` value, as a careless server might.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

STALL_S = 60.0


def mark(folder: Path, name: str) -> None:
    (folder / f"{name}.{os.getpid()}").write_text("", "utf-8")


def answer(message: dict, result: object = None, error: dict | None = None) -> None:
    reply = {"jsonrpc": "2.0", "id": message.get("id")}
    reply.update({"error": error} if error else {"result": result})
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()


def main(mode: str, folder: Path) -> None:
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if not isinstance(message, dict) or "id" not in message:
            continue
        method = message.get("method")
        if method == "initialize":
            if mode == "initialize":
                mark(folder, "initialize")
                time.sleep(STALL_S)
                return
            answer(message, {"protocolVersion": message.get("params", {}).get("protocolVersion", "2025-06-18"),
                             "capabilities": {"tools": {}}, "serverInfo": {"name": "stalling", "version": "1"}})
        elif mode == "request":
            mark(folder, "request")
            time.sleep(STALL_S)
            return
        elif method == "ping":
            answer(message, {})
        elif method == "tools/list":
            answer(message, {"tools": []})
        elif mode == "wrong":
            answer(message, error={"code": -32602, "message": "bad params for <built-in method get of dict object at "
                                   "0x7f3a2b1c9d40>: " + "x" * 300, "data": {"trace": ["frame"] * 80}})
        else:
            answer(message, error={"code": -32601, "message": "Method not found"})
    if mode == "exit":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        mark(folder, "closing")
        time.sleep(STALL_S)


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
