"""An interrupted contract run: SIGINT, SIGTERM and SIGHUP end it alike, with its report.

A terminal's Ctrl-C, CI cancelling a job and ``timeout`` all mean "stop now, and say what
you have". The process that judges the run (the controlling one) turns the first of these
signals into pytest's ``KeyboardInterrupt``, so the session ends the way an interrupted
pytest session does: fixtures are torn down and the plugin writes the report it has, marked
interrupted (:meth:`harness.contract.compliance.Compliance.interrupted`), with exit status
128 + the signal's number. It passes the end on to the pytest-xdist workers as SIGTERM, once
each: a worker ignores SIGINT (a terminal sends it to the whole process group, and a second
interrupt in the middle of a teardown would leave that teardown's servers running) and turns
the first SIGTERM or SIGHUP into the same ``KeyboardInterrupt``, tearing its servers and homes
down. Later signals change nothing: the teardown under way is bounded, and whatever outlives
it the runner ends (:func:`harness.contract.cli.main` holds every process of the run in an
adopting :class:`~harness.process.jobs.Job`).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from types import FrameType

import psutil

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""What ends a run: a terminal's Ctrl-C, CI cancellation or ``timeout``, a closed terminal."""

_received: list[int] = []


def received() -> int | None:
    """The first signal this process was ended by, if any."""
    return _received[0] if _received else None


def exit_status(signum: int) -> int:
    """The exit status of a run ended by ``signum``: 128 + its number, as a shell reports it."""
    return 128 + signum


def name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def note(signum: int) -> None:
    """Record that the run was ended by ``signum`` (the first signal counts)."""
    if not _received:
        _received.append(signum)


def _install(handler: Callable[[int, FrameType | None], None] | int,
             signals: tuple[signal.Signals, ...] = SIGNALS) -> Callable[[], None]:
    previous = {signum: signal.signal(signum, handler) for signum in signals}

    def restore() -> None:
        for signum, old in previous.items():
            signal.signal(signum, signal.SIG_DFL if old is None else old)

    return restore


def _interrupting(end: bool) -> Callable[[int, FrameType | None], None]:
    """A handler that notes the signal and, for the first one only, ends this process's children (``end``) and
    raises ``KeyboardInterrupt``: a second signal never cuts the teardown the first one started."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        first = not _received
        note(signum)
        if first:
            if end:
                end_children()
            raise KeyboardInterrupt(name(signum))

    return interrupt


def install_runner() -> Callable[[], None]:
    """The runner's handlers, before any test: the first signal raises ``KeyboardInterrupt``. Returns a function
    that restores the previous handlers."""
    return _install(_interrupting(end=False))


def install_controller() -> Callable[[], None]:
    """The controlling process's handlers: the first signal ends the workers and interrupts the session."""
    return _install(_interrupting(end=True))


def install_worker() -> Callable[[], None]:
    """A pytest-xdist worker's handlers: SIGINT ignored; the first SIGTERM or SIGHUP interrupts its session."""
    interrupt = _interrupting(end=True)
    restore_int = _install(signal.SIG_IGN, (signal.SIGINT,))
    restore_rest = _install(interrupt, (signal.SIGTERM, signal.SIGHUP))

    def restore() -> None:
        restore_rest()
        restore_int()

    return restore


def end_children() -> None:
    """SIGTERM to what this process started: each child in its own process group (a pytest-xdist worker, which
    tears its own part down), and the whole group of each child that leads one (a server, an app, and whatever
    they started), so that the teardown that follows finds them ended instead of waiting out their graces."""
    group = os.getpgrp()
    try:
        children = psutil.Process().children()
    except psutil.Error:
        return
    for child in children:
        try:
            child_group = os.getpgid(child.pid)
            if child_group == group:
                child.send_signal(signal.SIGTERM)
            elif child_group == child.pid:
                os.killpg(child_group, signal.SIGTERM)
        except (OSError, psutil.Error):
            continue  # gone meanwhile
