"""A peerwire home: one directory holding one messaging core.

Layout: ``peerwire.db`` (the store, with SQLite's ``-wal`` and ``-shm`` beside
it, and its high-water mark ``-mark``), ``operator.token`` (the operator
credential), ``app.lock`` (held by the running app, with its pid),
``control.sock`` (the app's private control socket) and ``app.log``. The directory is 0700 and
every file in it 0600 from the moment it exists: file permissions are what make
the control socket and the session tokens' hashes private.

A home in a bad state is refused, never repaired or started over: each check
raises ``home_invalid`` (the path or a file in it cannot be used) or
``store_damaged`` (the store is not a whole peerwire store) with one line that
names the file and says what to do.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from .errors import Code, PeerwireError
from .home_files import FILES, check_entry, home_invalid, identify_store, kind, open_private, shown, unusable, user
from .limits import STORE_PATH_MAX_BYTES, TOKEN_BYTES

if TYPE_CHECKING:
    import sqlite3

    from .store import Store
    from .store.mark import HighWater

log = logging.getLogger("peerwire.home")

HOME_ENV = "PEERWIRE_HOME"
SESSION_ENV = "PEERWIRE_SESSION_ID"

# sun_path holds 108 bytes on Linux (104 on macOS); longer homes are reached
# through a short /proc/self/fd alias of the directory.
_SUN_PATH_MAX = 100

try:
    PATH_MAX = os.pathconf("/", "PC_PATH_MAX")
except (AttributeError, OSError, ValueError):  # no pathconf (Windows) or no answer
    PATH_MAX = 4096
"""The system's limit on a path, terminating NUL included."""

_STORE_FILES = ("peerwire.db", "peerwire.db-wal", "peerwire.db-shm")


@dataclass(frozen=True)
class Home:
    path: Path

    @classmethod
    def from_env(cls, explicit: str | os.PathLike | None = None) -> "Home":
        """The home named by ``explicit`` or ``$PEERWIRE_HOME``; its path is checked, nothing is touched."""
        value = explicit or os.environ.get(HOME_ENV)
        if not value:
            raise PeerwireError(Code.HOME_MISSING, f"no home given: pass --home or set {HOME_ENV}")
        home = cls(Path(value).expanduser().absolute())
        home.check_path()
        return home

    @property
    def db(self) -> Path:
        return self.path / "peerwire.db"

    @property
    def wal(self) -> Path:
        return self.path / "peerwire.db-wal"

    @property
    def mark(self) -> Path:
        return self.path / "peerwire.db-mark"

    @property
    def operator(self) -> Path:
        return self.path / "operator.token"

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

    # -- checks ---------------------------------------------------------------

    def check_path(self) -> None:
        """The path itself: UTF-8 (SQLite and MCP configurations take nothing else) and under PATH_MAX."""
        raw = os.fsencode(self.path)
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            raise home_invalid(self.path, "the home path is not valid UTF-8",
                               "choose a home whose path is UTF-8") from None
        if len(raw) >= PATH_MAX:
            raise home_invalid(self.path, f"the home path is {len(raw)} bytes, over the system's limit of "
                                          f"{PATH_MAX - 1}", "choose a shorter home path")

    def _check_directory(self) -> bool:
        """Whether the home exists; raises when it exists as something other than a directory of ours.

        A home reached through a symbolic link is accepted only when the link
        is the user's own too.
        """
        try:
            link = os.lstat(self.path)
            info = os.stat(self.path)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise unusable(exc) from None
        if not stat.S_ISDIR(info.st_mode):
            raise home_invalid(self.path, f"the home is a {kind(info.st_mode)}, not a directory",
                               "remove or rename it, or choose another home")
        for owner in {link.st_uid, info.st_uid}:
            if owner != os.geteuid():
                raise home_invalid(self.path, f"the home belongs to {user(owner)}, not to you "
                                              f"({user(os.geteuid())})",
                                   "a home is private to the user who runs its app: run peerwire as that user "
                                   "or choose a home of your own")
        return True

    def _check_files(self, names: tuple[str, ...]) -> None:
        for name in names:
            check_entry(self.path / name)

    def require_reachable(self) -> bool:
        """A client's checks before it connects; returns whether the home exists at all."""
        self.check_path()
        if not self._check_directory():
            return False
        self._check_files(("control.sock",))
        return True

    def prepare(self) -> None:
        """The app's checks, then the directory created 0700 (tightening an existing one of ours)."""
        self.check_path()
        db_bytes = len(os.fsencode(self.db))
        if db_bytes > STORE_PATH_MAX_BYTES:
            limit = STORE_PATH_MAX_BYTES - len(os.fsencode(self.db)) + len(os.fsencode(self.path))
            raise home_invalid(self.db, f"the store path is {db_bytes} bytes, and SQLite opens at most "
                                        f"{STORE_PATH_MAX_BYTES}", f"choose a home path of at most {limit} bytes")
        if not self._check_directory():
            try:
                self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
            except OSError as exc:
                raise unusable(exc, "create the home's parent directory or choose another home") from None
        # Private first: from now on nobody else can plant or swap a file in it, so what the checks
        # below find is what the app will open.
        os.chmod(self.path, 0o700)
        self._check_files(tuple(FILES))

    def create(self) -> None:
        """Create the directory 0700 (tightening an existing one we own)."""
        self.prepare()

    def require(self) -> None:
        if not self.path.is_dir():
            raise PeerwireError(
                Code.HOME_MISSING,
                f"home {self.path} does not exist; run `peerwire home init --home {self.path}` or start the app",
            )

    # -- the store ----------------------------------------------------------------

    def open_store(self, *, accept_loss: bool = False) -> "Store":
        """Open the home's store, creating it whole if there is none; call after :meth:`prepare`.

        An existing store must be a whole peerwire store: a 0-byte, foreign,
        truncated or damaged file (``PRAGMA quick_check``) is refused with
        ``store_damaged`` and left exactly as it was. A new store is built
        aside and linked into place, so a crash never leaves an empty one.

        The store must also be this home's own, as its high-water mark
        (:mod:`peerwire.store.mark`) knows it: a missing store where records
        were receipted, a store whose identity is not the mark's (another
        home's, or a new one) and a store holding fewer records than were
        receipted (rolled back to a copy, or a damaged write-ahead log) are
        refused with ``store_damaged``, unless ``accept_loss``: the operator
        accepts the loss, which is then recorded (``status`` lists it) and the
        mark follows this store from now on.
        """
        import sqlite3

        from .schema import LATEST
        from .store import Store
        from .store.files import StoreFiles
        from .store.mark import HighWater

        if check_entry(self.db) is None:
            if check_entry(self.mark) is not None and not accept_loss:
                known = HighWater(open_private(self.mark, os.O_RDONLY))
                try:
                    if known.knows_records:
                        raise self._refused("the store is missing", known)
                finally:
                    known.close()
            self._create_store()
        else:
            identify_store(self.db, LATEST)
            if not accept_loss:
                self._judge_by_mark()
        try:
            store = Store(self.db, verify=True)
        except sqlite3.DatabaseError as exc:
            raise self._store_error(exc) from None
        try:
            if self._make_private(_STORE_FILES):
                # Closing our descriptor on a file dropped the POSIX locks SQLite holds on it in this process;
                # without them another process's reader, as it closes, takes the app for gone and deletes the
                # write-ahead log under it. Opened afresh, SQLite takes them again.
                store.close()
                store = Store(self.db)
            self._attach_mark(store, HighWater(open_private(self.mark, os.O_RDWR | os.O_CREAT)), accept_loss)
            store.database.files = StoreFiles(self.db)
        except BaseException:
            store.close()
            raise
        return store

    def _judge_by_mark(self) -> None:
        """Refuse a store that is not this home's own before anything writes to it, read-only.

        A store opened for writing is migrated, and closing it checkpoints and
        removes its write-ahead log: a refused one must keep both as they are
        for whoever rescues it. :meth:`_attach_mark` judges again once the
        store is open (and alone where the mark is new).
        """
        import sqlite3
        from urllib.parse import quote

        from .store.mark import HighWater

        if check_entry(self.mark) is None:
            return
        known = HighWater(open_private(self.mark, os.O_RDONLY))
        try:
            if not known.knows_records:
                return
            try:
                with contextlib.closing(sqlite3.connect(f"file:{quote(os.fspath(self.db))}?mode=ro", uri=True)) as db:
                    identity = db.execute("SELECT value FROM meta WHERE key = 'node_id'").fetchone()
                    seq = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'interactions'").fetchone()
            except sqlite3.DatabaseError:
                return  # a damaged store is refused, untouched, when it is opened (quick_check)
            last = seq[0] if seq else 0
            if identity is not None and known.identity is not None and identity[0] != known.identity:
                raise self._refused(f"the store's identity is {identity[0]}, but this home's store is "
                                    f"{known.identity}: it is another home's store, or a new one in place of this "
                                    "home's", known)
            if known.value > last:
                raise self._refused(f"the store holds records up to seq {last}, but this home receipted records up "
                                    f"to seq {known.value}: it was rolled back to an older copy, or its write-ahead "
                                    "log was damaged", known)
        finally:
            known.close()

    def _attach_mark(self, store: "Store", mark: "HighWater", accept_loss: bool) -> None:
        """Compare the store with its high-water mark, refuse (or, accepted, record) a loss, keep the mark going.

        An accepted loss is logged in one line naming the store's files,
        recorded in the store (``status`` lists it) and its sequence numbers
        are never used again.
        """
        store.database.mark = mark
        last = store.database.last_seq()
        foreign = mark.identity is not None and mark.identity != store.database.node_id
        if foreign or mark.value > last:
            if not accept_loss:
                why = (f"the store's identity is {store.database.node_id}, but this home's store is {mark.identity}: "
                       "it is another home's store, or a new one in place of this home's" if foreign else
                       f"the store holds records up to seq {last}, but this home receipted records up to seq "
                       f"{mark.value}: it was rolled back to an older copy, or its write-ahead log was damaged")
                raise self._refused(why, mark)
            if mark.value > last:
                lost = store.database.record_loss(last + 1, mark.value, self.wal)
                log.error("%s: %d receipted records (seq %d..%d) are missing, and the operator accepted the loss "
                          "(--accept-store-loss); serving what remains (their sequence numbers are never reused); "
                          "restore %s from a backup to get them back",
                          shown(self.wal), lost["count"], lost["first_seq"], lost["last_seq"], shown(self.db))
            if foreign:
                log.error("%s: the store is not the one this home receipted records in (its identity is %s, the "
                          "home's was %s), and the operator accepted it (--accept-store-loss): serving it",
                          shown(self.db), store.database.node_id, mark.identity)
        mark.bind(store.database.node_id, max(store.database.last_seq(), mark.value if not foreign else 0))

    def _refused(self, why: str, mark: "HighWater") -> PeerwireError:
        return PeerwireError(
            Code.STORE_DAMAGED,
            f"{shown(self.db)}: {why}; peerwire will not serve it, so no receipted record goes missing unnoticed: "
            f"put this home's own store back (or restore it from a backup), or, to accept the loss, start the app "
            f"with --accept-store-loss",
            {"file": shown(self.db), "receipted_seq": mark.value, "home_store": mark.identity})

    def _store_error(self, exc: sqlite3.DatabaseError) -> PeerwireError:
        import sqlite3

        name = getattr(exc, "sqlite_errorname", "")
        if isinstance(exc, sqlite3.OperationalError) and name not in ("SQLITE_CORRUPT", "SQLITE_NOTADB"):
            return home_invalid(self.db, f"SQLite cannot open the store ({exc})",
                                "check the file's permissions and the disk")
        detail = " ".join(str(exc).split())
        return PeerwireError(
            Code.STORE_DAMAGED,
            f"{shown(self.db)}: the store is damaged ({detail}); peerwire will not serve or overwrite it: "
            "copy it aside and restore a backup, or move it away to start an empty home",
            {"file": shown(self.db)})

    def _create_store(self) -> None:
        from .store import Store

        # No longer a name than the store's own: SQLite's path limit holds for both.
        aside = self.path / f".{os.getpid():x}.new"
        companions = [aside.with_name(aside.name + suffix) for suffix in ("-wal", "-shm", "-journal")]
        for leftover in (aside, *companions):
            leftover.unlink(missing_ok=True)
        try:
            os.close(os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            store = Store(aside)
            try:
                store.database.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                store.close()
            fd = os.open(aside, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(aside, self.db)
            except FileExistsError:
                pass  # created by someone else meanwhile (`home init` beside an app): theirs stands
            _fsync_directory(self.path)
        except OSError as exc:
            raise unusable(exc, "check the disk and the home's permissions") from None
        finally:
            for leftover in (aside, *companions):
                leftover.unlink(missing_ok=True)

    def _make_private(self, names: tuple[str, ...]) -> int:
        """Tighten those of ``names`` that are not private yet; returns how many were opened to do it."""
        # SQLite gives -wal and -shm the store's own mode, so a private store
        # keeps its companions private; an older store is tightened here.
        opened = 0
        for name in names:
            info = check_entry(self.path / name)
            if info is not None and stat.S_IMODE(info.st_mode) & 0o077:
                os.close(open_private(self.path / name, os.O_RDONLY, tighten=True))
                opened += 1
        return opened

    # -- the operator credential ----------------------------------------------------

    def ensure_operator_credential(self) -> str:
        """The home's operator credential, created (256 random bits, 0600) if it has none yet; the app's.

        It authenticates operator operations (registering, exporting, ...): only
        someone who can read the home's ``operator.token`` holds it. It is never
        put in an agent's environment, and a session token never stands in for it.
        """
        fd = open_private(self.operator, os.O_RDWR | os.O_CREAT)
        try:
            credential = os.read(fd, 1024).decode("ascii", "replace").strip()
            if len(credential) < 43:  # new, or cut short: a fresh one, written whole before it is used
                import secrets

                credential = secrets.token_urlsafe(TOKEN_BYTES)
                os.ftruncate(fd, 0)
                os.pwrite(fd, credential.encode() + b"\n", 0)
                os.fsync(fd)
            return credential
        finally:
            os.close(fd)

    def operator_credential(self) -> str | None:
        """The operator credential, read from the home (``None`` before the app first created it)."""
        if check_entry(self.operator) is None:
            return None
        fd = open_private(self.operator, os.O_RDONLY)
        try:
            return os.read(fd, 1024).decode("ascii", "replace").strip() or None
        finally:
            os.close(fd)

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

        fd = open_private(self.home.lock, os.O_RDWR | os.O_CREAT)
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
            fd = open_private(self.home.lock, os.O_RDONLY)
        except PeerwireError:
            return {}
        try:
            return json.loads(os.read(fd, 64 * 1024) or b"{}")
        except (OSError, ValueError):
            return {}
        finally:
            os.close(fd)

    def release(self) -> None:
        if self._fd is None:
            return
        import fcntl

        # Emptied before unlocking so a stale pid is never read as a live holder.
        os.ftruncate(self._fd, 0)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None


def _fsync_directory(path: Path) -> None:
    """Make a new directory entry durable (no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
