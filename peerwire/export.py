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
import json
import sqlite3
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from . import __version__
from .errors import Code, PeerwireError
from .home import Home
from .schema import LATEST

if TYPE_CHECKING:
    from .store import Store

FORMAT = "peerwire-export"
VERSION = 1


def of_store(store: "Store") -> dict[str, Any]:
    """The export of an open store (the running app's), read in one transaction."""
    with store.read() as db:
        return _document(db, node_id=store.node_id, store_schema=store.schema_version, source="app")


def of_home(home: Home) -> dict[str, Any]:
    """The export of a stopped home, read from its store opened read-only.

    Raises ``home_missing`` when the home or its store does not exist, and
    ``internal`` for a file that is not a peerwire store or was written by a
    newer peerwire. A running app's home can be read too (WAL readers see the
    last commit), but the app's own ``export`` op is the consistent way.
    """
    if not home.path.is_dir():
        raise PeerwireError(Code.HOME_MISSING, f"no home at {home.path}: nothing to export", {"home": str(home.path)})
    if not home.db.is_file():
        raise PeerwireError(Code.HOME_MISSING, f"{home.path} holds no store ({home.db.name}): no app has run there",
                            {"home": str(home.path)})
    try:
        with contextlib.closing(sqlite3.connect(f"{home.db.as_uri()}?mode=ro", uri=True)) as db:
            db.row_factory = sqlite3.Row
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > LATEST:
                raise PeerwireError(Code.INTERNAL, f"{home.db} has store schema {version}, newer than this "
                                    f"peerwire reads ({LATEST}); export it with the peerwire that wrote it")
            db.execute("BEGIN")
            try:
                node = db.execute("SELECT value FROM meta WHERE key = 'node_id'").fetchone()
                return _document(db, node_id=node[0] if node else None, store_schema=version, source="home")
            finally:
                db.execute("COMMIT")
    except sqlite3.DatabaseError as error:
        raise PeerwireError(Code.INTERNAL, f"{home.db} cannot be read as a peerwire store: {error}",
                            {"home": str(home.path)}) from None


def record(row: sqlite3.Row) -> dict[str, Any]:
    """One record as the export shows it: the record a recipient reads, plus its state and receipt."""
    from .store import record_view

    return {**record_view(row), "state": row["state"], "tool_receipt": _json(row["tool_receipt"]),
            "updated_at": row["updated_at"], "received_at": row["received_at"]}


def _document(db: sqlite3.Connection, *, node_id: str | None, store_schema: int, source: str) -> dict[str, Any]:
    def rows(sql: str) -> list[dict[str, Any]]:
        return [dict(r) for r in db.execute(sql)]

    aliases: dict[str, list[str]] = {}
    for row in db.execute("SELECT agent_id, alias FROM agent_aliases ORDER BY alias"):
        aliases.setdefault(row["agent_id"], []).append(row["alias"])
    return {
        "format": FORMAT,
        "version": VERSION,
        "core": {"implementation": "peerwire", "version": __version__, "node_id": node_id,
                 "store_schema": store_schema},
        "exported_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "source": source,
        "agents": [_agent(row, aliases.get(row["agent_id"], []))
                   for row in rows("SELECT * FROM agents ORDER BY row_order")],
        "records": [record(row) for row in db.execute("SELECT * FROM interactions ORDER BY seq")],
        "evidence": [{"evidence_id": row["evidence_id"], "record_id": row["interaction_id"], "stage": row["stage"],
                      "at": row["at"], "detail": _json(row["detail"]) or {}}
                     for row in rows("SELECT * FROM evidence ORDER BY evidence_id")],
        "requests": [{"request_id": row["request_id"], "task_record_id": row["task_interaction_id"],
                      "requester_id": row["requester_id"], "recipient_id": row["recipient_id"],
                      "reply_record_id": row["reply_interaction_id"], "reply_source": row["reply_source"],
                      "created_at": row["created_at"]}
                     for row in rows("SELECT * FROM requests ORDER BY created_at, rowid")],
        "claims": [{key: row[key] for key in ("claim_id", "request_id", "claimant", "claimed_at", "released_at",
                                              "release_reason")}
                   for row in rows("SELECT * FROM claims ORDER BY claimed_at, rowid")],
        "bindings": [{**{key: row[key] for key in ("binding_id", "request_id", "claim_id", "agent_id", "generation",
                                                  "thread_id", "turn_id", "state")},
                      "outcome": _json(row["outcome"]), "created_at": row["created_at"],
                      "updated_at": row["updated_at"]}
                     for row in rows("SELECT * FROM bindings ORDER BY created_at, rowid")],
    }


def _agent(row: dict[str, Any], aliases: list[str]) -> dict[str, Any]:
    # Columns added by later migrations are absent from an older store read as it is.
    return {
        "agent_id": row["agent_id"], "name": row["name"], "aliases": aliases, "provider": row["provider"],
        "provider_session_id": row["provider_session_id"], "generation": row["generation"],
        "status": row["status"], "enabled": bool(row["enabled"]), "sendable": bool(row["sendable"]),
        "source": row["source"], "path": row.get("path"), "parent_agent_id": row.get("parent_agent_id"),
        "created_at": row["created_at"], "updated_at": row["updated_at"], "last_error": row["last_error"],
    }


def _json(text: str | None) -> Any:
    return json.loads(text) if text else None
