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

A descendant that left its group (Codex starts its MCP servers through a
login shell in a session of their own) is not reached through a group. So,
while the owner lives, the reaper looks every :data:`WATCH_S` at the
descendants of the owner and of each group named (Linux: ``/proc/PID/task/
TID/children``, cheap: only the tree itself is read) and remembers each with
its start time, and looks once more from the groups when the owner dies;
then it ends those too, the ones still alive that are still the same
processes. Only a descendant that left its group *and* lost every ancestor
of the job within :data:`WATCH_S` before the owner died can escape.

Standard library only, run isolated (``-I -S``): it must start fast and
depend on nothing that could be half-imported when it is needed.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

POLL_S = 0.05
WATCH_S = 1.0
"""How often the reaper records the descendants of the job while its owner lives."""


def _start_time(pid: int) -> int | None:
    """The process's start time (clock ticks since boot): with the pid, who it is; ``None`` once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        return None if fields[0] == b"Z" else int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def _children(pid: int) -> list[int]:
    found = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as children:
                found += [int(child) for child in children.read().split()]
    except (OSError, ValueError):
        pass
    return found


def _is_reaper(pid: int) -> bool:
    """Another job's reaper (the owner may hold several jobs): it has its own groups to end, and is left alone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return os.fsencode(sys.argv[0]) in cmdline.read().split(b"\0")  # the reaper runs as a script
    except OSError:
        return False


def _descendants(roots: set[int]) -> set[int]:
    seen: set[int] = set()
    todo = list(roots)
    while todo:
        for child in _children(todo.pop()):
            if child not in seen and not _is_reaper(child):
                seen.add(child)
                todo.append(child)
    return seen


def _watch(fd: int, owner: int) -> tuple[set[int], dict[int, int], bool]:
    """Read the owner's orders until its end closes, recording the job's descendants meanwhile.

    Returns the groups named, the descendants seen (pid -> start time) and whether the owner said ``done``.
    """
    groups: set[int] = set()
    seen: dict[int, int] = {}
    pending = b""
    me = os.getpid()

    def record(roots: set[int]) -> None:
        nonlocal seen
        for pid in _descendants(roots) - {me}:
            if pid not in seen and (started := _start_time(pid)) is not None:
                seen[pid] = started
        seen = {pid: started for pid, started in seen.items() if _start_time(pid) == started}

    while True:
        readable, _, _ = select.select([fd], [], [], WATCH_S)
        if not readable:
            record({owner, *groups})
            continue
        try:
            chunk = os.read(fd, 4096)
        except InterruptedError:
            continue
        except OSError:
            chunk = b""
        if not chunk:
            record(groups)  # the job's children may outlive their owner a moment: what they started counts too
            return groups, seen, False
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line == b"done":
                return groups, seen, True
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


def _signal_each(seen: dict[int, int], sig: int) -> dict[int, int]:
    """Send ``sig`` to each recorded descendant that is still the process recorded; return those."""
    alive = {}
    for pid, started in seen.items():
        if _start_time(pid) != started:
            continue  # gone, or its pid is someone else's now
        try:
            os.kill(pid, sig)
            alive[pid] = started
        except ProcessLookupError:
            pass
        except PermissionError:
            alive[pid] = started
    return alive


def main(argv: list[str]) -> int:
    fd, grace = int(argv[1]), float(argv[2])
    groups, seen, done = _watch(fd, os.getppid())
    if done or not (groups or seen):
        return 0
    alive = _signal(groups, signal.SIGTERM)
    living = _signal_each(seen, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while (alive or living) and time.monotonic() < deadline:
        time.sleep(POLL_S)
        alive, living = _signal(alive, 0), _signal_each(living, 0)
    _signal(alive, signal.SIGKILL)
    _signal_each(living, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
