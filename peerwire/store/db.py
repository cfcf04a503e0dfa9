"""The store's database: one SQLite file per home, its transactions and its migrations.

Every write runs in a ``BEGIN IMMEDIATE`` transaction with ``synchronous=FULL`` in
WAL mode, so a receipt is returned only for what has reached the disk; the app's
writes go through :meth:`Database.commit`, where concurrent ones share a commit
(:mod:`peerwire.group_commit`). A full disk or an I/O error is ``storage_unavailable``
(retriable), a damaged file ``store_damaged``, never ``internal``. Opening a
store brings its schema up to date (:mod:`peerwire.schema`: each migration once, in
order, in one transaction) and keeps the node's identity and cursor secret in ``meta``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import secrets
import sqlite3
import threading
import uuid
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from ..errors import Code, PeerwireError
from ..group_commit import GroupCommit, GroupStats
from ..schema import LATEST, MIGRATIONS
from .files import StoreFiles
from .mark import HighWater

T = TypeVar("T")

log = logging.getLogger("peerwire.store")


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


# SQLite result codes (by name) of a store that cannot be written now but may be later, and of one
# that is damaged; anything else raised by SQLite is a bug of ours.
_UNAVAILABLE = ("SQLITE_FULL", "SQLITE_IOERR", "SQLITE_CANTOPEN", "SQLITE_READONLY", "SQLITE_BUSY",
                "SQLITE_LOCKED", "SQLITE_NOMEM", "SQLITE_PROTOCOL")
_DAMAGED = ("SQLITE_CORRUPT", "SQLITE_NOTADB")


def storage_error(exc: sqlite3.Error, path: Path) -> PeerwireError | None:
    """The caller-facing error for a SQLite failure, or ``None`` when it is a bug (then it stays ``internal``)."""
    name = getattr(exc, "sqlite_errorname", None) or ""
    detail = " ".join(str(exc).split())
    if name.startswith(_UNAVAILABLE):
        return PeerwireError(
            Code.STORAGE_UNAVAILABLE,
            f"the store cannot be written: {detail} ({name}); nothing of this call was admitted: free space on "
            f"the disk holding {path} (or clear the I/O error) and retry the call",
            {"retriable": True, "sqlite": name, "file": str(path)})
    if name.startswith(_DAMAGED):
        return PeerwireError(
            Code.STORE_DAMAGED,
            f"the store {path} is damaged: {detail} ({name}); stop the app and restore it from a backup",
            {"retriable": False, "sqlite": name, "file": str(path)})
    return None


class StoreDamaged(sqlite3.DatabaseError):
    """The store's integrity check failed: the file is not a whole SQLite database."""


class Database:
    """One open store file: its connection, transactions and schema. Not thread-safe: one owner at a time."""

    def __init__(self, path: Path | str, *, verify: bool = False):
        """Open (creating if missing) the store at ``path`` and bring its schema up to date.

        ``verify`` runs ``PRAGMA quick_check`` before anything is written and
        raises :class:`StoreDamaged` if the file is not whole.
        """
        self.path = Path(path)
        self.db = self._connect()
        self.commits = 0
        """How many write transactions changed something since this store was opened."""
        self.on_commit: list[Callable[[], None]] = []
        """Called after each such commit (the app wakes change watchers with it)."""
        # Held around every write transaction, synchronous or grouped, so the two
        # connections never wait on each other inside SQLite.
        self._write_lock = threading.Lock()
        self._group: GroupCommit | None = None
        self.mark: HighWater | None = None
        """The store's high-water mark (see :mod:`.mark`), once the home attached one."""
        self.files: StoreFiles | None = None
        """The store's files as opened (see :mod:`.files`), once the home checked them; every commit checks them."""
        if verify:
            self._verify()
        self._migrate()
        self.node_id = self._meta("node_id", lambda: str(uuid.uuid4()))
        self.cursor_secret = bytes.fromhex(self._meta("cursor_secret", lambda: secrets.token_hex(32)))
        """The key that signs this store's cursors (:mod:`peerwire.cursor`)."""

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        db.row_factory = sqlite3.Row
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("PRAGMA foreign_keys=ON")
        db.execute("PRAGMA busy_timeout=10000")
        return db

    def close(self) -> None:
        if self._group is not None:
            self._group.close()
            self._group = None
        self.db.close()
        if self.mark is not None:
            self.mark.close()

    async def commit(self, job: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``job(db)`` in the next group commit (see :mod:`peerwire.group_commit`).

        Returns the job's result once the transaction holding it is durable;
        jobs that arrive while a commit is in flight share the next one. A job
        must do all its reading and writing through the connection it is given.
        """
        if self._group is None:
            self._group = GroupCommit(self._connect, self._write_lock,
                                      self._translated, self._committed,
                                      durable=self._advance_mark, check=self._check_files)
        return await self._group.run(job)

    @property
    def group_stats(self) -> dict[str, int]:
        """Commits, jobs, the largest group and the jobs abandoned by their callers, so far."""
        return (self._group.stats if self._group is not None else GroupStats()).as_dict()

    def _committed(self) -> None:
        self.commits += 1
        for notify in self.on_commit:
            notify()

    def last_seq(self, db: sqlite3.Connection | None = None) -> int:
        """The highest record sequence number the store has committed (0 for none)."""
        row = (db or self.db).execute("SELECT seq FROM sqlite_sequence WHERE name = 'interactions'").fetchone()
        return row[0] if row else 0

    def record_loss(self, first: int, last: int, wal: Path) -> dict[str, Any]:
        """Records ``first``..``last`` were committed and are gone (a damaged WAL): say so in the store and
        move the sequence past them, so no later record takes a number a lost one had (and a cursor held
        from before never points at a different record)."""
        loss = {"first_seq": first, "last_seq": last, "count": last - first + 1, "file": str(wal),
                "detected_at": now()}
        with self.write() as db:
            if db.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = 'interactions'", (last,)).rowcount == 0:
                db.execute("INSERT INTO sqlite_sequence(name, seq) VALUES ('interactions', ?)", (last,))
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (f"loss:{first}-{last}",
                                                                                 json.dumps(loss)))
        return loss

    def losses(self) -> list[dict[str, Any]]:
        """Every loss :meth:`record_loss` recorded, oldest first."""
        rows = self.db.execute("SELECT value FROM meta WHERE key LIKE 'loss:%'").fetchall()
        return sorted((json.loads(row["value"]) for row in rows), key=lambda loss: loss["first_seq"])

    def _check_files(self) -> None:
        """Under the write lock, around each commit: refuse when the home's store is no longer the file open."""
        if self.files is not None:
            self.files.check()

    def _advance_mark(self, db: sqlite3.Connection) -> None:
        """After a commit, under the write lock: raise the high-water mark to what is now committed."""
        if self.mark is None:
            return
        try:
            self.mark.advance(self.last_seq(db))
        except (OSError, sqlite3.Error) as exc:  # the commit stands; only the detection of a later loss lags
            log.error("%s: the high-water mark could not be advanced (%s)", self.path, exc)

    def _verify(self) -> None:
        problems = [row[0] for row in self.db.execute("PRAGMA quick_check(3)")]
        if problems != ["ok"]:
            self.db.close()
            raise StoreDamaged("quick_check: " + "; ".join(" ".join(p.split()) for p in problems))

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction; commits on success, rolls back on any exception.

        A store that cannot be written (a full disk, an I/O error, a lock held
        too long) raises ``storage_unavailable`` and a damaged one
        ``store_damaged``; either way nothing of the transaction is kept.
        """
        with self._write_lock:
            before = self.db.total_changes
            try:
                self.db.execute("BEGIN IMMEDIATE")
                try:
                    yield self.db
                    self._check_files()
                    self.db.execute("COMMIT")
                    self._check_files()  # a swap during the commit: it went to a file the home no longer holds
                except BaseException:
                    self._roll_back()
                    raise
            except sqlite3.Error as exc:
                error = storage_error(exc, self.path)
                if error is None:
                    raise
                raise error from exc
            changed = self.db.total_changes != before
            if changed:
                self._advance_mark(self.db)
        if changed:
            self._committed()

    def _translated(self, exc: sqlite3.Error) -> BaseException:
        # Handed to a caller as a value (group commit), not raised here: the cause is set by hand.
        error = storage_error(exc, self.path)
        if error is None:
            return exc
        error.__cause__ = exc
        return error

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        try:
            self.db.execute("BEGIN")
            try:
                yield self.db
            finally:
                self._roll_back()  # a read transaction has nothing to keep
        except sqlite3.Error as exc:
            error = storage_error(exc, self.path)
            if error is None:
                raise
            raise error from exc

    def _roll_back(self) -> None:
        # SQLite may have rolled back already (a full disk or an I/O error ends the transaction).
        if self.db.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self.db.execute("ROLLBACK")

    def _migrate(self) -> None:
        with self.write() as db:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > LATEST:
                raise PeerwireError(
                    Code.STORE_DAMAGED,
                    f"{self.path}: the store's schema is version {version}, written by a newer peerwire than this "
                    f"one (which knows versions up to {LATEST}); run the peerwire that wrote it, or upgrade this one",
                    {"file": str(self.path)})
            for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
                for statement in _statements(script):
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {number}")

    def _meta(self, key: str, default: Any) -> str:
        with self.write() as db:
            row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            if row:
                return row["value"]
            value = default()
            db.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (key, value))
            return value

    @property
    def schema_version(self) -> int:
        return self.db.execute("PRAGMA user_version").fetchone()[0]


def json_column(text: str | None) -> Any:
    """A JSON text column decoded; ``None`` for NULL or empty."""
    return json.loads(text) if text else None


def _statements(script: str) -> list[str]:
    # sqlite3's executescript() would COMMIT our transaction; split instead.
    out, buf = [], []
    for line in script.splitlines():
        if line.strip().startswith("--"):
            continue
        buf.append(line)
        if line.rstrip().endswith(";"):
            stmt = "\n".join(buf).strip()
            if stmt:
                out.append(stmt)
            buf = []
    tail = "\n".join(buf).strip()
    if tail:
        out.append(tail)
    return out
