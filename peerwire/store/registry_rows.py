"""The agent registry as stored: agents, aliases, session credentials.

The rules (names, identities, target resolution) are :mod:`peerwire.registry_rules`'s;
this is where their rows live.
"""

from __future__ import annotations

import secrets
import sqlite3
import uuid
from typing import Any, Sequence

from ..errors import Code, PeerwireError
from ..limits import TOKEN_BYTES
from ..registry_rules import AgentRow, resolve_target
from .db import Database, hash_token, now


class Registry:
    """Agents and their session credentials."""

    def __init__(self, database: Database):
        self.database = database

    def register_agent(
        self,
        name: str,
        provider: str,
        *,
        aliases: Sequence[str] = (),
        provider_session_id: str | None = None,
        source: str = "cli",
        status: str = "registered",
        path: str | None = None,
        parent_agent_id: str | None = None,
    ) -> tuple[AgentRow, str]:
        """Register an agent and issue its session credential (returned once).

        Registering again with the same provider and provider session id is a
        re-registration: a new row of the same identity, one generation later.
        """
        token = secrets.token_urlsafe(TOKEN_BYTES)
        agent_id = str(uuid.uuid4())
        stamp = now()
        with self.database.write() as db:
            identity_key = agent_id
            generation = 0
            if provider_session_id:
                identity_key = f"{provider}:{provider_session_id}"
                prior = db.execute(
                    "SELECT MAX(generation) FROM agents WHERE identity_key = ?", (identity_key,)
                ).fetchone()[0]
                if prior is not None:
                    generation = prior + 1
            if path is not None and db.execute("SELECT 1 FROM agents WHERE path = ?", (path,)).fetchone():
                raise PeerwireError(Code.INVALID_ARGUMENT, f"{path} already exists in this home",
                                    {"path": path})
            db.execute(
                """INSERT INTO agents(agent_id, identity_key, name, provider, provider_session_id,
                       node_id, generation, status, source, created_at, updated_at, path, parent_agent_id)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (agent_id, identity_key, name, provider, provider_session_id, self.database.node_id,
                 generation, status, source, stamp, stamp, path, parent_agent_id),
            )
            for alias in dict.fromkeys(aliases):
                db.execute("INSERT INTO agent_aliases(agent_id, alias) VALUES (?, ?)", (agent_id, alias))
            db.execute(
                "INSERT INTO sessions(token_hash, agent_id, issued_at) VALUES (?, ?, ?)",
                (hash_token(token), agent_id, stamp),
            )
            db.execute("INSERT INTO cursors(agent_id, acked_seq, updated_at) VALUES (?, 0, ?)", (agent_id, stamp))
        return self.agent(agent_id), token

    def agents(self, *, include_disabled: bool = True) -> list[AgentRow]:
        rows = self.database.db.execute("SELECT * FROM agents ORDER BY row_order").fetchall()
        aliases: dict[str, list[str]] = {}
        for a in self.database.db.execute("SELECT agent_id, alias FROM agent_aliases ORDER BY alias"):
            aliases.setdefault(a["agent_id"], []).append(a["alias"])
        out = [_as_agent(r, aliases.get(r["agent_id"], [])) for r in rows]
        return out if include_disabled else [a for a in out if a.enabled]

    def peers(self, *, name_prefix: str = "", provider: str | None = None,
              include_disabled: bool = False) -> list[AgentRow]:
        """The newest row of each identity (older rows are history) whose name starts with ``name_prefix``.

        Filtered in SQL on indexes: the prefix is a range on the name index, compared
        exactly (case counts; ``_`` and ``%`` are characters like any other), so a
        filtered listing costs the same with ten agents registered or a hundred thousand.
        Without ``include_disabled``, disabled rows are left out before the newest is chosen.
        In the order each identity first registered.
        """
        considered = "" if include_disabled else " AND {t}.enabled = 1"
        where, params = ["1"], {"provider": provider}
        if name_prefix:
            bounds = _prefix_range(name_prefix)
            if bounds is None:
                return []  # not text SQLite can hold: no name starts with it
            params["low"], params["high"] = bounds
            where.append("a.name >= :low" + (" AND a.name < :high" if bounds[1] is not None else ""))
        if provider is not None:
            where.append("a.provider = :provider")
        peers = f"""
            SELECT a.*, (SELECT MIN(first.row_order) FROM agents AS first
                         WHERE first.identity_key = a.identity_key{considered.format(t="first")}) AS first_order
            FROM agents AS a
            WHERE {" AND ".join(where)}{considered.format(t="a")}
              AND NOT EXISTS (SELECT 1 FROM agents AS newer WHERE newer.identity_key = a.identity_key
                              AND newer.row_order > a.row_order{considered.format(t="newer")})"""
        with self.database.read() as db:
            return self._with_aliases(db, db.execute(f"{peers} ORDER BY first_order", params).fetchall())

    @staticmethod
    def _with_aliases(db: sqlite3.Connection, rows: list[sqlite3.Row]) -> list[AgentRow]:
        """``rows`` as agents, with the aliases of those agents only (in batches within SQLite's bound)."""
        aliases: dict[str, list[str]] = {}
        ids = [row["agent_id"] for row in rows]
        for start in range(0, len(ids), 500):
            batch = ids[start:start + 500]
            for a in db.execute(f"SELECT agent_id, alias FROM agent_aliases WHERE agent_id IN "
                                f"({', '.join('?' * len(batch))}) ORDER BY alias", batch):
                aliases.setdefault(a["agent_id"], []).append(a["alias"])
        return [_as_agent(r, aliases.get(r["agent_id"], [])) for r in rows]

    def agent(self, agent_id: str) -> AgentRow:
        return agent_row(self.database.db, agent_id)

    def update_agent(self, agent_id: str, **fields: Any) -> AgentRow:
        allowed = {"enabled", "sendable", "status", "generation", "provider_session_id", "last_error"}
        unknown = set(fields) - allowed
        if unknown:
            raise ValueError(f"cannot update {sorted(unknown)}")
        with self.database.write() as db:
            sets = ", ".join(f"{k} = ?" for k in fields)
            db.execute(
                f"UPDATE agents SET {sets}, updated_at = ? WHERE agent_id = ?",
                (*fields.values(), now(), agent_id),
            )
        return self.agent(agent_id)

    def caller(self, token: str | None) -> AgentRow:
        """The agent a session credential belongs to, or ``unknown_caller``."""
        if not token:
            raise PeerwireError(
                Code.UNKNOWN_CALLER,
                "no session credential: set PEERWIRE_SESSION_ID to the token `peerwire agent register` printed",
            )
        row = self.database.db.execute(
            "SELECT agent_id, revoked_at FROM sessions WHERE token_hash = ?", (hash_token(token),)
        ).fetchone()
        if row is None or row["revoked_at"] is not None:
            raise PeerwireError(
                Code.UNKNOWN_CALLER,
                "this session credential is unknown or revoked in this home; register the agent again",
            )
        return self.agent(row["agent_id"])

    def agent_by_path(self, path: str) -> AgentRow:
        row = self.database.db.execute("SELECT agent_id FROM agents WHERE path = ?", (path,)).fetchone()
        if row is None:
            raise PeerwireError(Code.UNKNOWN_TARGET, f"no agent has the path {path!r}; list_agents shows the tree",
                                {"target": path})
        return self.agent(row[0])

    def agent_by_thread(self, thread_id: str) -> AgentRow | None:
        row = self.database.db.execute(
            "SELECT agent_id FROM agents WHERE provider_session_id = ? ORDER BY row_order DESC", (thread_id,)
        ).fetchone()
        return self.agent(row[0]) if row else None

    def descendants(self, path: str) -> list[AgentRow]:
        """The collaboration tree's agents below ``path``, by path."""
        return [a for a in self.in_tree(path.rstrip("/") + "/") if a.path != path]

    def in_tree(self, path_prefix: str) -> list[AgentRow]:
        """The tree's agents at ``path_prefix`` and below it (``/root/a`` is below ``/root`` and ``/root/``), by path.

        Read on the path index, never the whole roster, and compared exactly, like ``name_prefix``.
        """
        below = _prefix_range(path_prefix.rstrip("/") + "/")
        if below is None:
            return []
        with self.database.read() as db:
            rows = db.execute(
                "SELECT * FROM agents WHERE path = :path OR (path >= :low AND path < :high) ORDER BY path",
                {"path": path_prefix, "low": below[0], "high": below[1]}).fetchall()
            return self._with_aliases(db, rows)

    def revoke_sessions(self, agent_id: str) -> int:
        with self.database.write() as db:
            return db.execute(
                "UPDATE sessions SET revoked_at = ? WHERE agent_id = ? AND revoked_at IS NULL", (now(), agent_id)
            ).rowcount

    def resolve(self, target: Any, *, strict: bool = False) -> AgentRow:
        """:func:`~peerwire.registry_rules.resolve_target` over the only rows that can match ``target``.

        The candidates come from the agent_id, name and alias indexes, so a send
        costs the same with ten agents registered or a hundred thousand.
        """
        return resolve_target(self._candidates(target) if isinstance(target, str) else [], target, strict=strict)

    _CANDIDATES = """
        SELECT * FROM agents WHERE agent_id = :target
        UNION SELECT * FROM agents WHERE name = :target
        UNION SELECT agents.* FROM agent_aliases JOIN agents USING (agent_id) WHERE alias = :target
        ORDER BY row_order"""

    def _candidates(self, target: str) -> list[AgentRow]:
        rows = self.database.db.execute(self._CANDIDATES, {"target": target}).fetchall()
        if not rows:
            return []
        ids = [row["agent_id"] for row in rows]
        aliases: dict[str, list[str]] = {}
        for alias in self.database.db.execute(
                f"SELECT agent_id, alias FROM agent_aliases WHERE agent_id IN ({', '.join('?' * len(ids))}) "
                "ORDER BY alias", ids):
            aliases.setdefault(alias["agent_id"], []).append(alias["alias"])
        return [_as_agent(row, aliases.get(row["agent_id"], [])) for row in rows]


def agent_row(db: sqlite3.Connection, agent_id: str) -> AgentRow:
    """The agent row ``agent_id`` names, with its aliases, or ``unknown_target``."""
    row = db.execute("SELECT * FROM agents WHERE agent_id = ?", (agent_id,)).fetchone()
    if row is None:
        raise PeerwireError(Code.UNKNOWN_TARGET, f"no agent has agent_id {agent_id!r}")
    aliases = [a[0] for a in db.execute(
        "SELECT alias FROM agent_aliases WHERE agent_id = ? ORDER BY alias", (agent_id,))]
    return _as_agent(row, aliases)


def _prefix_range(prefix: str) -> tuple[str, str | None] | None:
    """``(low, high)`` such that a string starts with ``prefix`` exactly when ``low <= s < high``.

    SQLite compares text by its UTF-8 bytes, whose order is the code points' order, so ``high`` is
    ``prefix`` with its last character raised by one (``None`` when every character is the highest
    there is). ``None`` for a prefix that is not valid text (a lone surrogate).
    """
    try:
        prefix.encode("utf-8")
    except UnicodeEncodeError:
        return None
    head = prefix.rstrip("\U0010ffff")
    if not head:
        return prefix, None
    following = ord(head[-1]) + 1
    if 0xD800 <= following <= 0xDFFF:
        following = 0xE000  # surrogates are not characters
    return prefix, head[:-1] + chr(following)


def _as_agent(row: sqlite3.Row, aliases: Sequence[str]) -> AgentRow:
    return AgentRow(
        agent_id=row["agent_id"],
        identity_key=row["identity_key"],
        name=row["name"],
        aliases=tuple(aliases),
        provider=row["provider"],
        provider_session_id=row["provider_session_id"],
        node_id=row["node_id"],
        enabled=bool(row["enabled"]),
        sendable=bool(row["sendable"]),
        generation=row["generation"],
        status=row["status"],
        source=row["source"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        last_error=row["last_error"],
        row_order=row["row_order"],
        path=row["path"],
        parent_agent_id=row["parent_agent_id"],
    )
