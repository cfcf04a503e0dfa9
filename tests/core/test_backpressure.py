"""``mcp serve`` stops reading when its answers are not read: memory stays bounded.

A client pipelines requests and never reads stdout. The server may hold
:data:`~peerwire.limits.OUTPUT_HIGH_WATER_BYTES` of unread answers and
:data:`~peerwire.limits.MAX_CALLS_IN_FLIGHT` calls; past that it reads no
more, the pipes fill and the client's writes block. Its resident memory stays
within :data:`RSS_BOUND_MB` of what it was before the flood (measured on a
real process), and once the client reads again every request is answered,
in order of arrival for the answers given at once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import psutil

from peerwire.home import HOME_ENV, SESSION_ENV
from tests.patience import WAIT_S

REQUESTS = 20_000
RSS_BOUND_MB = 40  # the bound under test
"""How much the server's RSS may grow under the flood: the unread answers' bound (1 MiB), the calls in flight,
the pipes' and the interpreter's own slack. Without backpressure 20,000 unread tools/list reach 500 MB."""
STALL_S = 1.5  # the bound under test
"""The writer has stalled (the server stopped reading) when it made no progress for this long."""
BOUND_S = WAIT_S


def _rss_mb(process: psutil.Process) -> float:
    return process.memory_info().rss / 1e6


def _flood(argv: list[str], env: dict[str, str], requests: list[bytes]) -> dict:
    """Write ``requests`` without reading; sample the server's RSS until the writer is done or stalled;
    then read every answer. Returns the figures."""
    server = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              env=env, start_new_session=True)
    watched = psutil.Process(server.pid)
    try:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "flood", "version": "1"}}}
        ).encode() + b"\n")
        server.stdin.flush()
        first = server.stdout.readline()
        assert b'"init"' in first, first
        baseline = _rss_mb(watched)
        written = [0]

        def write() -> None:
            try:
                for line in requests:
                    server.stdin.write(line)
                    written[0] += 1
                server.stdin.flush()
            except (BrokenPipeError, ValueError):
                pass

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        peak, last, last_change, deadline = baseline, -1, time.monotonic(), time.monotonic() + BOUND_S
        while writer.is_alive() and time.monotonic() < deadline:
            peak = max(peak, _rss_mb(watched))
            if peak - baseline > 10 * RSS_BOUND_MB:
                break  # no need to watch it eat the machine
            if written[0] != last:
                last, last_change = written[0], time.monotonic()
            elif time.monotonic() - last_change > STALL_S:
                break
            time.sleep(0.02)
        stalled_at = written[0]
        answers = 0
        reader_done = threading.Event()

        def read() -> None:
            nonlocal answers
            for _ in server.stdout:
                answers += 1
                if answers == len(requests):
                    break
            reader_done.set()

        threading.Thread(target=read, daemon=True).start()
        writer.join(BOUND_S)
        reader_done.wait(BOUND_S)
        return {"baseline": baseline, "peak": peak, "stalled_at": stalled_at, "answers": answers}
    finally:
        server.kill()
        server.wait(WAIT_S)
        for pipe in (server.stdin, server.stdout):
            try:
                pipe.close()
            except OSError:
                pass  # a write the kill cut short


def test_unread_answers_stop_the_reading_and_memory_stays_bounded():
    requests = [json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/list"}).encode() + b"\n"
                for n in range(REQUESTS)]
    env = {k: v for k, v in os.environ.items() if k not in (HOME_ENV, SESSION_ENV)}
    figures = _flood([sys.executable, "-m", "peerwire", "mcp", "serve"], env, requests)
    assert figures["stalled_at"] < REQUESTS, f"the server read everything it was sent unanswered: {figures}"
    assert figures["peak"] - figures["baseline"] < RSS_BOUND_MB, figures
    assert figures["answers"] == REQUESTS, f"answers lost once the client read again: {figures}"


def test_pipelined_tool_calls_are_held_to_the_calls_in_flight(core):
    alice = core.register("alice")
    for n in range(40):  # each answer lists them all: several KB an answer
        core.register(f"peer-{n:02d}-" + "x" * 40)
    requests = [json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                            "params": {"name": "list_agents", "arguments": {}}}).encode() + b"\n"
                for n in range(10_000)]
    env = {**os.environ, HOME_ENV: str(core.home.path), SESSION_ENV: alice.token}
    figures = _flood([sys.executable, "-m", "peerwire", "mcp", "serve"], env, requests)
    assert figures["peak"] - figures["baseline"] < RSS_BOUND_MB, figures
    assert figures["answers"] == len(requests), figures
