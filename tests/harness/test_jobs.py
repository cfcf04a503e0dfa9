"""A process job leaves nothing running, whichever way the runner ends.

The end-to-end tests start a real runner program (programs/process_tree.py)
that owns a Job; its worker starts a grandchild in the worker's process group
and another that escapes into its own session, with a child of its own. After
the runner ends -- normally, by an exception, by SIGINT, by SIGTERM -- every
one of those processes must be gone.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from .child_output import read_line
from harness.process import jobs, jobs_windows
from harness.process.jobs import Job, JobClosedError, JobSpawnError, install_signal_handlers
from tests.patience import POLL_S, WAIT_S

PROGRAM = Path(__file__).parent / "programs" / "process_tree.py"
# Generous: these bound waits for Python interpreters to start on a loaded CI host.
START_TIMEOUT = WAIT_S

posix_only = pytest.mark.skipif(
    sys.platform == "win32",
    reason="process groups, sessions and POSIX signals; Windows is covered by the Job Object tests",
)
windows_only = pytest.mark.skipif(
    sys.platform != "win32",
    reason="Job Objects are a Windows kernel facility; POSIX hosts use process groups, tested above",
)


def gone(proc: psutil.Process) -> bool:
    """Dead: exited (zombies count; they only await reaping) or its pid reused."""
    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def still_running(tree: dict[str, psutil.Process]) -> list[str]:
    return [f"{name} (pid {proc.pid})" for name, proc in tree.items() if not gone(proc)]


@pytest.fixture
def leftovers() -> Iterator[list[psutil.Process]]:
    """Processes a test started; whatever a failing test left running is killed."""
    started: list[psutil.Process] = []
    yield started
    for proc in started:
        with contextlib.suppress(psutil.Error):
            proc.kill()  # psutil refuses a pid that now names another process.


_started_runners: list[RunnerUnderTest] = []


@pytest.fixture(autouse=True)
def _close_runners() -> Iterator[None]:
    yield
    while _started_runners:
        _started_runners.pop().close()


@dataclass
class RunnerUnderTest:
    popen: subprocess.Popen[bytes]
    stderr_path: Path
    teardown_path: Path
    pids: dict[str, int]
    tree: dict[str, psutil.Process]

    @classmethod
    def start(
        cls, tmp_path: Path, leftovers: list[psutil.Process], *flags: str, exited: tuple[str, ...] = ()
    ) -> RunnerUnderTest:
        """Start the runner program and wait until its tree is complete.

        ``exited`` names processes of the tree expected to have ended already.
        """
        pids_path = tmp_path / "pids.json"
        teardown_path = tmp_path / "teardown.json"
        stderr_path = tmp_path / "runner.stderr"
        with stderr_path.open("wb") as stderr:
            popen = subprocess.Popen(
                [sys.executable, str(PROGRAM), "runner", "--pids-file", str(pids_path),
                 "--teardown-file", str(teardown_path), *flags],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
            )
        runner = cls(popen, stderr_path, teardown_path, {}, {})
        _started_runners.append(runner)
        leftovers.append(psutil.Process(popen.pid))
        try:
            line = read_line(popen.stdout, START_TIMEOUT)  # type: ignore[arg-type]
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nrunner stderr:\n{runner.stderr()}") from None
        assert line == "ready"
        runner.pids = json.loads(pids_path.read_text())
        missing = []
        for name, pid in runner.pids.items():
            try:
                # Bound to the process's creation time now, while it is alive.
                proc = psutil.Process(pid)
            except psutil.NoSuchProcess:
                missing.append(name)
                continue
            leftovers.append(proc)
            if name not in exited:
                runner.tree[name] = proc
        assert sorted(missing) == sorted(exited), f"expected only {exited} to have ended: {missing}"
        return runner

    def close(self) -> None:
        """Release the runner's pipes and exit status, whatever state it is in."""
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(timeout=START_TIMEOUT)
        self.popen.stdin.close()  # type: ignore[union-attr]
        self.popen.stdout.close()  # type: ignore[union-attr]

    def end(self, how: str) -> int:
        """End the runner ``how`` and return its exit status."""
        assert self.popen.stdin is not None
        if how in ("exit", "raise"):
            self.popen.stdin.write(f"{how}\n".encode())
            self.popen.stdin.flush()
        else:
            self.popen.send_signal({"sigint": signal.SIGINT, "sigterm": signal.SIGTERM}[how])
        return self.popen.wait(timeout=START_TIMEOUT)

    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def teardown(self) -> dict[str, Any]:
        return json.loads(self.teardown_path.read_text())


# -- the runner ends; nothing it started survives ------------------------------------


@posix_only
@pytest.mark.slow
@pytest.mark.parametrize(
    ("how", "expected_status"),
    [("exit", 0), ("raise", 1), ("sigint", 128 + signal.SIGINT), ("sigterm", 128 + signal.SIGTERM)],
)
def test_no_process_outlives_the_runner(
    tmp_path: Path, leftovers: list[psutil.Process], how: str, expected_status: int
) -> None:
    runner = RunnerUnderTest.start(tmp_path, leftovers)
    pids = runner.pids
    # The tree is what the test claims it is: all alive, one branch outside
    # the worker's process group and session, with a child of its own there.
    assert [name for name, proc in runner.tree.items() if gone(proc)] == []
    assert os.getpgid(pids["grandchild"]) == pids["worker"]
    assert os.getsid(pids["escaped"]) == pids["escaped"] != os.getsid(pids["worker"])
    assert os.getpgid(pids["escaped_child"]) == pids["escaped"]

    status = runner.end(how)

    assert status == expected_status, runner.stderr()
    if how == "raise":
        assert "RuntimeError: scenario failed mid-run" in runner.stderr()
    assert still_running(runner.tree) == []
    teardown = runner.teardown()
    assert teardown["terminated"] == ["worker"]
    # Outside the worker's group: only the sweep can have ended these two.
    assert teardown["escaped"] == sorted([pids["escaped"], pids["escaped_child"]])
    assert teardown["killed"] == []  # everything here dies on SIGTERM
    assert teardown["survivors"] == []


@pytest.mark.skipif(
    not sys.platform.startswith("linux"),
    reason="child subreapers (prctl PR_SET_CHILD_SUBREAPER) exist only on Linux",
)
@pytest.mark.slow
def test_an_adopting_runner_ends_orphans_whose_parent_exited_before_teardown(
    tmp_path: Path, leftovers: list[psutil.Process]
) -> None:
    runner = RunnerUnderTest.start(
        tmp_path, leftovers, "--adopt-orphans", "--worker-exits-early", exited=("worker",)
    )
    pids = runner.pids
    # Orphaned before any teardown observed them; the subreaper adopted them.
    assert runner.tree["grandchild"].ppid() == pids["runner"]
    assert runner.tree["escaped"].ppid() == pids["runner"]
    assert not gone(runner.tree["escaped_child"])

    status = runner.end("exit")

    assert status == 0, runner.stderr()
    assert still_running(runner.tree) == []
    teardown = runner.teardown()
    assert teardown["adopts_orphans"] is True
    assert teardown["terminated"] == []  # the worker itself had already exited
    assert teardown["escaped"] == sorted([pids["escaped"], pids["escaped_child"]])
    assert teardown["survivors"] == []


# -- teardown behaviour, in process ------------------------------------------------


def spawn_idle(job: Job, name: str, *flags: str) -> tuple[jobs.JobProcess, list[int]]:
    process = job.spawn([sys.executable, str(PROGRAM), "idle", *flags], name=name, stdout=subprocess.PIPE)
    assert process.popen.stdout is not None
    ready, *pids = read_line(process.popen.stdout, START_TIMEOUT).split()
    assert ready == "ready"
    return process, [int(pid) for pid in pids]


@posix_only
def test_close_sigkills_a_child_that_ignores_sigterm_once_the_grace_is_over(
    leftovers: list[psutil.Process],
) -> None:
    grace = 0.3  # the bound under test
    with Job("stubborn-test", grace=grace) as job:
        stubborn, _ = spawn_idle(job, "stubborn", "--on-term", "ignore")
        leftovers.append(psutil.Process(stubborn.pid))
        started = time.monotonic()
        teardown = job.close()
        elapsed = time.monotonic() - started
    stubborn.popen.stdout.close()  # type: ignore[union-attr]

    assert teardown.terminated == ("stubborn",)
    assert teardown.killed == ("stubborn",)
    assert teardown.survivors == ()
    assert stubborn.popen.returncode == -signal.SIGKILL
    # It waited out the grace; the upper bound only nets a close that hangs instead of killing.
    assert grace <= elapsed < grace + WAIT_S


@posix_only
def test_close_returns_as_soon_as_children_exit_without_waiting_out_the_grace(
    leftovers: list[psutil.Process],
) -> None:
    # A grace no healthy close comes near: a close that waited it out fails the bound below, however busy
    # the machine (the bound is the suite's patience; the grace twice that).
    with Job("prompt-test", grace=2 * WAIT_S) as job:
        child, _ = spawn_idle(job, "idle")
        leftovers.append(psutil.Process(child.pid))
        started = time.monotonic()
        teardown = job.close()
        elapsed = time.monotonic() - started
    child.popen.stdout.close()  # type: ignore[union-attr]

    assert teardown.terminated == ("idle",)
    assert teardown.killed == ()
    assert child.popen.returncode == -signal.SIGTERM
    assert elapsed < WAIT_S, f"close took {elapsed:.1f} s although the child died on SIGTERM"


@posix_only
@pytest.mark.slow
def test_observed_descendants_are_ended_after_their_parent_exited(
    leftovers: list[psutil.Process],
) -> None:
    with Job("observe-test", grace=2.0) as job:
        worker = job.spawn(
            [sys.executable, str(PROGRAM), "worker", "--exit-on-eof"],
            name="worker", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )
        ready, *fields = read_line(worker.popen.stdout, START_TIMEOUT).split()  # type: ignore[arg-type]
        assert ready == "ready"
        names = ["worker", "grandchild", "escaped", "escaped_child"]
        tree = {name: psutil.Process(int(pid)) for name, pid in zip(names, fields, strict=True)}
        leftovers.extend(tree.values())
        job.observe()
        worker.popen.stdin.close()  # type: ignore[union-attr]
        assert worker.popen.wait(timeout=START_TIMEOUT) == 0
        # The tree no longer leads from the worker to the escaped branch.
        assert tree["escaped"].ppid() != worker.pid
        teardown = job.close()
    worker.popen.stdout.close()  # type: ignore[union-attr]

    assert still_running(tree) == []
    assert teardown.escaped == tuple(sorted([tree["escaped"].pid, tree["escaped_child"].pid]))
    assert teardown.survivors == ()


@posix_only
def test_a_second_signal_during_teardown_finishes_it_without_the_grace(
    leftovers: list[psutil.Process],
) -> None:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers can only be installed from the main thread")
    job = Job("reentry-test", grace=2 * WAIT_S)  # a grace no healthy teardown comes near (see above)
    stubborn, _ = spawn_idle(job, "stubborn", "--on-term", "report")
    leftovers.append(psutil.Process(stubborn.pid))
    inner: list[jobs.JobTeardown] = []

    def second_interrupt(signum: int, frame: object) -> None:
        inner.append(job.close())

    def interrupt_once_terminated() -> None:
        # The child prints "term" when the teardown's SIGTERM reaches it.
        if read_line(stubborn.popen.stdout, START_TIMEOUT) == "term":  # type: ignore[arg-type]
            os.kill(os.getpid(), signal.SIGUSR1)

    previous = signal.signal(signal.SIGUSR1, second_interrupt)
    interrupter = threading.Thread(target=interrupt_once_terminated)
    interrupter.start()
    try:
        started = time.monotonic()
        teardown = job.close()
        elapsed = time.monotonic() - started
    finally:
        interrupter.join(timeout=START_TIMEOUT)
        signal.signal(signal.SIGUSR1, previous)
        stubborn.popen.stdout.close()  # type: ignore[union-attr]

    assert inner == [teardown]
    assert teardown.killed == ("stubborn",)
    assert stubborn.popen.returncode == -signal.SIGKILL
    assert elapsed < WAIT_S, f"teardown waited {elapsed:.1f} s, as if the second signal had not been seen"


@posix_only
@pytest.mark.parametrize("pid_reused", [False, True], ids=["group-may-live-on", "pid-reused"])
def test_a_reaped_childs_group_is_signalled_only_while_its_pid_is_free(
    monkeypatch: pytest.MonkeyPatch, pid_reused: bool
) -> None:
    job = Job("reuse-test", grace=1.0)
    child = job.spawn([sys.executable, "-c", "pass"], name="short-lived")
    assert child.popen.wait(timeout=START_TIMEOUT) == 0
    signalled: list[int] = []

    def record_killpg(pgid: int, sig: int) -> None:
        signalled.append(pgid)
        raise ProcessLookupError  # as for a group with no member left

    pid_exists = psutil.pid_exists
    monkeypatch.setattr(os, "killpg", record_killpg)
    # Reused: some other process now has the pid, and leads a group of that id.
    monkeypatch.setattr(psutil, "pid_exists", lambda pid: (pid_reused and pid == child.pid) or pid_exists(pid))

    job.close()

    # While the pid is free, orphans of the child may still hold its group.
    assert (child.pid in signalled) is not pid_reused


@posix_only
def test_a_signal_landing_mid_spawn_ends_the_run_only_once_the_child_is_registered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers can only be installed from the main thread")

    class PopenThenSignal(subprocess.Popen[bytes]):
        """The child exists; the job has not registered it yet. Now the signal lands."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            signal.raise_signal(signal.SIGUSR1)  # runs the Python handler before returning

    job = Job("mid-spawn-test", grace=5.0)
    restore = install_signal_handlers(job, signals=(signal.SIGUSR1,))
    monkeypatch.setattr(subprocess, "Popen", PopenThenSignal)
    try:
        with pytest.raises(SystemExit) as exit_info:
            job.spawn([sys.executable, str(PROGRAM), "idle"], name="just-forked", stdout=subprocess.DEVNULL)
    finally:
        monkeypatch.undo()
        restore()
        job.close()

    assert exit_info.value.code == 128 + signal.SIGUSR1
    [child] = job.processes
    assert job.teardown is not None and job.teardown.terminated == ("just-forked",)
    assert child.popen.returncode == -signal.SIGTERM


def test_close_is_idempotent_and_refuses_new_processes() -> None:
    job = Job("idempotence-test", grace=5.0)
    child = job.spawn([sys.executable, "-c", "pass"], name="short-lived")
    assert child.popen.wait(timeout=START_TIMEOUT) == 0

    first = job.close()
    assert job.close() is first
    assert job.teardown is first
    # It had exited on its own: nothing to terminate.
    assert first == jobs.JobTeardown()
    with pytest.raises(JobClosedError, match="'late'"):
        job.spawn([sys.executable, "-c", "pass"], name="late")


def test_spawn_failure_names_the_process_and_program(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-program"
    with Job("spawn-error-test") as job:
        with pytest.raises(JobSpawnError) as failure:
            job.spawn([missing], name="core")
    assert "'core'" in str(failure.value) and str(missing) in str(failure.value)
    assert job.processes == ()


def test_signal_handlers_can_be_restored() -> None:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers can only be installed from the main thread")
    before = signal.getsignal(signal.SIGTERM)
    job = Job("handlers-test")
    restore = install_signal_handlers(job, signals=(signal.SIGTERM,))
    try:
        assert signal.getsignal(signal.SIGTERM) is not before
    finally:
        restore()
        job.close()
    assert signal.getsignal(signal.SIGTERM) == before


# -- Windows Job Object ------------------------------------------------------------


@pytest.mark.skipif(sys.maxsize <= 2**32, reason="checks the 64-bit layout of the Job Object structures")
def test_job_object_limit_structures_match_the_64_bit_windows_layout() -> None:
    # winnt.h on x64: JOBOBJECT_BASIC_LIMIT_INFORMATION is 64 bytes, the
    # extended one 144, with IoInfo right after the basic block.
    assert ctypes.sizeof(jobs_windows._JobObjectBasicLimitInformation) == 64
    assert ctypes.sizeof(jobs_windows._JobObjectExtendedLimitInformation) == 144
    assert jobs_windows._JobObjectExtendedLimitInformation.IoInfo.offset == 64
    assert jobs_windows._JobObjectBasicLimitInformation.LimitFlags.offset == 16


@windows_only
@pytest.mark.slow
def test_closing_the_job_object_ends_children_and_grandchildren(leftovers: list[psutil.Process]) -> None:
    with Job("windows-test", grace=1.0) as job:
        worker = job.spawn([sys.executable, str(PROGRAM), "worker"], name="worker", stdout=subprocess.PIPE)
        ready, *fields = read_line(worker.popen.stdout, START_TIMEOUT).split()  # type: ignore[arg-type]
        assert ready == "ready"
        tree = {pid: psutil.Process(int(pid)) for pid in fields}
        leftovers.extend(tree.values())
        teardown = job.close()
    worker.popen.stdout.close()  # type: ignore[union-attr]

    assert teardown.terminated == ("worker",)
    assert teardown.survivors == ()
    assert still_running(tree) == []


@windows_only
@pytest.mark.slow
def test_the_job_object_ends_everything_when_the_runner_dies_without_closing(
    tmp_path: Path, leftovers: list[psutil.Process]
) -> None:
    runner = RunnerUnderTest.start(tmp_path, leftovers)
    runner.close()  # TerminateProcess: no handler, no atexit, no Job.close().

    # The kernel closes the runner's job handle as the runner dies and then
    # kills the members; that completes asynchronously, so wait, bounded.
    deadline = time.monotonic() + WAIT_S
    while still_running(runner.tree) and time.monotonic() < deadline:
        psutil.wait_procs(list(runner.tree.values()), timeout=POLL_S)
    assert still_running(runner.tree) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="orphans are adopted on Linux (a child subreaper)")
def test_an_adopting_job_leaves_the_children_its_host_already_had(leftovers: list[psutil.Process]) -> None:
    """A scenario run inside a host process (a test session sharing a server between tests) must not take the
    host's own children for orphans of the job: they were the host's children before the job opened."""
    host_child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    leftovers.append(psutil.Process(host_child.pid))
    try:
        with Job("adopting-in-a-host", grace=2.0, adopt_orphans=True) as job:
            own, _ = spawn_idle(job, "own")
        own.popen.stdout.close()  # type: ignore[union-attr]
        assert own.popen.poll() is not None, "the job's own child outlived it"
        assert host_child.poll() is None, "the job ended a child its host started before it opened"
    finally:
        host_child.kill()
        host_child.wait(timeout=WAIT_S)
