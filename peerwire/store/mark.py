"""The store's high-water mark: how far committed records went, kept outside the write-ahead log.

SQLite checks each WAL frame's checksum when it opens a store, and drops a
damaged frame and every frame after it without a word: after a crash and a
damaged or cut ``-wal``, the store opens whole but without its last commits,
receipted ones included. The mark (``peerwire.db-mark``) is the highest record
sequence number ever committed, advanced and flushed after each commit that
raised it and before that commit's receipts are returned. A store whose last
sequence number is below its mark has lost the records between, and says so
(:func:`peerwire.home.Home.open_store`).

The mark follows the WAL, never leads it: it is written only once the commit
is on disk, so it can lag (a loss of those last records would go unnoticed),
never claim records that were not committed. It is written in place after
every such commit, so a crash of the app (kill -9) never loses it: the
kernel holds the write. Flushing it to the disk costs a second fsync per
commit (one session's sends took 1.5 times as long), so it is flushed at
most every :data:`SYNC_EVERY_S` and at close: after a crash of the machine
itself the mark may lag by that much.

The mark also names the store it follows: the store's identity (its
``node_id``, a row of its ``meta``) is written beside the sequence number, in
the same line, so a store from another home, or a new one in place of a lost
one, is told apart from this home's own. The line has a fixed width and is
written with one ``pwrite`` at offset 0, well inside one disk sector: a reader
sees the old line or the new one, never a mix. A mark from before the identity
(a bare number) adopts the store it is next opened with.
"""

from __future__ import annotations

import os
import time

_WIDTH = 20  # digits: a 64-bit sequence number, written in place at offset 0
_IDENTITY_WIDTH = 36  # a UUID's text
_LINE = _WIDTH + 1 + _IDENTITY_WIDTH + 1

SYNC_EVERY_S = 1.0
"""How often, at most, the mark is flushed to the disk (see the module's docs)."""


class HighWater:
    """The mark file, open for the store's lifetime. Not thread-safe: the store's write lock serialises it."""

    def __init__(self, fd: int):
        self.fd = fd
        self.value, self.identity = self._read()
        self._synced_at = time.monotonic()

    def _read(self) -> tuple[int, str | None]:
        fields = os.pread(self.fd, _LINE + 1, 0).split()
        seq = int(fields[0]) if fields and fields[0].isdigit() else 0  # a new (or unreadable) mark knows nothing
        identity = fields[1].decode("ascii", "replace") if len(fields) > 1 else None
        return seq, identity

    @property
    def knows_records(self) -> bool:
        """Whether the mark has seen this home's store commit anything (or name itself)."""
        return self.value > 0 or self.identity is not None

    def bind(self, identity: str, seq: int) -> None:
        """Follow the store named ``identity`` from ``seq`` on (after an operator accepted a loss, ``seq`` may be
        lower than before); flushed before returning."""
        self.identity = identity
        self.value = seq
        self._write()
        self._sync()

    def advance(self, seq: int) -> None:
        """Record that records up to ``seq`` are committed (before returning); never moves back."""
        if seq <= self.value:
            return
        self.value = seq
        self._write()
        if time.monotonic() - self._synced_at >= SYNC_EVERY_S:
            self._sync()

    def _write(self) -> None:
        line = f"{self.value:0{_WIDTH}d}"
        if self.identity is not None:
            line += f" {self.identity:<{_IDENTITY_WIDTH}}"
        os.pwrite(self.fd, (line + "\n").encode(), 0)

    def _sync(self) -> None:
        (os.fdatasync if hasattr(os, "fdatasync") else os.fsync)(self.fd)
        self._synced_at = time.monotonic()

    def close(self) -> None:
        if self.fd >= 0:
            try:
                self._sync()
            except OSError:
                pass  # what was written stays with the kernel
            os.close(self.fd)
            self.fd = -1
