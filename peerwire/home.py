"""A peerwire home: one directory holding one messaging core.

Layout: ``peerwire.db`` (the store), ``app.lock`` (held by the running app, with
its pid), ``control.sock`` (the app's private control socket, mode 0600) and
``app.log``. The directory itself is 0700: file permissions are what make the
control socket private.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .errors import Code, PeerwireError

HOME_ENV = "PEERWIRE_HOME"
SESSION_ENV = "PEERWIRE_SESSION_ID"

# sun_path holds 108 bytes on Linux (104 on macOS); longer homes are reached
# through a short /proc/self/fd alias of the directory.
_SUN_PATH_MAX = 100


@dataclass(frozen=True)
class Home:
    path: Path

    @classmethod
    def from_env(cls, explicit: str | os.PathLike | None = None) -> "Home":
        value = explicit or os.environ.get(HOME_ENV)
        if not value:
            raise PeerwireError(Code.HOME_MISSING, f"no home given: pass --home or set {HOME_ENV}")
        return cls(Path(value).expanduser().absolute())

    @property
    def db(self) -> Path:
        return self.path / "peerwire.db"

    @property
    def lock(self) -> Path:
        return self.path / "app.lock"

    @property
    def socket(self) -> Path:
        return self.path / "control.sock"

    @property
    def log(self) -> Path:
        return self.path / "app.log"

    def exists(self) -> bool:
        return self.db.is_file()

    def create(self) -> None:
        """Create the directory 0700 (tightening an existing one we own)."""
        self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.path, 0o700)

    def require(self) -> None:
        if not self.path.is_dir():
            raise PeerwireError(
                Code.HOME_MISSING,
                f"home {self.path} does not exist; run `peerwire home init --home {self.path}` or start the app",
            )

    @contextlib.contextmanager
    def socket_address(self) -> Iterator[str]:
        """A path usable for bind()/connect() even when the home path is long."""
        full = str(self.socket)
        if len(full.encode()) <= _SUN_PATH_MAX or not sys.platform.startswith("linux"):
            yield full
            return
        fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            yield f"/proc/self/fd/{fd}/{self.socket.name}"
        finally:
            os.close(fd)


class HomeLock:
    """The app's exclusive lock on a home; the holder's pid is written into it."""

    def __init__(self, home: Home):
        self.home = home
        self._fd: int | None = None

    def acquire(self) -> None:
        import fcntl

        fd = os.open(self.home.lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                holder = self.holder()
                raise PeerwireError(
                    Code.HOME_LOCKED,
                    f"home {self.home.path} is owned by a running app (pid {holder.get('pid', '?')}); "
                    "stop it first or use another home",
                    holder,
                ) from None
            raise
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "argv": sys.argv}).encode())
        os.fsync(fd)
        self._fd = fd

    def holder(self) -> dict:
        try:
            return json.loads(self.home.lock.read_text() or "{}")
        except (OSError, ValueError):
            return {}

    def release(self) -> None:
        if self._fd is None:
            return
        import fcntl

        # Emptied before unlocking so a stale pid is never read as a live holder.
        os.ftruncate(self._fd, 0)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None
