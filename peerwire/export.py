"""The evidence export: everything a core recorded about its runs, as one JSON document.

This is the contract between a messaging core and whoever judges it (the
acceptance runner, reports): records, their evidence rows, requests, claims,
provider bindings, agents and the tool receipts records carry. Its JSON Schema
is ``contracts/export.schema.json``; :data:`VERSION` changes whenever a field
changes meaning or disappears (adding an optional field does not).

Two ways to get it, with the same content:

* the operator op ``export`` on a running app's control socket (:func:`of_store`);
* ``peerwire export --home H`` for a stopped home (:func:`of_home`), which opens
  the store read-only and never migrates or writes it.

Orders are part of the format: records by ``seq``, evidence by ``evidence_id``
(the order the core wrote them), agents by registration, requests, claims and
bindings by creation. Session credentials and the cursor secret never appear.
"""

from __future__ import annotations

import contextlib
import sqlite3
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from . import __version__, contract_data
from .errors import Code, PeerwireError
from .home import Home
from .home_files import identify_store
from .schema import LATEST
from .store import views

if TYPE_CHECKING:
    from .store import Store

_FORMAT_FIELDS = contract_data.table("export.schema.json")["properties"]
FORMAT = _FORMAT_FIELDS["format"]["const"]
VERSION = _FORMAT_FIELDS["version"]["const"]
"""The format and version the export's schema fixes (``contracts/export.schema.json``)."""


def of_store(store: "Store") -> dict[str, Any]:
    """The export of an open store (the running app's), read in one transaction."""
    with store.database.read() as db:
        return _document(db, node_id=store.database.node_id, store_schema=store.database.schema_version, source="app")


def of_home(home: Home) -> dict[str, Any]:
    """The export of a stopped home, read from its store opened read-only.

    Raises ``home_missing`` when the home or its store does not exist,
    ``home_invalid`` for a store reached through a link or owned by another
    user, and ``store_damaged`` for a file that is not a peerwire store or was
    written by a newer peerwire (each left as it is). A running app's home can be read too (WAL readers see the
    last commit), but the app's own ``export`` op is the consistent way.
    """
    if not home.path.is_dir():
        raise PeerwireError(Code.HOME_MISSING, f"no home at {home.path}: nothing to export", {"home": str(home.path)})
    if not home.db.is_file():
        raise PeerwireError(Code.HOME_MISSING, f"{home.path} holds no store ({home.db.name}): no app has run there",
                            {"home": str(home.path)})
    identify_store(home.db, LATEST)  # not a link, ours, peerwire's, not newer: else refused, untouched
    try:
        with contextlib.closing(sqlite3.connect(f"{home.db.as_uri()}?mode=ro", uri=True)) as db:
            db.row_factory = sqlite3.Row
            version = db.execute("PRAGMA user_version").fetchone()[0]
            db.execute("BEGIN")
            try:
                node = db.execute("SELECT value FROM meta WHERE key = 'node_id'").fetchone()
                return _document(db, node_id=node[0] if node else None, store_schema=version, source="home")
            finally:
                db.execute("COMMIT")
    except sqlite3.DatabaseError as error:
        raise PeerwireError(Code.STORE_DAMAGED, f"{home.db} cannot be read as a peerwire store: {error}",
                            {"home": str(home.path)}) from None


def _document(db: sqlite3.Connection, *, node_id: str | None, store_schema: int, source: str) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "core": {"implementation": "peerwire", "version": __version__, "node_id": node_id,
                 "store_schema": store_schema},
        "exported_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "source": source,
        **views.exported(db),
    }
