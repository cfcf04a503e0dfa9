"""Process jobs: every process the acceptance runner starts, and their teardown.

A :class:`Job` owns the processes started through :meth:`Job.spawn` and
everything those start in turn. Closing the job leaves none of them running.

How a platform holds and ends them is its own module, each read alone:
:mod:`.jobs_posix` (process groups, recorded descendants, adopted orphans) and
:mod:`.jobs_windows` (a Job Object that kills on close). This module is what
both share: starting processes, the job's states, signal-safe closing.
"""

from __future__ import annotations

import atexit
import enum
import os
import signal
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO, Any

from . import jobs_posix, jobs_windows
from .jobs_posix import ProcessGroups
from .jobs_windows import JobObjectTeardown

__all__ = [
    "DEFAULT_GRACE",
    "KILL_TIMEOUT",
    "Job",
    "JobClosedError",
    "JobError",
    "JobProcess",
    "JobSpawnError",
    "JobTeardown",
    "Spawn",
    "install_signal_handlers",
    "spawn_through",
]

#: Seconds a job's processes get between SIGTERM (CTRL_BREAK on Windows) and SIGKILL.
DEFAULT_GRACE = 5.0
#: Upper bound, in seconds, on waiting for killed processes to disappear.
KILL_TIMEOUT = 5.0
#: How a child starts: isolated, so the job can signal it and what it starts without signalling the runner.
ISOLATION = jobs_windows.ISOLATION if sys.platform == "win32" else jobs_posix.ISOLATION

# What spawn accepts for stdin/stdout/stderr: subprocess.PIPE / DEVNULL /
# STDOUT, a file descriptor, a file object, or None to inherit.
Stdio = int | IO[Any] | None


class JobError(Exception):
    """Base class of process job errors."""


class JobClosedError(JobError):
    """A process was to be started through a job that is closing or closed."""


class JobSpawnError(JobError):
    """A process could not be started, or could not be put under the job's control."""


@dataclass(frozen=True, eq=False)
class JobProcess:
    """A process started by a :class:`Job`: a name for reports, and its ``Popen``.

    Pipes requested at spawn belong to the caller, who reads and closes them;
    the job only ends the process.
    """

    name: str
    popen: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.popen.pid


@dataclass(frozen=True)
class JobTeardown:
    """What :meth:`Job.close` did.

    ``terminated``: names of children still running at close, sent SIGTERM
    (CTRL_BREAK on Windows). ``killed``: names of children whose group (job
    members on Windows) outlived the grace and got SIGKILL. ``escaped``: pids of
    descendants outside every job group that teardown had to signal one by one.
    ``survivors``: pids still alive when teardown gave up -- empty unless some
    process could not be signalled (EPERM) or would not die.
    """

    terminated: tuple[str, ...] = ()
    killed: tuple[str, ...] = ()
    escaped: tuple[int, ...] = ()
    survivors: tuple[int, ...] = ()

    @property
    def clean(self) -> bool:
        """True when nothing the job started is left running."""
        return not self.survivors


class _State(enum.Enum):
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


# Jobs not yet closed. An adopting job must not mistake another job's children,
# which are this process's children too, for adopted orphans.
_open_jobs: weakref.WeakSet[Job] = weakref.WeakSet()


class Job:
    """Owner of every process the runner starts; a context manager.

    ``with Job("acceptance") as job: job.spawn([...], name="core")`` -- leaving
    the block, normally or by exception, closes the job with its ``grace``.
    :meth:`close` is also registered with :mod:`atexit` until it has run, and is
    safe to call from a signal handler (see :func:`install_signal_handlers`).

    ``adopt_orphans=True`` (Linux; ignored elsewhere, see
    :attr:`adopts_orphans`) makes this process a child subreaper, a
    process-wide setting that stays on. Orphaned descendants then reparent to
    this process, and teardown also ends every child of this process that no
    open job started. Use it only in a process that starts all its long-lived
    children through jobs, such as the acceptance runner.
    """

    def __init__(
        self, name: str = "job", *, grace: float = DEFAULT_GRACE, adopt_orphans: bool = False
    ) -> None:
        self.name = name
        self.grace = grace
        """Seconds between SIGTERM and SIGKILL when :meth:`close` is not given one."""
        # Reentrant: a signal handler runs on the main thread, possibly while
        # that thread is inside spawn() or close(), and calls close() again.
        self._lock = threading.RLock()
        self._processes: list[JobProcess] = []
        self._state = _State.OPEN
        self._teardown: JobTeardown | None = None
        self._spawning_thread: int | None = None
        self._deferred: Callable[[], None] | None = None
        self._platform = (JobObjectTeardown(self._all) if sys.platform == "win32" else
                          ProcessGroups(self._all, _started_by_open_jobs, adopt_orphans=adopt_orphans,
                                        grace=grace))
        self.adopts_orphans: bool = self._platform.adopts_orphans
        """Whether orphaned descendants reparent to this process (see class docs)."""
        _open_jobs.add(self)
        atexit.register(self._close_at_exit)

    def __enter__(self) -> Job:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Job {self.name!r} {self._state.value}, {len(self._processes)} processes>"

    @property
    def processes(self) -> tuple[JobProcess, ...]:
        """Every process started through this job, in start order, running or not."""
        return tuple(self._processes)

    @property
    def teardown(self) -> JobTeardown | None:
        """The result of :meth:`close`, or None while the job is open."""
        return self._teardown

    def spawn(
        self,
        argv: Sequence[str | os.PathLike[str]],
        *,
        name: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        stdin: Stdio = subprocess.DEVNULL,
        stdout: Stdio = None,
        stderr: Stdio = None,
        pass_fds: Sequence[int] = (),
    ) -> JobProcess:
        """Start ``argv`` under this job and return its handle.

        ``name`` labels the process in teardown reports (default: the basename
        of ``argv[0]``). ``env`` replaces the environment (None inherits
        ours). ``stdin`` defaults to the null device: children run in their own
        session and must not compete for the runner's terminal. ``pass_fds``
        (POSIX) are the only descriptors the child inherits besides stdio,
        e.g. the read end of a :class:`~harness.process.lifeline.Lifeline`.

        Raises :class:`JobClosedError` once :meth:`close` has begun, and
        :class:`JobSpawnError` when the program cannot be started or (Windows)
        cannot be placed in the Job Object -- such a process is killed rather
        than left outside the job's control.
        """
        args = [os.fspath(arg) for arg in argv]
        if not args:
            raise ValueError("argv must name a program to run")
        label = name or Path(args[0]).name
        with self._lock:
            if self._state is not _State.OPEN:
                raise JobClosedError(f"job {self.name!r} is {self._state.value}; cannot start {label!r}")
            # From fork to registration, an exception raised by a signal handler
            # would lose the child: it would exist, unknown to the job. Handlers
            # from install_signal_handlers therefore defer their exit until the
            # child is registered (see _defer_while_spawning).
            self._spawning_thread = threading.get_ident()
            try:
                try:
                    popen = subprocess.Popen(
                        args,
                        env=None if env is None else dict(env),
                        cwd=cwd,
                        stdin=stdin,
                        stdout=stdout,
                        stderr=stderr,
                        pass_fds=tuple(pass_fds),
                        **ISOLATION,
                    )
                except OSError as exc:
                    raise JobSpawnError(f"cannot start {label!r} ({args[0]}): {exc.strerror or exc}") from exc
                process = JobProcess(label, popen)
                self._processes.append(process)
            finally:
                self._spawning_thread = None
                deferred, self._deferred = self._deferred, None
                if deferred is not None:
                    deferred()
            try:
                self._platform.placed(process)
            except OSError as exc:
                # Outside the job the process could outlive the runner: refuse it.
                process.popen.kill()
                process.popen.wait()
                self._processes.remove(process)
                raise JobSpawnError(f"cannot place {process.name!r} in the job object: {exc}") from exc
            return process

    def _defer_while_spawning(self, action: Callable[[], None]) -> bool:
        """Run ``action`` once the child this thread is spawning is registered.

        Returns False, doing nothing, when this thread is not inside spawn().
        For signal handlers, which run on the main thread, possibly in the
        middle of spawn(), and must not raise there. A spawn on another thread
        needs no deferral: close() waits for it to release the job's lock.
        """
        if self._spawning_thread != threading.get_ident():
            return False
        self._deferred = action
        return True

    def observe(self) -> None:
        """Record the current descendants of every running child.

        Teardown signals recorded descendants that left their child's process
        group even after the path to them through the process tree is gone (a
        daemon whose parent exited is reparented away). :meth:`close` observes
        before it signals anything; a runner may also call this at milestones,
        e.g. once a child reports it is ready. A no-op on Windows, where the Job
        Object holds every descendant.
        """
        with self._lock:
            self._platform.observe()

    def close(self, grace: float | None = None) -> JobTeardown:
        """End every process of the job; return what that took.

        Sends SIGTERM to each child's process group and to recorded descendants
        that left it, waits up to ``grace`` seconds (default: the job's
        :attr:`grace`), then SIGKILLs whatever is left, including descendants
        found along the way, and waits up to :data:`KILL_TIMEOUT` for them to
        disappear. Windows: CTRL_BREAK to the children, ``grace``, then the Job
        Object is terminated and closed.

        Idempotent: later calls return the first call's result. Called again on
        the same thread while a teardown is in progress -- from a signal handler
        (a second Ctrl-C) or atexit -- it finishes the teardown at once,
        skipping the grace, because the interrupted call may never resume.
        Another thread calling meanwhile waits for the teardown to finish.
        """
        with self._lock:
            if self._teardown is not None:
                return self._teardown
            if grace is None:
                grace = self.grace
            if self._state is _State.CLOSING:
                grace = 0.0
            else:
                self._state = _State.CLOSING
                atexit.unregister(self._close_at_exit)
            result = JobTeardown(**self._platform.close(grace, KILL_TIMEOUT))
            if self._teardown is None:
                self._teardown = result
            self._state = _State.CLOSED
            _open_jobs.discard(self)
            return self._teardown

    def _close_at_exit(self) -> None:
        self.close()

    def _all(self) -> list[JobProcess]:
        return self._processes


def _started_by_open_jobs() -> set[int]:
    started = {process.pid for job in list(_open_jobs) for process in job._processes}
    for job in list(_open_jobs):
        started |= getattr(job._platform, "helpers", set)()
    return started


Spawn = Callable[..., subprocess.Popen]
"""Starts a core's long-running program: ``(argv, environment, stderr file, *, stdin_pipe=False) -> process``
whose stdout is a pipe, and whose stdin is the null device, or a pipe with ``stdin_pipe=True`` (a stdio child
such as ``codex app-server``, spoken to line by line, inside the run's job)."""


def spawn_through(job: Job, name: str = "peerwire-app") -> Spawn:
    """A :data:`Spawn` that starts the program as a process of ``job``: the job ends it, and what it starts."""
    def spawn(argv: list[str], env: dict[str, str], stderr: IO[bytes], *, stdin_pipe: bool = False,
              name: str = name) -> subprocess.Popen:
        stdin = subprocess.PIPE if stdin_pipe else subprocess.DEVNULL
        return job.spawn(argv, name=name, env=env, stdin=stdin, stdout=subprocess.PIPE, stderr=stderr).popen
    return spawn


def install_signal_handlers(
    job: Job,
    *,
    grace: float | None = None,
    signals: Iterable[signal.Signals] = (signal.SIGINT, signal.SIGTERM),
    on_stop: Callable[[int], None] | None = None,
) -> Callable[[], None]:
    """Make ``signals`` close ``job`` and exit with status 128 + signal number.

    Children run in their own sessions, so a terminal's Ctrl-C reaches only the
    runner; these handlers pass the end on to the job. The exit is a
    :class:`SystemExit` raised in the main thread, so ``finally`` blocks and
    context managers (a run home keeping a failed run) still run; they find
    the job already closed. A second signal during teardown finishes it without
    waiting out the grace (see :meth:`Job.close`).

    With ``on_stop``, the first signal closes the job and then calls
    ``on_stop(signum)`` instead of exiting: the runner goes on, with every
    process ended, to report what it has. A later signal exits at once.

    ``grace`` defaults to the job's. Must be called from the main thread.
    Returns a function that restores the previous handlers.
    """
    stopped: list[int] = []

    def close_and_exit(signum: int, frame: FrameType | None) -> None:
        def end_run() -> None:
            first = not stopped
            stopped.append(signum)
            job.close(grace=grace)
            if on_stop is not None and first:
                on_stop(signum)
                return
            raise SystemExit(128 + stopped[0])

        if not job._defer_while_spawning(end_run):
            end_run()

    previous: dict[signal.Signals, Any] = {}
    for signum in signals:
        previous[signum] = signal.signal(signum, close_and_exit)

    def restore() -> None:
        for signum, handler in previous.items():
            # None: the previous handler was not installed from Python.
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)

    return restore
