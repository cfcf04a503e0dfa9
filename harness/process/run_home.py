"""The run home: one private, exclusively locked directory per acceptance run.

Layout of ``<root>/<run id>/``::

    run.lock                  the lock; names the process holding it
    core/                     the messaging core's home
    agents/<name>/codex_home/ the agent's private CODEX_HOME
    agents/<name>/workspace/  the agent's fixture workspace
    artifacts/                what the run produced, for the report

Everything is created owner-only (directories 0700, the lock file 0600): a
run home holds agent homes that may carry provider credentials.

A passing run's home is removed when the run ends, unless it is to be kept; a
failed run's home is always kept, and its path reported, for inspection.

The lock file's record says which: ``"state": "running"`` while the holder
works, ``"kept"`` once it kept the home on purpose. A home whose lock is free
while its record still says running lost its owner mid-run (SIGKILL, a power
cut): :func:`sweep_stale` removes such homes, and only those.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import secrets
import shutil
import stat
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

__all__ = [
    "AgentHome",
    "StaleHome",
    "AgentNameError",
    "RunHome",
    "RunHomeError",
    "RunHomeLockedError",
    "default_runs_root",
    "new_run_id",
    "sweep_stale",
]

LOCK_FILE = "run.lock"

# Agent names become directory names: keep them to one safe path component.
_AGENT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")

# Windows locks a byte range, and a locked range cannot be read by others. Lock
# one byte far past the holder record, so a refused opener can still read who
# holds the home.
_WINDOWS_LOCK_OFFSET = 1 << 20


_ROOT_ATTEMPTS = 3
"""Tries at making a home whose default root another run may remove as it empties it."""


class RunHomeError(Exception):
    """A run home cannot be created, locked or used."""


class RunHomeLockedError(RunHomeError):
    """Another process holds the run home's lock.

    ``holder`` is the record the holder wrote (pid, argv, started_at), or an
    empty dict when it could not be read (the holder may still be writing it).
    """

    def __init__(self, path: Path, holder: dict[str, Any]) -> None:
        self.path = path
        self.holder = holder
        self.holder_pid: int | None = holder.get("pid")
        if self.holder_pid is None:
            who = "another process (its record is not readable yet)"
        else:
            who = f"pid {self.holder_pid}"
            if holder.get("argv"):
                who += f" ({' '.join(map(str, holder['argv']))})"
            if holder.get("started_at"):
                who += f", since {holder['started_at']}"
        super().__init__(
            f"run home {path} is locked by {who}. Wait for that run to end, stop it, "
            f"or use another run id."
        )


class AgentNameError(RunHomeError, ValueError):
    """An agent name that cannot be used as a directory name."""


_last_stamp = datetime.datetime.min.replace(tzinfo=datetime.timezone.utc)
_stamp_lock = threading.Lock()


def new_run_id() -> str:
    """A fresh run id: a UTC timestamp and a short random suffix.

    E.g. ``20261130T054412.123456Z-3f9a1c``. Ids sort in creation order: to
    the microsecond across processes, strictly within one (a clock that has
    not moved on is nudged forward a microsecond). The suffix keeps concurrent
    runs of different processes apart.
    """
    global _last_stamp
    with _stamp_lock:
        now = datetime.datetime.now(datetime.timezone.utc)
        if now <= _last_stamp:
            now = _last_stamp + datetime.timedelta(microseconds=1)
        _last_stamp = now
    return f"{now:%Y%m%dT%H%M%S.%fZ}-{secrets.token_hex(3)}"


def default_runs_root() -> Path:
    """Where run homes go unless told otherwise: ``<system temp dir>/peerwire-runs``."""
    return Path(tempfile.gettempdir()) / "peerwire-runs"


@dataclass(frozen=True)
class AgentHome:
    """One agent's directories inside a run home."""

    name: str
    root: Path
    codex_home: Path
    workspace: Path


class RunHome:
    """One acceptance run's home directory; a context manager.

    ``RunHome(root, run_id=..., keep=...)`` names ``<root>/<run_id>``; nothing
    is touched until :meth:`open` (or ``with``), which creates the directory,
    takes its lock and lays out ``core/`` and ``artifacts/``. A second RunHome
    on the same directory, in this process or another, is refused with
    :class:`RunHomeLockedError` naming the holder's pid.

    ``root`` defaults to :func:`default_runs_root`; it is created owner-only if
    missing and must belong to the current user. ``run_id`` defaults to
    :func:`new_run_id`; an existing directory with that id (say, a kept run) is
    reused once its lock is free.

    Leaving the ``with`` block by an exception (SystemExit with a non-zero
    status and KeyboardInterrupt included) or after :meth:`mark_failed` keeps
    the home; otherwise it is removed unless ``keep`` is true. A kept home's
    path is printed to stderr. End the processes that write into the home (their job)
    before the home itself: ``with RunHome() as home, Job() as job:`` does.
    """

    def __init__(self, root: str | os.PathLike[str] | None = None, *, run_id: str | None = None,
                 keep: bool = False) -> None:
        self.root = Path(root) if root is not None else default_runs_root()
        self.run_id = run_id if run_id is not None else new_run_id()
        if not self.run_id or Path(self.run_id).name != self.run_id or self.run_id in (".", ".."):
            raise RunHomeError(f"run id {self.run_id!r} must be a single path component")
        self.path = self.root / self.run_id
        self.keep = keep
        self.failure: str | None = None
        """Why the run failed, once :meth:`mark_failed` was called."""
        self._lock_file: BinaryIO | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"<RunHome {self.path}>"

    @property
    def core(self) -> Path:
        """The messaging core's home directory."""
        return self.path / "core"

    @property
    def artifacts(self) -> Path:
        """Where the run's artifacts go."""
        return self.path / "artifacts"

    @property
    def lock_path(self) -> Path:
        return self.path / LOCK_FILE

    @property
    def is_open(self) -> bool:
        return self._lock_file is not None

    def open(self) -> RunHome:
        """Create and lock the home, then lay out ``core/`` and ``artifacts/``.

        Raises :class:`RunHomeLockedError` if another holder has it, and
        :class:`RunHomeError` for a root that is not a directory of ours.
        Nothing inside a home held by someone else is modified.
        """
        if self._lock_file is not None:
            return self
        if self._closed:
            raise RunHomeError(f"run home {self.path} was closed; open a new RunHome")
        for attempt in range(_ROOT_ATTEMPTS):
            _make_private_dir(self.root, parents=True)
            try:
                _check_owned_directory(self.root)
                _make_private_dir(self.path)
                break
            except FileNotFoundError:
                # Another run removed the default root as it emptied it, between our two steps: make it again.
                if attempt == _ROOT_ATTEMPTS - 1:
                    raise
        self._lock_file = _acquire_lock(self.lock_path)
        # Changed only once the home is ours: a refused opener touches nothing.
        os.chmod(self.path, 0o700)
        for directory in (self.core, self.artifacts, self.path / "agents"):
            _make_private_dir(directory)
        return self

    def agent(self, name: str) -> AgentHome:
        """Create (if needed) and return the directories of agent ``name``.

        ``name`` must be lower-case letters, digits, ``-`` and ``_``, starting
        with a letter or digit, at most 63 characters: it becomes a directory
        name. Raises :class:`AgentNameError` otherwise.
        """
        self._require_open()
        if not _AGENT_NAME.fullmatch(name):
            raise AgentNameError(
                f"agent name {name!r} is not usable as a directory name: use lower-case letters, "
                f"digits, '-' and '_', starting with a letter or digit"
            )
        root = self.path / "agents" / name
        home = AgentHome(name=name, root=root, codex_home=root / "codex_home", workspace=root / "workspace")
        for directory in (home.root, home.codex_home, home.workspace):
            _make_private_dir(directory)
        return home

    def mark_failed(self, reason: str) -> None:
        """Record that the run failed, so its home is kept for inspection."""
        self.failure = reason

    def close(self, *, failed: bool = False) -> Path | None:
        """Release the home: keep it and return its path, or remove it and return None.

        The home is kept when ``failed`` is true, :meth:`mark_failed` was
        called, or ``keep`` was set. Idempotent; a later call returns None.
        """
        if self._lock_file is None:
            return None
        lock_file, self._lock_file = self._lock_file, None
        self._closed = True
        if failed and self.failure is None:
            self.failure = "failed"
        kept = self.keep or self.failure is not None
        if kept:
            # Marked before the lock is released, so a sweep never takes a kept home for a stale one.
            _write_record(lock_file, {**_read_holder(lock_file), "state": "kept",
                                      "reason": self.failure or "kept on request"})
            lock_file.close()  # Closing the file releases the lock.
            return self.path
        if sys.platform == "win32":
            # An open file cannot be deleted there: unlock first. Another run
            # could take the home in between; it would only find it vanishing.
            lock_file.close()
            _remove_tree(self.path)
        else:
            # Removed while still locked, so no other run can claim it midway;
            # the descriptor stays valid after its file is unlinked.
            _remove_tree(self.path)
            lock_file.close()
        if self.root == default_runs_root():
            # A clean run leaves nothing in the temporary directory, not even the empty folder of run homes
            # (rmdir refuses a folder another run's home is in).
            try:
                self.root.rmdir()
            except OSError:
                pass
        return None

    def __enter__(self) -> RunHome:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.failure is None and _is_failure(exc):
            self.failure = type(exc).__name__ if not str(exc) else f"{type(exc).__name__}: {exc}"
        kept = self.close()
        if kept is not None:
            what = "failed run" if self.failure is not None else "run"
            print(f"peerwire: kept the home of {what} {self.run_id}: {kept}", file=sys.stderr)

    def _require_open(self) -> None:
        if self._lock_file is None:
            raise RunHomeError(f"run home {self.path} is not open")


def _is_failure(exc: BaseException | None) -> bool:
    if exc is None:
        return False
    if isinstance(exc, SystemExit):
        return exc.code not in (None, 0)
    return True


def _make_private_dir(path: Path, *, parents: bool = False) -> None:
    try:
        path.mkdir(mode=0o700, parents=parents)
    except FileExistsError:
        if not path.is_dir():
            raise RunHomeError(f"{path} exists and is not a directory") from None
        return
    # mkdir's mode is filtered through the umask; set it exactly.
    os.chmod(path, 0o700)


def _check_owned_directory(path: Path) -> None:
    """Refuse a runs root someone else controls: they could swap our homes out."""
    if sys.platform == "win32":
        return  # Ownership is ACL-based there; the user's temp dir is private already.
    # The link itself too: a symlink planted in a shared temp dir could point
    # at a directory of ours elsewhere.
    for owner in (path.lstat().st_uid, path.stat().st_uid):
        if owner != os.getuid():
            raise RunHomeError(
                f"runs root {path} belongs to uid {owner}, not to you (uid {os.getuid()}); "
                f"choose another root for run homes"
            )
    info = path.stat()
    # World-writable without the sticky bit (which /tmp has): anyone could
    # rename our run homes away and put their own in place.
    if info.st_mode & stat.S_IWOTH and not info.st_mode & stat.S_ISVTX:
        raise RunHomeError(
            f"runs root {path} is writable by others (mode {stat.S_IMODE(info.st_mode):o}); "
            f"make it private (chmod 700) or choose another root"
        )


def _acquire_lock(path: Path) -> BinaryIO:
    """Lock ``path`` exclusively and record this process as the holder."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    lock_file = os.fdopen(fd, "r+b")
    try:
        if not _try_lock(lock_file):
            raise RunHomeLockedError(path.parent, _read_holder(lock_file))
        _write_record(lock_file, {
            "pid": os.getpid(),
            "argv": sys.argv,
            "started_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "state": "running",
        })
    except BaseException:
        lock_file.close()
        raise
    return lock_file


def _write_record(lock_file: BinaryIO, record: dict[str, Any]) -> None:
    lock_file.seek(0)
    lock_file.truncate()
    lock_file.write(json.dumps(record).encode() + b"\n")
    lock_file.flush()


@dataclass(frozen=True)
class StaleHome:
    """A run home removed by :func:`sweep_stale`: its id and the owner that died holding it."""

    run_id: str
    pid: int | None
    started_at: str | None


def sweep_stale(root: str | os.PathLike[str] | None = None) -> list[StaleHome]:
    """Remove the run homes under ``root`` whose owner died mid-run; return them.

    A home is stale when its lock is free although its record says
    ``running``: only a dead holder releases the lock that way (a holder that
    ends normally removes its home or marks it ``kept``). Kept homes, homes
    being created (no record yet), homes of live runs and homes still in use
    are left alone: a live run inside (a scenario's own run home still locked),
    a core app holding its home's lock, or any live process working there (its
    working directory, a file it holds open, a path on its command line). So
    is anything without a run lock. ``root`` defaults to :func:`default_runs_root`;
    a missing root holds nothing.
    """
    root = Path(root) if root is not None else default_runs_root()
    if not root.is_dir():
        return []
    _check_owned_directory(root)
    swept = []
    for home in sorted(root.iterdir()):
        stale = _take_if_stale(home)
        if stale is not None:
            swept.append(stale)
    return swept


def _take_if_stale(home: Path) -> StaleHome | None:
    lock_path = home / LOCK_FILE
    try:
        fd = os.open(lock_path, os.O_RDWR)  # never created here: a creator may be about to
    except OSError:
        return None
    with os.fdopen(fd, "r+b") as lock_file:
        record = _read_holder(lock_file)
        if record.get("state") != "running" or not _try_lock(lock_file):
            return None
        # Ours now; re-read in case the holder wrote its final state just before it let go.
        record = _read_holder(lock_file)
        if record.get("state") != "running" or _holds_live_lock(home) or _worked_in(home):
            return None
        _remove_tree(home)
        return StaleHome(run_id=home.name, pid=record.get("pid"), started_at=record.get("started_at"))


HELD_LOCKS = (LOCK_FILE, "app.lock")
"""Locks below a run home whose holder keeps it alive: a scenario's run home, a core app's home."""


def _holds_live_lock(home: Path) -> bool:
    """Whether any lock below ``home`` is held (a worker of the dead run, or a core app in it, still at work).

    Where the kernel lists its locks (Linux ``/proc/locks``) they are looked up
    without being taken, so a lock is never snatched from a holder starting up.
    """
    nested = [path for name in HELD_LOCKS for path in home.rglob(name) if path != home / LOCK_FILE]
    held = _kernel_flocks()
    for path in nested:
        try:
            info = path.stat()
        except OSError:
            continue
        if held is not None:
            if (os.major(info.st_dev), os.minor(info.st_dev), info.st_ino) in held:
                return True
            continue
        try:
            with open(path, "r+b") as lock_file:
                if not _try_lock(lock_file):
                    return True
        except OSError:
            continue
    return False


def _kernel_flocks() -> set[tuple[int, int, int]] | None:
    """(major, minor, inode) of every file the kernel holds a lock on, or ``None`` where it does not say."""
    try:
        text = Path("/proc/locks").read_text()
    except OSError:
        return None
    held = set()
    for line in text.splitlines():
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" (a blocked waiter has "->" after the number)
        device = next((f for f in fields if f.count(":") == 2), None)
        if device is None:
            continue
        major, minor, inode = device.split(":")
        try:
            held.add((int(major, 16), int(minor, 16), int(inode)))
        except ValueError:
            continue
    return held


def _worked_in(home: Path) -> bool:
    """Whether a live process works inside ``home``: its working directory, a file it holds open, or a path
    on its command line lies there (a Codex of the dead run in its workspace, an app on its core home)."""
    import psutil

    spellings = {os.path.realpath(home), os.path.normpath(os.path.abspath(home))}

    def within(path: str | None) -> bool:
        return bool(path) and any(path == inside or path.startswith(inside + os.sep)  # type: ignore[union-attr]
                                  for inside in spellings)

    def named(arg: str) -> bool:
        # Another process's argument is read as written, never resolved here: /dev/fd/3 or /proc/self/...
        # would resolve through this process's own descriptors (the lock of the very home being swept).
        return arg.startswith(os.sep) and within(os.path.normpath(arg))

    me = os.getpid()
    for proc in psutil.process_iter(["pid", "cwd", "cmdline", "uids"]):
        info = proc.info
        if info["pid"] == me:
            continue
        if within(info.get("cwd")) or any(named(arg) for arg in info.get("cmdline") or ()):
            return True
        uids = info.get("uids")
        if uids is None or uids.real != os.getuid():
            continue
        try:
            if any(within(f.path) for f in proc.open_files()):
                return True
        except psutil.Error:
            continue
    return False


def _try_lock(lock_file: BinaryIO) -> bool:
    if sys.platform == "win32":
        import msvcrt

        lock_file.seek(_WINDOWS_LOCK_OFFSET)
        try:
            msvcrt.locking(lock_file.fileno(), msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    # flock, not fcntl/lockf: its lock belongs to this open file, so a second
    # opener in the same process is refused too, and closing any other
    # descriptor of the file does not drop it.
    try:
        fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _read_holder(lock_file: BinaryIO) -> dict[str, Any]:
    lock_file.seek(0)
    try:
        record = json.loads(lock_file.read(64 * 1024).decode().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return {}  # Empty or half-written: the holder may be writing it right now.
    return record if isinstance(record, dict) else {}


def _remove_tree(path: Path) -> None:
    def make_writable_and_retry(function: Any, target: str, *_: Any) -> None:
        # Read-only files (Git objects) cannot be deleted on Windows as they are.
        os.chmod(target, stat.S_IWRITE | stat.S_IREAD)
        function(target)

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=make_writable_and_retry)
    else:
        shutil.rmtree(path, onerror=make_writable_and_retry)
