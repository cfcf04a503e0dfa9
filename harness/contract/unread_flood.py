"""A client that pipelines requests and reads no answer: does the server stop reading, and stay bounded?

One measurement, three users: the contract suite's ``wire:backpressure:bounded``
(any server command), the fault campaign's local checks (the reference's
``mcp serve``) and the reference's own tests. The client initializes, then
writes every request without reading, and watches the server's memory (the
whole process tree's: a server command may be a wrapper) until the writer
stalls *and* the server sits idle (it stopped reading), or, once everything is
written, until the server stopped growing (one that read it all may still be
working through the backlog). Then it reads every answer.

A stalled writer alone proves nothing: a server busy parsing the lines it has
read (on a loaded machine, for seconds) stalls the writer too, and judging its
memory then catches it at whatever it happened to have grown to, so the same
code passed and failed by turns. A server that stopped reading waits on its
own output and spends no CPU; one still working through a backlog does.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import psutil

INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "flood", "version": "1"}}}).encode()
STALL_S = 1.5
"""The writer has stalled (the server stopped reading), or a server has stopped growing, after this long."""
IDLE_CPU_S = 0.05
"""The most CPU a server's process tree may spend over STALL_S and still count as waiting, not working."""
WATCH_S = 120.0
"""How long the memory is watched, and the answers read, at the most."""
SAMPLE_S = 0.02


@dataclass(frozen=True)
class Flood:
    requests: int
    baseline_mb: float
    peak_mb: float
    written: int
    """Requests written when the watch ended: fewer than ``requests`` when the server stopped reading."""
    answered: int

    @property
    def growth_mb(self) -> float:
        return self.peak_mb - self.baseline_mb

    @property
    def reading_stopped(self) -> bool:
        return self.written < self.requests

    def to_json(self) -> dict:
        return {**asdict(self), "growth_mb": round(self.growth_mb, 1), "reading_stopped": self.reading_stopped}


def tools_list(count: int) -> list[bytes]:
    """``count`` pipelined ``tools/list`` requests, ids 0 to count - 1."""
    return [json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/list"}).encode() + b"\n" for n in range(count)]


def tree_rss_mb(pid: int) -> float:
    """The resident memory of a process and its descendants, in MB (0 once it is gone)."""
    try:
        root = psutil.Process(pid)
        return sum(p.memory_info().rss for p in [root, *root.children(recursive=True)]) / 1e6
    except psutil.Error:
        return 0.0


def tree_cpu_s(pid: int) -> float:
    """The CPU seconds a process and its descendants have used (user and system)."""
    try:
        root = psutil.Process(pid)
        return sum(sum(p.cpu_times()[:2]) for p in [root, *root.children(recursive=True)])
    except psutil.Error:
        return 0.0


def flood(argv: Sequence[str], env: Mapping[str, str], requests: Sequence[bytes], *, give_up_mb: float) -> Flood:
    """Pipeline ``requests`` (one line each) to a fresh ``argv`` without reading; watch its memory, stopping
    early once it grew by ``give_up_mb`` (the verdict is known: then no answer is read); else read every answer."""
    server = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              env=dict(env), start_new_session=True)
    assert server.stdin is not None and server.stdout is not None
    try:
        server.stdin.write(INITIALIZE + b"\n")
        server.stdin.flush()
        first = server.stdout.readline()
        if b'"init"' not in first:
            raise RuntimeError(f"the server did not answer initialize: {first[:200]!r}")
        baseline = peak = tree_rss_mb(server.pid)
        written = [0]

        def write() -> None:
            try:
                for line in requests:
                    server.stdin.write(line)  # type: ignore[union-attr]
                    written[0] += 1
                server.stdin.flush()  # type: ignore[union-attr]
            except (BrokenPipeError, ValueError):
                pass  # the server went away; what it answered is counted below

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        last, moved, grew = -1, time.monotonic(), time.monotonic()
        busy = [(time.monotonic(), tree_cpu_s(server.pid))]  # (when, CPU seconds): the last STALL_S of samples
        deadline = time.monotonic() + WATCH_S
        while time.monotonic() < deadline and peak - baseline < give_up_mb:
            rss = tree_rss_mb(server.pid)
            if rss > peak + 1:
                grew = time.monotonic()
            peak = max(peak, rss)
            now = time.monotonic()
            busy.append((now, tree_cpu_s(server.pid)))
            while len(busy) > 2 and now - busy[1][0] >= STALL_S:
                busy.pop(0)
            idle = now - busy[0][0] >= STALL_S and busy[-1][1] - busy[0][1] <= IDLE_CPU_S
            if writer.is_alive():
                if written[0] != last:
                    last, moved = written[0], now
                elif now - moved > STALL_S and idle:
                    break
            elif time.monotonic() - grew > STALL_S:
                break
            time.sleep(SAMPLE_S)
        stalled_at = written[0]
        answered = [0]
        if peak - baseline >= give_up_mb:
            # The verdict is known; a server that read everything may take minutes to answer it all.
            return Flood(len(requests), round(baseline, 1), round(peak, 1), stalled_at, 0)

        def read() -> None:
            for _ in server.stdout:  # type: ignore[union-attr]
                answered[0] += 1
                if answered[0] >= len(requests):
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        writer.join(WATCH_S)
        reader.join(WATCH_S)
        return Flood(len(requests), round(baseline, 1), round(peak, 1), stalled_at, answered[0])
    finally:
        server.kill()
        server.wait(WATCH_S)
        for pipe in (server.stdin, server.stdout):
            try:
                pipe.close()
            except OSError:
                pass  # a write the kill cut short
