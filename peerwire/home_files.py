"""The files of a home, trusted before they are used.

A home's files are the app's own: each must be what it is named for (a plain
file, or the control socket), belong to the user who runs the app, and be
reached by its own name, never through a symbolic link: a link planted in a
home (``app.lock`` pointing at someone's file) would have the app truncate,
append to or serve a file outside it. :func:`check_entry` looks at a name
without following it (``lstat``); :func:`open_private` opens one with
``O_NOFOLLOW`` and checks what it opened (``fstat``), so a file swapped in
between cannot pass either, and tightens whatever it opens to 0600.

:func:`identify_store` reads a store's SQLite header before anything opens it
for writing, so a database that is not peerwire's, or one written by a newer
peerwire, is refused and left exactly as it was (not a byte, not a journal
mode, not a ``-wal`` beside it).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Callable
from urllib.parse import quote

from .errors import Code, PeerwireError

FILES: dict[str, tuple[Callable[[int], bool], str]] = {
    "peerwire.db": (stat.S_ISREG, "the store"),
    "peerwire.db-wal": (stat.S_ISREG, "the store's write-ahead log"),
    "peerwire.db-shm": (stat.S_ISREG, "the store's WAL index"),
    "peerwire.db-mark": (stat.S_ISREG, "the store's high-water mark"),
    "operator.token": (stat.S_ISREG, "the operator credential"),
    "app.lock": (stat.S_ISREG, "the app's lock file"),
    "app.log": (stat.S_ISREG, "the app's log"),
    "control.sock": (stat.S_ISSOCK, "the app's control socket"),
}
"""What each file of a home must be when it exists, and what it is for."""

APPLICATION_ID = 0x70776972
"""``PRAGMA application_id`` of every peerwire store ("pwir"): how a store is told from another program's."""

SQLITE_MAGIC = b"SQLite format 3\x00"
_HEADER_BYTES = 100
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)

_PEERWIRE_TABLES = frozenset({"meta", "agents", "sessions", "interactions", "requests", "claims", "cursors",
                              "evidence", "bindings"})
"""The tables every peerwire store has had since its first schema version."""


def shown(path: str | os.PathLike[str]) -> str:
    """A path as messages print it: UTF-8, with undecodable bytes escaped."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "directory"), (stat.S_ISREG, "regular file"), (stat.S_ISSOCK, "socket"),
                       (stat.S_ISFIFO, "named pipe"), (stat.S_ISLNK, "symbolic link")):
        if test(mode):
            return name
    return "device"


def user(uid: int) -> str:
    try:
        import pwd

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def home_invalid(path: str | os.PathLike[str], why: str, todo: str) -> PeerwireError:
    return PeerwireError(Code.HOME_INVALID, f"{shown(path)}: {why}; {todo}", {"file": shown(path)})


def unusable(exc: OSError, todo: str = "fix the path or choose another home") -> PeerwireError:
    """A filesystem failure while preparing or reaching a home, as ``home_invalid`` naming the file."""
    culprit = exc.filename if exc.filename is not None else "the home"
    return home_invalid(culprit, exc.strerror or str(exc), todo)


def store_damaged(path: Path, why: str, todo: str) -> PeerwireError:
    return PeerwireError(Code.STORE_DAMAGED, f"{shown(path)}: {why}; {todo}", {"file": shown(path)})


def _foreign(path: Path, owner: int) -> PeerwireError:
    return home_invalid(path, f"this file belongs to {user(owner)}, not to you ({user(os.geteuid())})",
                        "a home's files are private to the user who runs its app: remove it, or run peerwire "
                        "as its owner")


def _linked(path: Path) -> PeerwireError:
    try:
        target = f" (to {shown(os.readlink(path))})"
    except OSError:
        target = ""
    return home_invalid(path, f"this is a symbolic link{target}, and a home's files are never reached through "
                              "one", "remove the link; the app creates its own file")


def check_entry(path: Path) -> os.stat_result | None:
    """The file ``path`` of a home as it is (not followed), or ``None`` when there is none.

    Raises ``home_invalid`` for a symbolic link, a file of the wrong kind and
    one that belongs to another user.
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise unusable(exc) from None
    if stat.S_ISLNK(info.st_mode):
        raise _linked(path)
    is_expected, what = FILES[path.name]
    if not is_expected(info.st_mode):
        raise home_invalid(path, f"this is a {kind(info.st_mode)}, but {what} belongs here",
                           f"move it out of {shown(path.parent)}")
    if info.st_uid != os.geteuid():
        raise _foreign(path, info.st_uid)
    return info


def open_private(path: Path, flags: int, *, tighten: bool | None = None) -> int:
    """Open the home's file ``path`` (``os.open`` flags) without following a link; check and tighten it.

    What was opened must be a regular file of this user's. Opened to write
    (or with ``tighten``), a group or world permission bit is removed
    (``fchmod`` 0600): every file the app writes is private. Raises
    ``home_invalid`` otherwise, having closed it.
    """
    if tighten is None:
        tighten = bool(flags & (os.O_WRONLY | os.O_RDWR))
    try:
        fd = os.open(path, flags | _NOFOLLOW | _CLOEXEC, 0o600)
    except OSError as exc:
        if os.path.islink(path):
            raise _linked(path) from None
        raise unusable(exc) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise home_invalid(path, f"this is a {kind(info.st_mode)}, but {FILES[path.name][1]} belongs here",
                               f"move it out of {shown(path.parent)}")
        if info.st_uid != os.geteuid():
            raise _foreign(path, info.st_uid)
        if tighten and stat.S_IMODE(info.st_mode) & 0o077:
            os.fchmod(fd, 0o600)
    except BaseException:
        os.close(fd)
        raise
    return fd


def identify_store(path: Path, latest: int) -> None:
    """Refuse, untouched, a file at ``path`` that is not a peerwire store this peerwire can open.

    Read from the header alone when the store says it is peerwire's
    (:data:`APPLICATION_ID`); a store from before that mark is recognised,
    read-only, by its tables. Raises ``store_damaged`` for an empty file, one
    that is not SQLite, another program's database, and a schema newer than
    ``latest``.
    """
    fd = open_private(path, os.O_RDONLY)
    try:
        header = os.pread(fd, _HEADER_BYTES, 0)
    finally:
        os.close(fd)
    restore = "restore it from a backup, or move it away to start an empty home (every agent must then be " \
              "registered again)"
    if not header:
        raise store_damaged(path, "the store is empty (0 bytes), so this home's agents and records are gone; "
                                  "peerwire will not start over on it", restore)
    if len(header) < _HEADER_BYTES or not header.startswith(SQLITE_MAGIC):
        raise store_damaged(path, "the store is damaged (this is not a SQLite database: file is not a database); "
                                  "peerwire will not serve or overwrite it", f"copy it aside and {restore}")
    version = int.from_bytes(header[60:64], "big")
    application = int.from_bytes(header[68:72], "big")
    if application == 0:
        version = _legacy_store_version(path)
    elif application != APPLICATION_ID:
        raise _not_ours(path, f"its application id is {application:#x}")
    if version > latest:
        raise store_damaged(path, f"the store's schema is version {version}, written by a newer peerwire than "
                                  f"this one (which knows versions up to {latest}); it was left as it is",
                            "run the peerwire that wrote it, or upgrade this one")


def _not_ours(path: Path, why: str) -> PeerwireError:
    return store_damaged(path, f"this is another program's SQLite database, not a peerwire store ({why}); it was "
                               "left exactly as it is", "move it out of the home, or choose another home")


def _legacy_store_version(path: Path) -> int:
    """The schema version of a store from before the application id, read-only; refuses anything else.

    Read as an immutable file (no lock, no journal) unless a write-ahead log
    beside it may hold the newest schema, which only a normal read sees.
    """
    import sqlite3  # a store's reader's alone: a server process never opens one

    wal = path.with_name(path.name + "-wal")
    mode = "mode=ro" if wal.exists() else "immutable=1"
    try:
        with contextlib.closing(sqlite3.connect(f"file:{quote(os.fspath(path))}?{mode}", uri=True)) as db:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError:
        return 0  # what a normal open then finds (a damaged file) is refused there
    if version == 0 or not _PEERWIRE_TABLES <= tables:
        raise _not_ours(path, f"user_version {version}, tables {', '.join(sorted(tables)) or 'none'}")
    return version
