"""A job's reaper: ends the job's process groups when the job's owner dies without ending them.

    python -I -S reaper.py FD GRACE

A :class:`~harness.process.jobs.Job` on POSIX starts one reaper, in a session
of its own, and keeps the write end of a pipe whose read end is ``FD`` here.
Through it the job names each process group it starts (``+PGID``) and, once
its own teardown is done, says ``done``. If the pipe ends without ``done``,
the owner died without tearing down -- SIGKILL included, which no handler can
catch, and with it the owner's whole process group -- and the reaper does the
teardown instead: SIGTERM to every group named, ``GRACE`` seconds for them to
end, then SIGKILL to what is left.

Why not ``prctl(PR_SET_PDEATHSIG)`` in each child: that signal reaches only
the child, not what the child started in its group (a Codex app-server's MCP
servers), and it fires when the *thread* that forked the child exits, not the
process. Why not the subreaper alone: when the runner dies too there is no
ancestor left to adopt anything.

Standard library only, run isolated (``-I -S``): it must start fast and
depend on nothing that could be half-imported when it is needed.
"""

from __future__ import annotations

import os
import signal
import sys
import time

POLL_S = 0.05


def _read_orders(fd: int) -> tuple[set[int], bool]:
    """Read until the owner's end closes: the groups named, and whether the owner said ``done``."""
    groups: set[int] = set()
    pending = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except InterruptedError:
            continue
        except OSError:
            chunk = b""
        if not chunk:
            return groups, False
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line == b"done":
                return groups, True
            if line[:1] in (b"+", b"-") and line[1:].isdigit():
                (groups.add if line[:1] == b"+" else groups.discard)(int(line[1:]))


def _signal(groups: set[int], sig: int) -> set[int]:
    """Send ``sig`` to each group; return those that still have a member."""
    alive = set()
    for pgid in groups:
        try:
            os.killpg(pgid, sig)
            alive.add(pgid)
        except ProcessLookupError:
            pass  # every member is gone
        except PermissionError:
            alive.add(pgid)  # members we may not signal: nothing more to do for them
    return alive


def main(argv: list[str]) -> int:
    fd, grace = int(argv[1]), float(argv[2])
    groups, done = _read_orders(fd)
    if done or not groups:
        return 0
    alive = _signal(groups, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while alive and time.monotonic() < deadline:
        time.sleep(POLL_S)
        alive = _signal(alive, 0)
    _signal(alive, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
