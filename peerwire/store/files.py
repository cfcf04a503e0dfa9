"""The store's files as the app opened them: a commit goes only to the home's own store.

SQLite writes through the descriptors it opened. Delete ``peerwire.db`` (or
its ``-wal`` or ``-shm``), or rename another file over it, while the app
runs, and SQLite goes on committing into a file the home no longer holds:
every receipt from then on is for a record the next start will not find.
:class:`StoreFiles` remembers each file's device and inode, and the store's
size, when the store is opened; :meth:`StoreFiles.check` compares them with
what the home's paths name now: one ``stat`` per file, no SQL. The store
runs it inside every write transaction, just before and just after
``COMMIT`` (the second closes the race with a swap during the commit), so
no receipt is handed out for a commit that did not reach the home's store.

A mismatch is ``store_damaged`` and it sticks: the app refuses every later
write until an operator restarts it, and the restart then judges the store
by its identity and high-water mark (:mod:`.mark`).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import Code, PeerwireError

_COMPANIONS = ("", "-wal", "-shm")


class StoreFiles:
    """The (device, inode) of the store and its companions when opened, and the store's size since."""

    def __init__(self, db: Path):
        self.db = db
        self.paths = tuple(os.fspath(db) + suffix for suffix in _COMPANIONS)  # str: stat takes it as it is
        self._opened = tuple(_identity(os.stat(path)) for path in self.paths)
        self._size = os.stat(db).st_size
        self.damage: PeerwireError | None = None
        """The first mismatch found; every later check raises it again."""

    def check(self) -> None:
        """Raise ``store_damaged`` unless every file is still the one opened and the store has not shrunk."""
        if self.damage is not None:
            raise self.damage
        for path, opened in zip(self.paths, self._opened):
            try:
                info = os.stat(path)
            except FileNotFoundError:
                self._damaged(path, "was deleted")
            if _identity(info) != opened:
                self._damaged(path, "was replaced by another file")
            if path is self.paths[0]:
                # No peerwire store shrinks (nothing vacuums it): a smaller file was cut short under the app.
                if info.st_size < self._size:
                    self._damaged(path, f"was truncated from {self._size} to {info.st_size} bytes")
                self._size = info.st_size

    def _damaged(self, path: str, what: str) -> None:
        self.damage = PeerwireError(
            Code.STORE_DAMAGED,
            f"{path} {what} while the app was running, so commits no longer reach this home's store; nothing "
            "of this call was admitted and the app refuses every write until it is restarted: stop the app, "
            "put the home's own store back (or restore it from a backup) and start the app again",
            {"retriable": False, "file": str(path)})
        raise self.damage


def _identity(info: os.stat_result) -> tuple[int, int]:
    return info.st_dev, info.st_ino
