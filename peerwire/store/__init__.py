"""The durable mailbox: one SQLite database per home.

:class:`Store` is the whole of it: one :class:`~.db.Database` and the parts that
read and write it, each a class of its own, so ``store.mailbox.receive`` is found
in :class:`~.mailbox.Mailbox` and nowhere else:

* ``store.database`` (:mod:`.db`) — the connection, transactions (and the group commit),
  migrations, the high-water mark and the store's files;
* ``store.registry`` (:mod:`.registry_rows`) — agents and session credentials
  (the rules are :mod:`peerwire.registry_rules`);
* ``store.mailbox`` (:mod:`.mailbox`) — admission, lifecycles and evidence, claims, receiving;
* ``store.bindings`` (:mod:`.bindings`) — provider bindings and turn outcomes.

Beneath them, :mod:`.records` holds the row writes the mailbox and the bindings share
inside one transaction, :mod:`.calls` the calls as they come in (retries by call id,
refused requests), and :mod:`.views` the rows as recipients, traces and the export see them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import views
from .bindings import Bindings
from .calls import Call, Entry
from .db import Database, StoreDamaged, hash_token, new_id, now, storage_error
from .mailbox import REPLY_STATUSES, Mailbox, Page
from .registry_rows import Registry
from .views import export_record, record_view


class Store:
    """The SQLite mailbox of one home. Not thread-safe: one owner at a time."""

    def __init__(self, path: Path | str, *, verify: bool = False):
        """Open (creating if missing) the store at ``path``; ``verify`` as :class:`~.db.Database` takes it."""
        self.database = Database(path, verify=verify)
        self.registry = Registry(self.database)
        self.mailbox = Mailbox(self.database)
        self.bindings = Bindings(self.database)

    def close(self) -> None:
        self.database.close()

    def trace(self, ident: str) -> dict[str, Any]:
        """Every recorded stage of one interaction (or of a request's task, reply and notices)."""
        with self.database.read() as db:
            return views.trace(db, ident)

    def dump(self) -> dict[str, list[dict[str, Any]]]:
        """Every row of every table, raw (the core's own tests read it; everyone else reads the export)."""
        return views.dump(self.database.db)


__all__ = ["REPLY_STATUSES", "Bindings", "Call", "Database", "Entry", "Mailbox", "Page", "Registry", "Store",
           "StoreDamaged", "export_record", "hash_token", "new_id", "now", "record_view", "storage_error"]
