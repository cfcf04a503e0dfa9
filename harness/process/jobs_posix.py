"""A job's processes on POSIX: process groups, the descendants recorded on the way, adopted orphans.

Each child leads its own session and process group (``start_new_session=True``),
so one ``killpg`` reaches the child and every descendant that stayed in its
group, even after the child itself exited. Teardown sends SIGTERM to every
group, waits a bounded grace, SIGKILLs what is left, then sweeps descendants
that left their group (``setsid``, daemonizers). Those are found through the
process tree, which only links them to the job while their ancestors live, so
the job records them before it signals anything (and whenever it is asked to
observe). With ``adopt_orphans`` on Linux this process also becomes a child
subreaper, so orphans reparent to it instead of init and stay reachable however
early their parent exits. An orphan is a child of this process that no open job
started and that was not already its child when the job opened: a host that
runs a scenario in its own process (a test session, a user's harness) keeps
the children it started before, such as a server it shares between tests.

A job whose owner dies without tearing down (SIGKILL, with its whole process
group) is torn down by its reaper (:mod:`.reaper`): a small process of its
own session, started with the first child, to which every child's group is
named and which ends them all when the owner's end of their pipe closes.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import psutil

from peerwire.resources import data_folder

# How often teardown re-checks what is still alive. Short, because the common
# case is children that exit at once on SIGTERM.
_POLL_INTERVAL = 0.02
# SIGKILL rounds in the sweep: each round can uncover descendants that a dying
# process handed to init or to the subreaper.
_SWEEP_ROUNDS = 5
_PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
_REAPER_EXIT_S = 2.0  # a dismissed reaper exits at once; this only bounds a wait for one that hangs

ISOLATION: dict[str, Any] = {"start_new_session": True}
"""How a child starts: the leader of a session and process group of its own."""


REAPER = data_folder("harness.process") / "reaper.py"
"""The reaper runs as a script (``python -I -S``: no site, no project imports), from the installed package."""


class Reaper:
    """The owner's side of a job's reaper (see :mod:`.reaper`): started with the job's first child.

    Each child's process group is named to it as the child starts; :meth:`done`
    after the job's own teardown dismisses it. Should the owner die first, the
    reaper ends every group named.
    """

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self.process: subprocess.Popen[bytes] | None = None
        self._orders = -1

    def name(self, pgid: int) -> None:
        if self.process is None:
            self._start()
        self._send(f"+{pgid}\n".encode())

    def forget(self, pgid: int) -> None:
        """The group ended under its owner's own hand: the reaper no longer signals it (its id may be reused)."""
        if self._orders >= 0:
            self._send(f"-{pgid}\n".encode())

    def done(self) -> None:
        """The job tore down by itself: the reaper exits without signalling anything. Idempotent."""
        if self._orders >= 0:
            self._send(b"done\n")
            os.close(self._orders)
            self._orders = -1
        if self.process is not None:
            try:
                self.process.wait(timeout=_REAPER_EXIT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def _start(self) -> None:
        read_end, self._orders = os.pipe()  # the write end is not inherited by any child
        try:
            self.process = subprocess.Popen([sys.executable, "-I", "-S", str(REAPER), str(read_end), str(self.grace)],
                                            pass_fds=(read_end,), stdin=subprocess.DEVNULL,
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                            start_new_session=True)
        finally:
            os.close(read_end)

    def _send(self, order: bytes) -> None:
        try:
            os.write(self._orders, order)
        except OSError:
            pass  # a reaper that died cannot help; teardown by the job itself still works


class ProcessGroups:
    """The POSIX side of a :class:`~harness.process.jobs.Job` (see the module docs).

    ``processes`` gives the job's processes in start order; ``started`` the pids
    of every child any open job started (an adopting job must not mistake another
    job's children, which are this process's children too, for orphans).
    """

    def __init__(self, processes: Callable[[], Sequence[Any]], started: Callable[[], set[int]], *,
                 adopt_orphans: bool, grace: float = 5.0) -> None:
        self._processes = processes
        self._started = started
        self._recorded: set[psutil.Process] = set()
        self.adopts_orphans: bool = adopt_orphans and _become_child_subreaper()
        self._host_children: set[tuple[int, float]] = _children_now() if self.adopts_orphans else set()
        """This process's children when the job opened (pid, start time): the host's, never orphans of the job."""
        self.reaper = Reaper(grace)

    def placed(self, process: Any) -> None:
        """The child's own process group is the job's hold on it: named to the reaper, should the owner die."""
        self.reaper.name(process.pid)

    def helpers(self) -> set[int]:
        """Pids of this job's own helper processes (its reaper): never adopted orphans, never signalled."""
        return {self.reaper.process.pid} if self.reaper.process is not None else set()

    def observe(self) -> None:
        """Record the current descendants of every running child (see ``Job.observe``)."""
        for process in self._processes():
            # Only while unreaped: once Popen has reaped the child, its pid
            # may belong to an unrelated process whose children are not ours.
            if process.popen.poll() is None:
                self._recorded.update(_descendants_of_pid(process.pid))
        if self.adopts_orphans:
            self._recorded.update(self._adopted(recursive=True))

    def close(self, grace: float, kill_timeout: float) -> dict[str, Any]:
        """End every process of the job (see ``Job.close``); what it took, as ``JobTeardown`` fields."""
        # Record first: a child dying on SIGTERM hands its descendants to init,
        # and after that the tree no longer leads from the child to them.
        self.observe()
        terminated = tuple(process.name for process in self._processes() if process.popen.poll() is None)
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
            live_groups, live_recorded = self._wait_until_quiet(time.monotonic() + kill_timeout / _SWEEP_ROUNDS)

        # The last look may have found a child dead but not yet reaped; collect
        # its status now, so its Popen reports how it ended.
        self._reap()
        survivors = {proc.pid for proc in live_recorded}
        for members in _live_group_members(live_groups).values():
            survivors.update(members)
        self.reaper.done()
        return {"terminated": terminated, "killed": tuple(killed), "escaped": tuple(sorted(escaped)),
                "survivors": tuple(sorted(survivors))}

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
        for process in self._processes():
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
        for process in self._processes():
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
        started = self._started()
        try:
            children = psutil.Process().children()
        except psutil.Error:
            return []
        adopted = [child for child in children if child.pid not in started and not self._hosts(child)]
        if recursive:
            for child in list(adopted):
                adopted.extend(_descendants(child))
        return adopted


    def _hosts(self, child: psutil.Process) -> bool:
        try:
            return (child.pid, child.create_time()) in self._host_children
        except psutil.Error:
            return False


def _children_now() -> set[tuple[int, float]]:
    """This process's children as (pid, start time): a pid alone may be reused by an orphan later."""
    found = set()
    for child in psutil.Process().children():
        try:
            found.add((child.pid, child.create_time()))
        except psutil.Error:
            continue  # exited meanwhile
    return found


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

def _become_child_subreaper() -> bool:
    """Linux: have orphaned descendants reparent to this process instead of init."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(_PR_SET_CHILD_SUBREAPER, ctypes.c_ulong(1), ctypes.c_ulong(0),
                      ctypes.c_ulong(0), ctypes.c_ulong(0)) == 0
