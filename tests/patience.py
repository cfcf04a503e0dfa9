"""How long a test waits before it takes a wait for a hang: the suite's only time limits.

A time limit in a test is a safety net against a hang, never the verdict: a healthy run on a busy machine
must never reach one. So every bound is one of these, set far above the slowest healthy run measured with
both cores busy (see docs/testing.md, "Time limits"), and ``tests/test_patience.py`` refuses any other
literal bound in the suite. What a test judges is what happened, never how fast.

The three bounds nest, so the innermost one that a hang meets reports it with the most context: a wait
fails naming what it waited for, a child run's bound shows the child's output, and pytest-timeout
(``timeout`` in ``pyproject.toml``, :data:`TEST_S`) ends a test that hangs anywhere else.
"""

from __future__ import annotations

WAIT_S = 300.0
"""One wait for something a healthy run does in seconds: a process to start or answer, a line, a turn, a
record's state, a page to load. Slowest measured with both cores busy: under 50 s (a runner's first
"agents attached", the capability probe and two agents' start-up included)."""

RUN_S = 600.0
"""One whole child run: ``runner.py`` with its scenarios, the benchmark, the fault campaign, a drift run.
Slowest measured with both cores busy: about 140 s."""

TEST_S = 1200.0
"""A whole test (pytest-timeout's ``timeout``): above :data:`RUN_S`, so a child run's own bound fires
first, with its output, in a test that runs one."""

GLANCE_S = 0.05
"""How long a test looks for something that must NOT happen (a notification that must not come). Not a
safety net: a busy machine can only make the look easier to pass, never fail a healthy run."""

POLL_S = 0.1
"""The step of a bounded loop that polls state with no event to block on (each step is not a bound)."""
