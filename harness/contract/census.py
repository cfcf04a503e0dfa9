"""What a contract run starts: server processes by kind, homes, and shared sessions closed early.

Every process of a run (each pytest-xdist worker too) notes what it starts;
the plugin drains the notes after each test and carries them in the test's
report, so the controlling process can say how many server processes the run
started and why (``compliance.json`` ``startup``; the terminal summary).
"""

from __future__ import annotations

import threading
from collections import Counter

LAUNCHES = ("shared", "fresh", "python-sdk", "typescript-sdk", "inspector-cli", "home")
"""What is counted: server processes (``shared``: a session leased to test after test; ``fresh``: one the suite's
raw client started for one test; the others: started by an official client the suite runs) and ``home``: a
provisioner (a home with whatever its implementation runs)."""

_lock = threading.Lock()
_launches: Counter[str] = Counter()
_closed: list[str] = []


def record_launch(kind: str, count: int = 1) -> None:
    """Note that the suite started ``count`` of ``kind`` (one of :data:`LAUNCHES`)."""
    if kind not in LAUNCHES:
        raise ValueError(f"unknown launch kind {kind!r}: one of {', '.join(LAUNCHES)}")
    with _lock:
        _launches[kind] += count


def record_closed_early(reason: str) -> None:
    """Note a shared session closed before the run's end, and why (a test left it unfit for the next)."""
    with _lock:
        _closed.append(reason)


def drain() -> tuple[dict[str, int], list[str]]:
    """The launches (by kind) and early closes noted since the last drain."""
    with _lock:
        launches, closed = dict(_launches), list(_closed)
        _launches.clear()
        _closed.clear()
    return launches, closed


def describe(launches: dict[str, int]) -> str:
    """A line for the terminal: how many server processes and homes a run started, by kind."""
    servers = {k: v for k, v in launches.items() if k != "home" and v}
    parts = ", ".join(f"{count} {kind}" for kind, count in sorted(servers.items(), key=lambda kv: -kv[1]))
    return f"{sum(servers.values())} server processes started ({parts or 'none'}), {launches.get('home', 0)} homes"
