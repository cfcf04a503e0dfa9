"""The durable mailbox: one SQLite database per home.

:class:`Store` is the whole of it, built from its parts, each a module of its own:

* :mod:`.db` — the connection, transactions (and the group commit) and migrations;
* :mod:`.registry_rows` — agents and session credentials (the rules are :mod:`peerwire.registry_rules`);
* :mod:`.calls` — calls as they come in: retries by call id, refused requests;
* :mod:`.mailbox` — admission, lifecycles and evidence, claims, receiving;
* :mod:`.bindings` — provider bindings and turn outcomes;
* :mod:`.views` — rows as recipients, traces and the export see them.
"""

from __future__ import annotations

from typing import Any

from . import views
from .bindings import Bindings
from .calls import Call, Entry
from .db import StoreDamaged, hash_token, new_id, now, storage_error
from .mailbox import REPLY_STATUSES, Page
from .views import export_record, record_view


class Store(Bindings):
    """The SQLite mailbox of one home. Not thread-safe: one owner at a time."""

    def trace(self, ident: str) -> dict[str, Any]:
        """Every recorded stage of one interaction (or of a request's task, reply and notices)."""
        with self.read() as db:
            return views.trace(db, ident)

    def dump(self) -> dict[str, list[dict[str, Any]]]:
        """Every row of every table, raw (the core's own tests read it; everyone else reads the export)."""
        return views.dump(self.db)


__all__ = ["REPLY_STATUSES", "Call", "Entry", "Page", "Store", "StoreDamaged", "export_record", "hash_token",
           "new_id", "now", "record_view", "storage_error"]
