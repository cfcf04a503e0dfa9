"""A job's processes on Windows: one Job Object with kill-on-close. Experimental: no CI job runs it.

Every child is assigned to one Job Object created with
``JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE``. The kernel places descendants in the
same job, and closing its handle -- explicitly, or implicitly when the runner
dies -- kills all of them. Teardown first sends CTRL_BREAK, the console's
nearest thing to SIGTERM, and waits a bounded grace.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Any

_POLL_INTERVAL = 0.02

# Gives the child its own console process group, so CTRL_BREAK can be aimed at it alone.
ISOLATION: dict[str, Any] = {"creationflags": getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)}


class JobObjectTeardown:
    """The Windows side of a :class:`~harness.process.jobs.Job` (see the module docs)."""

    adopts_orphans = False

    def __init__(self, processes: Callable[[], Sequence[Any]]) -> None:
        self._processes = processes
        self._job_object = _WindowsJobObject()

    def placed(self, process: Any) -> None:
        """Put a just-started child into the Job Object; ``OSError`` if it cannot be."""
        # The child runs between CreateProcess and this call; anything it starts
        # in that window is outside the job. Creating it suspended would close
        # the window, but Popen gives no access to its main thread to resume it.
        self._job_object.assign(process.pid)

    def observe(self) -> None:
        """Nothing to record: the Job Object holds every descendant."""

    def close(self, grace: float, kill_timeout: float) -> dict[str, Any]:
        """CTRL_BREAK to the children, ``grace``, then the Job Object ends every process in it."""
        running = [process for process in self._processes() if process.popen.poll() is None]
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
        self._job_object.close()
        deadline = time.monotonic() + kill_timeout
        while any(p.popen.poll() is None for p in running) and time.monotonic() < deadline:
            time.sleep(_POLL_INTERVAL)
        return {"terminated": tuple(process.name for process in running), "killed": killed,
                "survivors": tuple(process.pid for process in running if process.popen.poll() is None)}


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
