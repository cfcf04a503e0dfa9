"""The store's database: one SQLite file per home, its transactions and its migrations.

Every write runs in a ``BEGIN IMMEDIATE`` transaction with ``synchronous=FULL`` in
WAL mode, so a receipt is returned only for what has reached the disk. Opening a
store brings its schema up to date (:mod:`peerwire.schema`: each migration once, in
order, in one transaction) and keeps the node's identity and cursor secret in ``meta``.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import uuid
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

from ..errors import Code, PeerwireError
from ..schema import LATEST, MIGRATIONS


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


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
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.db.row_factory = sqlite3.Row
        self.commits = 0
        """How many write transactions changed something since this store was opened."""
        self.on_commit: list[Callable[[], None]] = []
        """Called after each such commit (the app wakes change watchers with it)."""
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("PRAGMA foreign_keys=ON")
        self.db.execute("PRAGMA busy_timeout=10000")
        if verify:
            self._verify()
        self._migrate()
        self.node_id = self._meta("node_id", lambda: str(uuid.uuid4()))
        self._cursor_secret = bytes.fromhex(self._meta("cursor_secret", lambda: secrets.token_hex(32)))

    def close(self) -> None:
        self.db.close()

    def _verify(self) -> None:
        problems = [row[0] for row in self.db.execute("PRAGMA quick_check(3)")]
        if problems != ["ok"]:
            self.db.close()
            raise StoreDamaged("quick_check: " + "; ".join(" ".join(p.split()) for p in problems))

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction; commits on success, rolls back on any exception."""
        before = self.db.total_changes
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")
        if self.db.total_changes != before:
            self.commits += 1
            for notify in self.on_commit:
                notify()

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        self.db.execute("BEGIN")
        try:
            yield self.db
        finally:
            self.db.execute("COMMIT")

    def _migrate(self) -> None:
        with self.write() as db:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > LATEST:
                raise PeerwireError(
                    Code.INTERNAL,
                    f"store schema version {version} is newer than this peerwire ({LATEST}); upgrade peerwire",
                )
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
