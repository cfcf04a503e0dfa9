"""Process jobs: every process the acceptance runner starts, and their teardown.

A :class:`Job` owns the processes started through :meth:`Job.spawn` and
everything those start in turn. Closing the job leaves none of them running.

POSIX
    Each child leads its own session and process group
    (``start_new_session=True``), so one ``killpg`` reaches the child and every
    descendant that stayed in its group, even after the child itself exited.
    Teardown sends SIGTERM to every group, waits a bounded grace, SIGKILLs what
    is left, then sweeps descendants that left their group (``setsid``,
    daemonizers). Those are found through the process tree, which only links
    them to the job while their ancestors live, so the job records them before
    it signals anything (and whenever :meth:`Job.observe` is called). A job
    created with ``adopt_orphans=True`` on Linux also makes the runner a child
    subreaper, so orphans reparent to the runner instead of init and stay
    reachable however early their parent exits.

Windows
    Every child is assigned to one Job Object created with
    ``JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE``. The kernel places descendants in the
    same job, and closing its handle -- explicitly, or implicitly when the
    runner dies -- kills all of them.
"""

from __future__ import annotations

import atexit
import ctypes
import enum
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO, Any

import psutil

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

# How often teardown re-checks what is still alive. Short, because the common
# case is children that exit at once on SIGTERM.
_POLL_INTERVAL = 0.02
# SIGKILL rounds in the sweep: each round can uncover descendants that a dying
# process handed to init or to the subreaper.
_SWEEP_ROUNDS = 5

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
        self._recorded: set[psutil.Process] = set()
        self._state = _State.OPEN
        self._teardown: JobTeardown | None = None
        self._spawning_thread: int | None = None
        self._deferred: Callable[[], None] | None = None
        self._windows_job = _WindowsJobObject() if sys.platform == "win32" else None
        self.adopts_orphans: bool = adopt_orphans and _become_child_subreaper()
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
                        **_isolation_options(),
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
            if self._windows_job is not None:
                self._assign_or_kill(process)
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
        if self._windows_job is not None:
            return
        with self._lock:
            for process in self._processes:
                # Only while unreaped: once Popen has reaped the child, its pid
                # may belong to an unrelated process whose children are not ours.
                if process.popen.poll() is None:
                    self._recorded.update(_descendants_of_pid(process.pid))
            if self.adopts_orphans:
                self._recorded.update(self._adopted(recursive=True))

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
            if self._windows_job is not None:
                result = self._close_windows(grace)
            else:
                result = self._close_posix(grace)
            if self._teardown is None:
                self._teardown = result
            self._state = _State.CLOSED
            _open_jobs.discard(self)
            return self._teardown

    def _close_at_exit(self) -> None:
        self.close()

    # -- POSIX -----------------------------------------------------------------

    def _close_posix(self, grace: float) -> JobTeardown:
        # Record first: a child dying on SIGTERM hands its descendants to init,
        # and after that the tree no longer leads from the child to them.
        self.observe()
        terminated = tuple(process.name for process in self._processes if process.popen.poll() is None)
        escaped: set[int] = set()

        groups = self._groups()
        for pgid in groups:
            _signal_group(pgid, signal.SIGTERM)
        for proc in self._live_recorded():
            if _pgid(proc) not in groups:
                escaped.add(proc.pid)
                _signal_process(proc, signal.SIGTERM)
        live_groups, live_recorded = self._wait_until_quiet(time.monotonic() + grace)

        killed: list[str] = []
        for _ in range(_SWEEP_ROUNDS):
            if not live_groups and not live_recorded:
                break
            groups = self._groups()
            for pgid in live_groups & groups.keys():
                if groups[pgid] not in killed:
                    killed.append(groups[pgid])
                _signal_group(pgid, signal.SIGKILL)
            for proc in live_recorded:
                # Its descendants first: once it dies they reparent away from it.
                self._recorded.update(_descendants(proc))
            for proc in self._live_recorded():
                if _pgid(proc) not in groups:
                    escaped.add(proc.pid)
                _signal_process(proc, signal.SIGKILL)
            live_groups, live_recorded = self._wait_until_quiet(time.monotonic() + KILL_TIMEOUT / _SWEEP_ROUNDS)

        # The last look may have found a child dead but not yet reaped; collect
        # its status now, so its Popen reports how it ended.
        self._reap()
        survivors = {proc.pid for proc in live_recorded}
        for members in _live_group_members(live_groups).values():
            survivors.update(members)
        return JobTeardown(
            terminated=terminated,
            killed=tuple(killed),
            escaped=tuple(sorted(escaped)),
            survivors=tuple(sorted(survivors)),
        )

    def _groups(self) -> dict[int, str]:
        """The process groups that are the job's to signal: group id -> child name.

        start_new_session=True made each child the leader of a group whose id
        is its pid. (Not getpgid(), which fails once the leader is reaped while
        members of its group may live on.) The kernel does not hand out a pid
        still in use as a group id, so once a leader is reaped, a process
        holding its pid proves the group is gone and the id belongs to someone
        else now: such a group is left alone.
        """
        groups = {}
        for process in self._processes:
            if process.popen.returncode is None or not psutil.pid_exists(process.pid):
                groups[process.pid] = process.name
        return groups

    def _wait_until_quiet(self, deadline: float) -> tuple[set[int], list[psutil.Process]]:
        """Poll until no group member or recorded process lives, or until ``deadline``.

        Returns what is still alive: group ids and recorded processes.
        """
        while True:
            self._reap()
            if self.adopts_orphans:
                # Orphans adopted since the last look belong to the job too.
                self._recorded.update(self._adopted(recursive=True))
            live_groups = set(_live_group_members(self._groups()))
            live_recorded = self._live_recorded()
            if (not live_groups and not live_recorded) or time.monotonic() >= deadline:
                return live_groups, live_recorded
            time.sleep(_POLL_INTERVAL)

    def _live_recorded(self) -> list[psutil.Process]:
        return [proc for proc in self._recorded if not _is_gone(proc)]

    def _reap(self) -> None:
        """Collect exit statuses, so dead children stop counting as group members."""
        for process in self._processes:
            # Popen.poll() never blocks: if the main thread is inside
            # Popen.wait() when a signal handler lands here, it returns None.
            process.popen.poll()
        if self.adopts_orphans:
            # Adopted orphans are this process's children now; nobody else will
            # reap them. Only their pids, never waitpid(-1), which would steal
            # the exit statuses that Popen objects are waiting for.
            for child in self._adopted(recursive=False):
                try:
                    os.waitpid(child.pid, os.WNOHANG)
                except ChildProcessError:
                    pass  # ECHILD: reaped already, or no longer our child.

    def _adopted(self, *, recursive: bool) -> list[psutil.Process]:
        """Children of this process that no open job started, with their descendants."""
        started = {process.pid for job in list(_open_jobs) for process in job._processes}
        started.update(process.pid for process in self._processes)
        try:
            children = psutil.Process().children()
        except psutil.Error:
            return []
        adopted = [child for child in children if child.pid not in started]
        if recursive:
            for child in list(adopted):
                adopted.extend(_descendants(child))
        return adopted

    # -- Windows ---------------------------------------------------------------

    def _assign_or_kill(self, process: JobProcess) -> None:
        assert self._windows_job is not None
        # The child runs between CreateProcess and this call; anything it starts
        # in that window is outside the job. Creating it suspended would close
        # the window, but Popen gives no access to its main thread to resume it.
        try:
            self._windows_job.assign(process.pid)
        except OSError as exc:
            # Outside the job the process could outlive the runner: refuse it.
            process.popen.kill()
            process.popen.wait()
            self._processes.remove(process)
            raise JobSpawnError(f"cannot place {process.name!r} in the job object: {exc}") from exc

    def _close_windows(self, grace: float) -> JobTeardown:
        assert self._windows_job is not None
        running = [process for process in self._processes if process.popen.poll() is None]
        signalled = []
        for process in running:
            try:
                # The console's nearest thing to SIGTERM. It reaches the child's
                # console process group, which CREATE_NEW_PROCESS_GROUP separated
                # from ours, so the runner does not receive it too.
                os.kill(process.pid, signal.CTRL_BREAK_EVENT)  # type: ignore[attr-defined,unused-ignore]
                signalled.append(process)
            except OSError:
                pass  # Exited meanwhile, or has no console to deliver the event to.
        deadline = time.monotonic() + grace
        while any(p.popen.poll() is None for p in signalled) and time.monotonic() < deadline:
            time.sleep(_POLL_INTERVAL)
        killed = tuple(process.name for process in running if process.popen.poll() is None)
        # Ends every process in the job: the children and all their descendants.
        self._windows_job.close()
        deadline = time.monotonic() + KILL_TIMEOUT
        while any(p.popen.poll() is None for p in running) and time.monotonic() < deadline:
            time.sleep(_POLL_INTERVAL)
        return JobTeardown(
            terminated=tuple(process.name for process in running),
            killed=killed,
            survivors=tuple(process.pid for process in running if process.popen.poll() is None),
        )


Spawn = Callable[[list[str], dict[str, str], IO[bytes]], subprocess.Popen]
"""Starts a core's long-running program: ``(argv, environment, stderr file) -> process`` whose stdout is a pipe."""


def spawn_through(job: Job, name: str = "peerwire-app") -> Spawn:
    """A :data:`Spawn` that starts the program as a process of ``job``: the job ends it, and what it starts."""
    def spawn(argv: list[str], env: dict[str, str], stderr: IO[bytes]) -> subprocess.Popen:
        return job.spawn(argv, name=name, env=env, stdout=subprocess.PIPE, stderr=stderr).popen
    return spawn


def install_signal_handlers(
    job: Job,
    *,
    grace: float | None = None,
    signals: Iterable[signal.Signals] = (signal.SIGINT, signal.SIGTERM),
) -> Callable[[], None]:
    """Make ``signals`` close ``job`` and exit with status 128 + signal number.

    Children run in their own sessions, so a terminal's Ctrl-C reaches only the
    runner; these handlers pass the end on to the job. The exit is a
    :class:`SystemExit` raised in the main thread, so ``finally`` blocks and
    context managers (a run home keeping a failed run) still run; they find
    the job already closed. A second signal during teardown finishes it without
    waiting out the grace (see :meth:`Job.close`).

    ``grace`` defaults to the job's. Must be called from the main thread.
    Returns a function that restores the previous handlers.
    """

    def close_and_exit(signum: int, frame: FrameType | None) -> None:
        def end_run() -> None:
            job.close(grace=grace)
            raise SystemExit(128 + signum)

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


# -- process helpers ---------------------------------------------------------------


def _isolation_options() -> dict[str, Any]:
    if sys.platform == "win32":
        # Gives the child its own console process group, so CTRL_BREAK can be
        # aimed at it alone.
        return {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}
    return {"start_new_session": True}


def _descendants_of_pid(pid: int) -> list[psutil.Process]:
    try:
        return _descendants(psutil.Process(pid))
    except psutil.Error:
        return []  # Gone meanwhile.


def _descendants(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return proc.children(recursive=True)
    except psutil.Error:
        # NoSuchProcess: gone, nothing below it. AccessDenied: not ours to end.
        return []


def _is_gone(proc: psutil.Process) -> bool:
    """True once ``proc`` is dead, zombies included, or its pid is reused."""
    try:
        # is_running() compares creation times, so a reused pid reads as gone.
        # It is True for zombies, which are dead but wait for a parent to reap
        # them: an orphan's new parent (init) may be slow to, or never will.
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
    except psutil.AccessDenied:
        return False


def _pgid(proc: psutil.Process) -> int | None:
    try:
        return os.getpgid(proc.pid)
    except OSError:
        return None  # ESRCH: gone meanwhile.


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass  # ESRCH: every member of the group is gone already.
    except PermissionError:
        # EPERM. Linux: no member could be signalled, but they are alive.
        # macOS: at least one member could not be (or only zombies remain).
        # Either way the group is not known to be gone: the wait that follows
        # sees what lives on, SIGKILL is tried next, and whatever still refuses
        # ends up among the teardown's survivors.
        pass


def _signal_process(proc: psutil.Process, sig: signal.Signals) -> None:
    try:
        # psutil checks the pid still names the process recorded earlier,
        # so a reused pid is never signalled.
        proc.send_signal(sig)
    except psutil.NoSuchProcess:
        pass  # Exited meanwhile.
    except psutil.AccessDenied:
        pass  # EPERM: reported as a survivor if it outlives the teardown.


def _live_group_members(pgids: Iterable[int]) -> dict[int, list[int]]:
    """Pids of the living (non-zombie) members of each of ``pgids`` that has any."""
    candidates = set()
    for pgid in pgids:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            continue  # ESRCH: nothing at all left in the group.
        except PermissionError:
            pass  # EPERM: members exist that we may not signal; look at them below.
        candidates.add(pgid)
    if not candidates:
        return {}
    # The probe above also succeeds while the only members left are zombies,
    # orphans that init has not reaped (on some hosts it never does). A zombie
    # is dead already, so look at the members themselves.
    members: dict[int, list[int]] = {}
    for proc in psutil.process_iter():
        try:
            pgid = os.getpgid(proc.pid)
            if pgid in candidates and proc.status() != psutil.STATUS_ZOMBIE:
                members.setdefault(pgid, []).append(proc.pid)
        except (OSError, psutil.NoSuchProcess):
            continue  # Exited during the scan.
        except psutil.AccessDenied:
            members.setdefault(pgid, []).append(proc.pid)  # Cannot tell: assume alive.
    return members


_PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>


def _become_child_subreaper() -> bool:
    """Linux: have orphaned descendants reparent to this process instead of init."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(_PR_SET_CHILD_SUBREAPER, ctypes.c_ulong(1), ctypes.c_ulong(0),
                      ctypes.c_ulong(0), ctypes.c_ulong(0)) == 0


# -- Windows Job Object ------------------------------------------------------------

# winnt.h layouts, with fixed-width types rather than ctypes.wintypes: DWORD is
# c_ulong there, 8 bytes on 64-bit POSIX, and fixed widths keep the layout the
# same on every host, so it can be checked off Windows too.


class _IoCounters(ctypes.Structure):
    _fields_ = [
        ("ReadOperationCount", ctypes.c_uint64),
        ("WriteOperationCount", ctypes.c_uint64),
        ("OtherOperationCount", ctypes.c_uint64),
        ("ReadTransferCount", ctypes.c_uint64),
        ("WriteTransferCount", ctypes.c_uint64),
        ("OtherTransferCount", ctypes.c_uint64),
    ]


class _JobObjectBasicLimitInformation(ctypes.Structure):
    _fields_ = [
        ("PerProcessUserTimeLimit", ctypes.c_int64),  # LARGE_INTEGER
        ("PerJobUserTimeLimit", ctypes.c_int64),
        ("LimitFlags", ctypes.c_uint32),  # DWORD
        ("MinimumWorkingSetSize", ctypes.c_size_t),  # SIZE_T
        ("MaximumWorkingSetSize", ctypes.c_size_t),
        ("ActiveProcessLimit", ctypes.c_uint32),
        ("Affinity", ctypes.c_size_t),  # ULONG_PTR
        ("PriorityClass", ctypes.c_uint32),
        ("SchedulingClass", ctypes.c_uint32),
    ]


class _JobObjectExtendedLimitInformation(ctypes.Structure):
    _fields_ = [
        ("BasicLimitInformation", _JobObjectBasicLimitInformation),
        ("IoInfo", _IoCounters),
        ("ProcessMemoryLimit", ctypes.c_size_t),
        ("JobMemoryLimit", ctypes.c_size_t),
        ("PeakProcessMemoryUsed", ctypes.c_size_t),
        ("PeakJobMemoryUsed", ctypes.c_size_t),
    ]


_JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS = 9  # JobObjectExtendedLimitInformation
_JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x2000
_PROCESS_SET_QUOTA = 0x0100
_PROCESS_TERMINATE = 0x0001


class _WindowsJobObject:
    """A Job Object whose last handle, when closed, kills every process in it.

    The handle is not inheritable, so only this process holds it: if the runner
    dies without closing it, the kernel closes it, and the children go too.
    """

    def __init__(self) -> None:
        kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined,unused-ignore]
        kernel32.CreateJobObjectW.argtypes = [ctypes.c_void_p, ctypes.c_wchar_p]
        kernel32.CreateJobObjectW.restype = ctypes.c_void_p
        kernel32.SetInformationJobObject.argtypes = [
            ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32,
        ]
        kernel32.SetInformationJobObject.restype = ctypes.c_int
        kernel32.OpenProcess.argtypes = [ctypes.c_uint32, ctypes.c_int, ctypes.c_uint32]
        kernel32.OpenProcess.restype = ctypes.c_void_p
        kernel32.AssignProcessToJobObject.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        kernel32.AssignProcessToJobObject.restype = ctypes.c_int
        kernel32.TerminateJobObject.argtypes = [ctypes.c_void_p, ctypes.c_uint]
        kernel32.TerminateJobObject.restype = ctypes.c_int
        kernel32.CloseHandle.argtypes = [ctypes.c_void_p]
        kernel32.CloseHandle.restype = ctypes.c_int
        self._kernel32 = kernel32

        handle = kernel32.CreateJobObjectW(None, None)
        if not handle:
            raise _last_windows_error()
        info = _JobObjectExtendedLimitInformation()
        info.BasicLimitInformation.LimitFlags = _JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
        if not kernel32.SetInformationJobObject(
            handle, _JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS, ctypes.byref(info), ctypes.sizeof(info)
        ):
            error = _last_windows_error()
            kernel32.CloseHandle(handle)
            raise error
        self._handle: int | None = handle

    def assign(self, pid: int) -> None:
        if self._handle is None:
            raise OSError("the job object is closed")
        process = self._kernel32.OpenProcess(_PROCESS_SET_QUOTA | _PROCESS_TERMINATE, False, pid)
        if not process:
            raise _last_windows_error()
        try:
            if not self._kernel32.AssignProcessToJobObject(self._handle, process):
                raise _last_windows_error()
        finally:
            self._kernel32.CloseHandle(process)

    def close(self) -> None:
        """Kill every process in the job and release the handle. Idempotent."""
        handle, self._handle = self._handle, None
        if handle is None:
            return
        # Closing the handle alone would also kill (KILL_ON_JOB_CLOSE), but
        # terminating first does not depend on this being the last handle.
        self._kernel32.TerminateJobObject(handle, 1)
        self._kernel32.CloseHandle(handle)


def _last_windows_error() -> OSError:
    return ctypes.WinError(ctypes.get_last_error())  # type: ignore[attr-defined,unused-ignore]
