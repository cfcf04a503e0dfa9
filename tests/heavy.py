"""At most :data:`AT_ONCE` heavy tests at a time, across every worker of a test session.

A heavy test (marker ``heavy``) starts a whole run's processes: the acceptance
runner with its capability probe and several Codex agents, each with an
app-server and an MCP server, or a benchmark's dozen processes. Four xdist
workers each starting one would put a few dozen busy processes on two cores,
and the harness's own waits (a scenario step's turn) would then measure the
machine. So a heavy test first takes one of :data:`AT_ONCE` slots: an
exclusive ``flock`` on a slot file in the folder the session's workers share,
released when its process ends however it ends. Light tests run beside them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

try:
    import fcntl
except ImportError:  # Windows: no flock; its sessions run heavy tests without slots
    fcntl = None  # type: ignore[assignment]

AT_ONCE = 2
MARKER = "heavy: starts a whole run's processes (the acceptance runner, several Codex agents); at most two such " \
         "tests run at a time across the session's workers (tests/heavy.py)"


def slots_folder(config: pytest.Config) -> Path | None:
    """The folder the session's xdist workers share (the parent of each worker's base temp), or None when the
    session runs in one process (then one test runs at a time anyway)."""
    if not hasattr(config, "workerinput"):
        return None
    return config._tmp_path_factory.getbasetemp().parent  # type: ignore[attr-defined]


@contextlib.contextmanager
def slot(folder: Path | None, worker: int = 0) -> Iterator[int | None]:
    """Hold one of :data:`AT_ONCE` slots in ``folder`` (None: none needed). A free slot is taken at once;
    when none is free, this worker waits for slot ``worker % AT_ONCE`` to be released (the wait ends when a
    holder's test ends: its process holds the lock only as long as it runs)."""
    if folder is None or fcntl is None:
        yield None
        return
    folder.mkdir(parents=True, exist_ok=True)
    handles = [os.open(folder / f"heavy-slot-{n}.lock", os.O_RDWR | os.O_CREAT, 0o600) for n in range(AT_ONCE)]
    held = None
    try:
        for n, fd in enumerate(handles):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held = n
                break
            except BlockingIOError:
                continue
        if held is None:
            held = worker % AT_ONCE
            fcntl.flock(handles[held], fcntl.LOCK_EX)
        yield held
    finally:
        for fd in handles:
            os.close(fd)  # closing releases the lock
