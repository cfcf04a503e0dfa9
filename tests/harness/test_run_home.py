"""Run homes: private, exclusively locked, kept when the run fails."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from .child_output import read_line
from harness.process.run_home import (
    AgentNameError,
    RunHome,
    RunHomeError,
    RunHomeLockedError,
    default_runs_root,
    new_run_id,
    sweep_stale,
)
from tests.patience import WAIT_S

HOLDER = Path(__file__).parent / "programs" / "hold_run_home.py"
START_TIMEOUT = WAIT_S

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX modes and ownership")
windows_only = pytest.mark.skipif(
    sys.platform != "win32", reason="msvcrt byte-range locks exist only on Windows; POSIX uses flock"
)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "runs"


def test_open_lays_out_core_artifacts_and_agent_directories(root: Path) -> None:
    with RunHome(root, keep=True) as home:
        alice = home.agent("alice")
        bob = home.agent("bob-2")

        assert home.path == root / home.run_id
        assert home.core.is_dir() and home.core == home.path / "core"
        assert home.artifacts.is_dir() and home.artifacts == home.path / "artifacts"
        assert alice.codex_home == home.path / "agents" / "alice" / "codex_home"
        assert alice.workspace == home.path / "agents" / "alice" / "workspace"
        assert alice.codex_home.is_dir() and alice.workspace.is_dir()
        assert bob.codex_home.is_dir() and bob.workspace.is_dir()
        # Asking again returns the same directories, untouched.
        (alice.workspace / "note").write_text("kept")
        assert home.agent("alice") == alice
        assert (alice.workspace / "note").read_text() == "kept"


@posix_only
def test_every_directory_is_owner_only_and_the_lock_file_private(root: Path) -> None:
    previous_umask = os.umask(0o022)  # A common, permissive umask: modes must not depend on it.
    try:
        with RunHome(root, keep=True) as home:
            agent = home.agent("alice")
            directories = [root, home.path, home.core, home.artifacts,
                           agent.root, agent.codex_home, agent.workspace]
            assert {str(d): mode(d) for d in directories} == {str(d): 0o700 for d in directories}
            assert mode(home.lock_path) == 0o600
    finally:
        os.umask(previous_umask)


def test_the_lock_file_names_its_holder(root: Path) -> None:
    with RunHome(root, keep=True) as home:
        record = json.loads(home.lock_path.read_text())
    assert record["pid"] == os.getpid()
    assert record["argv"] == sys.argv
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", record["started_at"])


def test_run_ids_are_unique_and_sort_in_creation_order() -> None:
    ids = [new_run_id() for _ in range(200)]
    assert sorted(ids) == ids
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"\d{8}T\d{6}\.\d{6}Z-[0-9a-f]{6}", run_id) for run_id in ids)


def test_the_default_root_is_peerwire_runs_in_the_temp_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert default_runs_root() == tmp_path / "peerwire-runs"
    home = RunHome()
    assert home.root == tmp_path / "peerwire-runs"
    with home:
        assert home.path.is_dir()
    assert not home.path.exists()
    assert not home.root.exists(), "a clean run leaves nothing in the temporary directory"


def test_the_default_root_stays_while_another_home_is_in_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with RunHome() as other:
        with RunHome():
            pass
        assert other.path.is_dir()
    failed = RunHome()
    with failed:
        failed.mark_failed("a check failed")
    assert failed.path.is_dir(), "a failed run's home is kept, and its root with it"


def test_a_home_is_made_even_if_another_run_removes_the_empty_root_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race a clean run's rmdir opens: the root vanishes between making it and making the home in it."""
    import harness.process.run_home as run_home

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    made = run_home._make_private_dir
    removed = []

    def vanishing(path: Path, *, parents: bool = False) -> None:
        made(path, parents=parents)
        if parents and not removed:
            removed.append(path)
            path.rmdir()  # another run's close, just now

    monkeypatch.setattr(run_home, "_make_private_dir", vanishing)
    with RunHome() as home:
        assert home.path.is_dir() and removed


def test_a_passing_run_home_is_removed(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with RunHome(root) as home:
        (home.agent("alice").workspace / "file").write_text("x")
    assert not home.path.exists()
    assert home.close() is None
    assert capsys.readouterr().err == ""


def test_keep_keeps_a_passing_run_home(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = RunHome(root, keep=True).open()
    assert home.close() == home.path
    assert home.path.is_dir()
    with RunHome(root, keep=True) as other:
        pass
    assert other.path.is_dir()
    assert capsys.readouterr().err == f"peerwire: kept the home of run {other.run_id}: {other.path}\n"


@pytest.mark.parametrize(
    "ending",
    [RuntimeError("scenario failed"), KeyboardInterrupt(), SystemExit(3)],
    ids=["exception", "keyboard-interrupt", "exit-3"],
)
def test_a_failed_run_home_is_kept_and_its_path_printed(
    root: Path, ending: BaseException, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(type(ending)):
        with RunHome(root) as home:
            raise ending
    assert home.path.is_dir()
    assert home.failure is not None and home.failure.startswith(type(ending).__name__)
    assert f"failed run {home.run_id}: {home.path}" in capsys.readouterr().err
    # The lock went with the run: the kept home can be opened again.
    RunHome(root, run_id=home.run_id, keep=True).open().close()


def test_a_successful_system_exit_removes_the_home(root: Path) -> None:
    with pytest.raises(SystemExit):
        with RunHome(root) as home:
            raise SystemExit(0)
    assert not home.path.exists()


def test_mark_failed_keeps_the_home(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with RunHome(root) as home:
        home.mark_failed("check task-reply failed")
    assert home.path.is_dir()
    assert home.failure == "check task-reply failed"
    assert str(home.path) in capsys.readouterr().err


def test_a_second_run_home_on_the_same_directory_is_refused(root: Path) -> None:
    first = RunHome(root, keep=True).open()
    second = RunHome(root, run_id=first.run_id)
    with pytest.raises(RunHomeLockedError) as refusal:
        second.open()
    assert refusal.value.holder_pid == os.getpid()
    assert f"pid {os.getpid()}" in str(refusal.value)
    assert not second.is_open
    # The refused opener changed nothing: the holder's home is intact.
    assert json.loads(first.lock_path.read_text())["pid"] == os.getpid()
    assert first.core.is_dir()

    first.close()
    second.open()
    assert second.is_open
    second.close()


@pytest.mark.slow
def test_the_error_names_a_holder_in_another_process(root: Path) -> None:
    run_id = new_run_id()
    holder = subprocess.Popen(
        [sys.executable, str(HOLDER), str(root), run_id], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert read_line(holder.stdout, START_TIMEOUT) == "ready"  # type: ignore[arg-type]
        with pytest.raises(RunHomeLockedError) as refusal:
            RunHome(root, run_id=run_id).open()
        assert refusal.value.holder_pid == holder.pid
        assert f"locked by pid {holder.pid}" in str(refusal.value)
        assert str(HOLDER) in str(refusal.value)  # its argv
        holder.stdin.write(b"done\n")  # type: ignore[union-attr]
        holder.stdin.flush()  # type: ignore[union-attr]
        assert holder.wait(timeout=START_TIMEOUT) == 0
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=START_TIMEOUT)
        holder.stdin.close()  # type: ignore[union-attr]
        holder.stdout.close()  # type: ignore[union-attr]
    # Its exit released the lock.
    RunHome(root, run_id=run_id).open().close()


@pytest.mark.parametrize("name", ["", "../escape", "a/b", "Alice", "-leading-dash", "x" * 64])
def test_agent_names_must_be_single_safe_path_components(root: Path, name: str) -> None:
    with RunHome(root) as home:
        with pytest.raises(AgentNameError, match="not usable as a directory name"):
            home.agent(name)
        assert list((home.path / "agents").iterdir()) == []


@pytest.mark.parametrize("run_id", ["", ".", "..", "a/b"])
def test_a_run_id_must_be_a_single_path_component(root: Path, run_id: str) -> None:
    with pytest.raises(RunHomeError, match="single path component"):
        RunHome(root, run_id=run_id)


def test_agents_need_an_open_home(root: Path) -> None:
    with pytest.raises(RunHomeError, match="not open"):
        RunHome(root).agent("alice")


def test_a_root_that_is_a_file_is_refused(tmp_path: Path) -> None:
    blocker = tmp_path / "runs"
    blocker.write_text("not a directory")
    with pytest.raises(RunHomeError, match="not a directory"):
        RunHome(blocker).open()


@posix_only
def test_a_root_owned_by_someone_else_is_refused(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root.mkdir()
    monkeypatch.setattr(os, "getuid", lambda: root.stat().st_uid + 1)
    with pytest.raises(RunHomeError, match="belongs to uid"):
        RunHome(root).open()
    assert list(root.iterdir()) == []


@posix_only
def test_a_root_others_can_write_to_is_refused(root: Path) -> None:
    root.mkdir()
    os.chmod(root, 0o777)
    with pytest.raises(RunHomeError, match="writable by others"):
        RunHome(root).open()
    assert list(root.iterdir()) == []


@windows_only
def test_the_holder_record_stays_readable_while_the_home_is_locked(root: Path) -> None:
    # msvcrt locks a byte range that others cannot read; the lock sits past the record.
    with RunHome(root, keep=True) as home:
        with open(home.lock_path, "rb") as other_handle:
            assert json.loads(other_handle.read())["pid"] == os.getpid()
        with pytest.raises(RunHomeLockedError):
            RunHome(root, run_id=home.run_id).open()



def _holder(root: Path, run_id: str) -> subprocess.Popen[bytes]:
    holder = subprocess.Popen([sys.executable, str(HOLDER), str(root), run_id],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert read_line(holder.stdout, START_TIMEOUT) == "ready"  # type: ignore[arg-type]
    return holder


def _end(holder: subprocess.Popen[bytes], *, kill: bool) -> None:
    if kill:
        holder.kill()
    else:
        holder.stdin.write(b"done\n")  # type: ignore[union-attr]
        holder.stdin.flush()  # type: ignore[union-attr]
    holder.wait(timeout=START_TIMEOUT)
    holder.stdin.close()  # type: ignore[union-attr]
    holder.stdout.close()  # type: ignore[union-attr]


@pytest.mark.slow
@posix_only
def test_sweep_removes_exactly_the_homes_whose_owner_died(root: Path) -> None:
    killed, kept, live = new_run_id(), new_run_id(), new_run_id()
    dead_holder = _holder(root, killed)
    _end(dead_holder, kill=True)  # SIGKILL: the home stays, its record still says running
    _end(_holder(root, kept), kill=False)  # ends normally with keep=True: kept on purpose
    live_holder = _holder(root, live)
    creating = root / new_run_id()
    creating.mkdir(mode=0o700)
    (creating / "run.lock").touch()  # a creator between mkdir and its record
    (root / "not-a-run").mkdir()
    try:
        swept = sweep_stale(root)
        assert [(s.run_id, s.pid) for s in swept] == [(killed, dead_holder.pid)]
        assert not (root / killed).exists()
        assert {p.name for p in root.iterdir()} == {kept, live, creating.name, "not-a-run"}
        assert json.loads((root / kept / "run.lock").read_text())["state"] == "kept"
        assert sweep_stale(root) == []
    finally:
        _end(live_holder, kill=False)


@pytest.mark.slow
@posix_only
def test_sweep_leaves_a_dead_run_whose_scenario_home_is_still_held(root: Path) -> None:
    outer = new_run_id()
    holder = _holder(root, outer)
    _end(holder, kill=True)
    scenario = _holder(root / outer / "scenarios", "smoke.attached")  # a worker that outlived its runner
    try:
        assert sweep_stale(root) == []
        assert (root / outer).is_dir()
    finally:
        _end(scenario, kill=False)
    assert [s.run_id for s in sweep_stale(root)] == [outer]


def test_sweep_of_a_missing_root_finds_nothing(tmp_path: Path) -> None:
    assert sweep_stale(tmp_path / "absent") == []


@pytest.mark.slow
@posix_only
def test_sweep_leaves_a_dead_runs_home_while_its_core_app_still_runs(root: Path) -> None:
    from harness.process.app import AppProcess
    from peerwire.home import Home

    outer = new_run_id()
    _end(_holder(root, outer), kill=True)
    app = AppProcess.start(Home(root / outer / "core"))  # the orphaned app of the dead run, holding its home
    try:
        assert sweep_stale(root) == []
        assert (root / outer / "core" / "peerwire.db").is_file()
    finally:
        app.terminate()
    assert [s.run_id for s in sweep_stale(root)] == [outer]


@pytest.mark.slow
@posix_only
@pytest.mark.parametrize("how", ["cwd", "open-file"])
def test_sweep_leaves_a_dead_runs_home_while_a_process_works_inside(root: Path, how: str) -> None:
    outer = new_run_id()
    _end(_holder(root, outer), kill=True)
    workspace = root / outer / "agents" / "b" / "workspace"
    workspace.mkdir(parents=True)
    (workspace / "notes.txt").write_text("")
    code = ("import sys, time; f = open(sys.argv[1]); print('ready', flush=True); time.sleep(600)"
            if how == "open-file" else "import time; print('ready', flush=True); time.sleep(600)")
    # A Codex stand-in: not locking anything, only working in the home (its cwd, or a file it holds open).
    worker = subprocess.Popen([sys.executable, "-c", code, str(workspace / "notes.txt")],
                              cwd=workspace if how == "cwd" else root, stdout=subprocess.PIPE,
                              start_new_session=True)
    try:
        assert read_line(worker.stdout, START_TIMEOUT) == "ready"  # type: ignore[arg-type]
        assert sweep_stale(root) == []
        assert workspace.is_dir()
    finally:
        worker.kill()
        worker.wait(timeout=START_TIMEOUT)
        worker.stdout.close()  # type: ignore[union-attr]
    assert [s.run_id for s in sweep_stale(root)] == [outer]


@pytest.mark.slow
@posix_only
def test_sweep_reads_another_processs_arguments_as_written_never_through_its_own_descriptors(root: Path) -> None:
    """``/dev/fd/3`` on another process's command line is that process's descriptor: resolved by the sweeper it
    would be the sweeper's own (the lock of the very home it is looking at), and a dead run would be kept for
    ever. A path into the home, as written, still keeps it."""
    outer = new_run_id()
    _end(_holder(root, outer), kill=True)
    own_descriptors = [f"{base}/{n}" for base in ("/dev/fd", "/proc/self/fd") for n in range(3, 32)]
    code = "import time; print('ready', flush=True); time.sleep(600)"
    bystander = subprocess.Popen([sys.executable, "-c", code, *own_descriptors], stdout=subprocess.PIPE,
                                 cwd=root, start_new_session=True)
    try:
        assert read_line(bystander.stdout, START_TIMEOUT) == "ready"  # type: ignore[arg-type]
        named = subprocess.Popen([sys.executable, "-c", code, str(root / outer / "agents" / "b")],
                                 stdout=subprocess.PIPE, cwd=root, start_new_session=True)
        try:
            assert read_line(named.stdout, START_TIMEOUT) == "ready"  # type: ignore[arg-type]
            assert sweep_stale(root) == [], "a process naming a path in the home works there"
        finally:
            named.kill()
            named.wait(timeout=START_TIMEOUT)
            named.stdout.close()  # type: ignore[union-attr]
        assert [s.run_id for s in sweep_stale(root)] == [outer]
    finally:
        bystander.kill()
        bystander.wait(timeout=START_TIMEOUT)
        bystander.stdout.close()  # type: ignore[union-attr]
