"""How long the suite waits: for a server to start, and for any one answer after that.

Start-up (from launching the server command to its answer to the first
request, ``initialize`` as a rule) is measured and bounded on its own, never
counted against a call: a server that takes 30 s to import its dependencies is
slow to start, not slow to answer. Both bounds are safety nets against a hang,
never verdicts (a requirement that is about speed states its own bound, such as
``within_ms``); they are options (``--startup-timeout``, ``--call-timeout``)
whose defaults fit a slow server. Every process of a run, each pytest-xdist
worker included, configures the same values from the command line.
"""

from __future__ import annotations

import statistics
import threading
from dataclasses import dataclass

DEFAULT_STARTUP_S = 90.0
DEFAULT_CALL_S = 30.0


@dataclass(frozen=True)
class Limits:
    startup_s: float = DEFAULT_STARTUP_S
    """From launching a server to its first answer."""
    call_s: float = DEFAULT_CALL_S
    """For one answer (or one fence) once the server is up; a call that waits adds its own timeout."""

    def __post_init__(self) -> None:
        if self.startup_s <= 0 or self.call_s <= 0:
            raise ValueError("--startup-timeout and --call-timeout are positive numbers of seconds")


_current = Limits()
_startups: list[float] = []
_lock = threading.Lock()


def configure(limits: Limits) -> None:
    """Set this process's limits (the plugin does, from its options)."""
    global _current
    _current = limits


def limits() -> Limits:
    """This process's limits."""
    return _current


def record_startup(ms: float) -> None:
    """Note one server's start-up time (launch to first answer)."""
    with _lock:
        _startups.append(ms)


def drain_startups() -> list[float]:
    """The start-up times noted since the last drain (the plugin drains them after each test)."""
    with _lock:
        out, _startups[:] = list(_startups), []
    return out


def startup_summary(samples: list[float]) -> dict[str, float | int]:
    """Count, median and maximum of start-up times in milliseconds (what reports show)."""
    if not samples:
        return {"servers": 0}
    return {"servers": len(samples), "median_ms": round(statistics.median(samples), 1),
            "max_ms": round(max(samples), 1)}
