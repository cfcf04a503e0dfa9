"""The order a session runs its tests in: longest first, heavy tests spread out.

The suite's tests take from milliseconds to a minute. Handed out in collected
order, a worker that draws a minute-long test last keeps the session running
while the others idle. So the session sorts its tests by how long each took
when last recorded (``tests/durations.json``; a test with no record counts by
its markers), longest first, and the Makefile has pytest-xdist hand each
worker one test at a time (``--maxschedchunk 1``): the longest-processing-time
rule, whose session is at most a third longer than the best order's.

A heavy test (:mod:`tests.heavy`) waits for one of two slots. Were the
longest tests all heavy, the first workers to draw them would wait for a slot
instead of running anything, so no window of :func:`window` consecutive tests
holds more heavy ones than there are slots; a heavy test that would exceed it
waits for the next light one to go first.

``pytest --store-durations`` records the durations of the tests it ran (their
setup, call and teardown) into the file, keeping the records of the tests it
did not run. The order is only a schedule: no verdict depends on it, and every
worker computes the same order, as pytest-xdist requires.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TypeVar

DURATIONS = Path(__file__).with_name("durations.json")
LONG_MARKERS = ("slow", "heavy", "codex")
"""Markers of the tests that take seconds to minutes each (real processes, real Codex, waits a rule states)."""
# Schedule estimates in seconds, never bounds: nothing waits on them.
GUESS_LONG = 15.0
"""What a long-marked test with no record counts as: about the median of the recorded long tests."""
GUESS_SHORT = 0.1
"""What any other test with no record counts as."""
RECORD_FROM = 1.0
"""Only tests that took at least this long are recorded: the rest count as unrecorded ones (the file stays small)."""

T = TypeVar("T")


def recorded(path: Path = DURATIONS) -> dict[str, float]:
    """The recorded durations by test id (none when the file is missing)."""
    try:
        return {str(k): float(v) for k, v in json.loads(path.read_text(encoding="utf-8")).items()}
    except FileNotFoundError:
        return {}


def window(workers: int) -> int:
    """How many consecutive tests may hold at most the slots' number of heavy ones: what the workers hold at once
    (the one each runs and the one each has been handed next)."""
    return 2 * max(workers, 1)


def schedule(items: Iterable[T], expected_s: Callable[[T], float], is_heavy: Callable[[T], bool], *,
             slots: int, span: int) -> list[T]:
    """``items`` longest first (ties in their given order), with at most ``slots`` heavy items in any ``span``
    consecutive ones while light items remain to fill the gaps."""
    ranked = sorted(items, key=expected_s, reverse=True)  # stable: ties keep their order
    out: list[T] = []
    waiting: deque[T] = deque()
    recent: deque[bool] = deque(maxlen=span)

    def place(item: T, heavy: bool) -> None:
        out.append(item)
        recent.append(heavy)

    for item in ranked:
        if is_heavy(item):
            waiting.append(item)
        else:
            place(item, False)
        while waiting and sum(recent) < slots:
            place(waiting.popleft(), True)
    for item in waiting:
        place(item, True)
    return out


def store(path: Path, measured: Mapping[str, float]) -> None:
    """Write ``measured`` into the durations file over the records it had (rounded to 10 ms, sorted by id); a test
    measured under :data:`RECORD_FROM` loses its record."""
    merged = {**recorded(path), **{k: round(v, 2) for k, v in measured.items()}}
    merged = {k: v for k, v in merged.items() if v >= RECORD_FROM}
    path.write_text(json.dumps(dict(sorted(merged.items())), indent=0) + "\n", encoding="utf-8")
