"""Benchmarks of the reference core, each beside a baseline measured in the same run.

``python -m peerwire.bench`` (or ``make bench``) prints:

* raw SQLite commits per second (WAL, ``synchronous=FULL``, ``BEGIN IMMEDIATE``,
  one row per commit) in the same directory the app uses: the floor every
  durable receipt stands on;
* durable sends per second through ``peerwire mcp serve`` (one ``send_message``
  at a time, each waiting for its receipt) and the ratio to the raw commits;
* wake latency: a ``wait_agent`` pending in one MCP server process, a
  ``send_message`` written to another; the time from writing the send to reading
  the wake (median and p95 of ``--wakes`` rounds), and the ratio to one raw commit.

Machines here are noisy, so read the ratios, not the absolute numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .control import ControlClient
from .home import HOME_ENV, SESSION_ENV, Home


def raw_commits_per_second(directory: Path, count: int) -> float:
    db = sqlite3.connect(directory / "raw.db", isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
    start = time.perf_counter()
    for i in range(count):
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO t(body) VALUES (?)", (f"message {i}",))
        db.execute("COMMIT")
    elapsed = time.perf_counter() - start
    db.close()
    return count / elapsed


class McpProcess:
    """A ``peerwire mcp serve`` child spoken to with raw JSON-RPC lines."""

    def __init__(self, home: Home, token: str):
        env = {**os.environ, HOME_ENV: str(home.path), SESSION_ENV: token}
        self.proc = subprocess.Popen([sys.executable, "-m", "peerwire", "mcp", "serve"], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "1"}})

    def write(self, method: str, params: dict) -> int:
        self._id += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params})
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()
        return self._id

    def read(self) -> dict:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the MCP server exited")
        return json.loads(line)

    def request(self, method: str, params: dict) -> dict:
        self.write(method, params)
        return self.read()

    def tool(self, name: str, arguments: dict) -> dict:
        response = self.request("tools/call", {"name": name, "arguments": arguments})
        result = response["result"]
        if result.get("isError"):
            raise RuntimeError(f"{name} failed: {result['content'][0]['text']}")
        return result["structuredContent"]

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=10)
        self.proc.stdout.close()


def run(sends: int, wakes: int, directory: Path) -> dict:
    from harness.contract.reference import ReferenceProvisioner

    raw = raw_commits_per_second(directory, sends)
    prov = ReferenceProvisioner(directory / "core")
    prov.start()
    try:
        a, b = prov.register("bench-a"), prov.register("bench-b")
        sender, waiter = McpProcess(prov.home, a.token), McpProcess(prov.home, b.token)
        start = time.perf_counter()
        for i in range(sends):
            sender.tool("send_message", {"target": "bench-b", "message": f"durable send {i}"})
        send_rate = sends / (time.perf_counter() - start)

        status = ControlClient(prov.home)
        latencies = []
        cursor = None
        for i in range(wakes):
            # Acknowledge everything so the wait has to block, then wait for the wake.
            while True:
                page = waiter.tool("receive_messages", {"limit": 100, **({"ack_cursor": cursor} if cursor else {})})
                cursor = page["cursor"]
                if not page["records"]:
                    break
            waiter.tool("receive_messages", {"limit": 1, "ack_cursor": cursor})
            waiter.write("tools/call", {"name": "wait_agent", "arguments": {"timeout_ms": 60000}})
            deadline = time.monotonic() + 10
            while not status.call("status")["waiting"].get(b.agent_id):
                if time.monotonic() > deadline:
                    raise RuntimeError("the waiter never subscribed")
            t0 = time.perf_counter()
            sender.write("tools/call", {"name": "send_message",
                                        "arguments": {"target": "bench-b", "message": f"wake {i}"}})
            woke = waiter.read()
            latencies.append(time.perf_counter() - t0)
            sender.read()
            assert woke["result"]["structuredContent"]["wake_reason"] == "mailbox_activity", woke
        sender.close()
        waiter.close()
    finally:
        prov.stop()
    latencies.sort()
    median = statistics.median(latencies)
    return {
        "raw_sqlite_commits_per_s": round(raw, 1),
        "mcp_durable_sends_per_s": round(send_rate, 1),
        "sends_vs_raw_commits": round(send_rate / raw, 3),
        "wake_latency_median_ms": round(median * 1000, 3),
        "wake_latency_p95_ms": round(latencies[int(0.95 * (len(latencies) - 1))] * 1000, 3),
        "wake_median_in_raw_commits": round(median * raw, 2),
        "sends": sends,
        "wakes": wakes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m peerwire.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sends", type=int, default=300)
    parser.add_argument("--wakes", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="peerwire-bench-") as tmp:
        result = run(args.sends, args.wakes, Path(tmp))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key:<30} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
