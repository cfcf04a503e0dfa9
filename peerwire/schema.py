"""Versioned SQLite schema. Each migration runs once, in order, in one transaction.

``PRAGMA user_version`` records the applied version. Add a migration by appending
to :data:`MIGRATIONS`; never edit one that has shipped.
"""

from __future__ import annotations

MIGRATIONS: list[str] = [
    # 1: registry, sessions, interactions, requests, claims, cursors, evidence, bindings
    """
    CREATE TABLE meta (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    CREATE TABLE agents (
        row_order           INTEGER PRIMARY KEY AUTOINCREMENT,
        agent_id            TEXT NOT NULL UNIQUE,
        identity_key        TEXT NOT NULL,
        name                TEXT NOT NULL,
        provider            TEXT NOT NULL,
        provider_session_id TEXT,
        node_id             TEXT NOT NULL,
        enabled             INTEGER NOT NULL DEFAULT 1,
        sendable            INTEGER NOT NULL DEFAULT 1,
        generation          INTEGER NOT NULL DEFAULT 0,
        status              TEXT NOT NULL,
        source              TEXT NOT NULL,
        created_at          TEXT NOT NULL,
        updated_at          TEXT NOT NULL,
        last_error          TEXT
    );
    CREATE INDEX agents_name ON agents(name);
    CREATE TABLE agent_aliases (
        agent_id TEXT NOT NULL REFERENCES agents(agent_id),
        alias    TEXT NOT NULL,
        PRIMARY KEY (agent_id, alias)
    );
    CREATE INDEX agent_aliases_alias ON agent_aliases(alias);
    CREATE TABLE sessions (
        token_hash TEXT PRIMARY KEY,
        agent_id   TEXT NOT NULL REFERENCES agents(agent_id),
        issued_at  TEXT NOT NULL,
        revoked_at TEXT
    );
    CREATE TABLE interactions (
        seq            INTEGER PRIMARY KEY AUTOINCREMENT,
        interaction_id TEXT NOT NULL UNIQUE,
        kind           TEXT NOT NULL CHECK (kind IN ('information', 'task', 'reply', 'notice')),
        state          TEXT NOT NULL,
        sender_id      TEXT REFERENCES agents(agent_id),
        sender_name    TEXT NOT NULL,
        recipient_id   TEXT NOT NULL REFERENCES agents(agent_id),
        recipient_name TEXT NOT NULL,
        body           TEXT NOT NULL,
        request_id     TEXT,
        reply_status   TEXT CHECK (reply_status IN ('done', 'blocked', 'failed')),
        notice_code    TEXT,
        run_id         TEXT,
        tool_receipt   TEXT,
        created_at     TEXT NOT NULL,
        updated_at     TEXT NOT NULL,
        received_at    TEXT
    );
    CREATE INDEX interactions_mailbox ON interactions(recipient_id, seq);
    CREATE INDEX interactions_request ON interactions(request_id);
    CREATE TABLE requests (
        request_id           TEXT PRIMARY KEY,
        task_interaction_id  TEXT NOT NULL UNIQUE REFERENCES interactions(interaction_id),
        requester_id         TEXT NOT NULL REFERENCES agents(agent_id),
        recipient_id         TEXT NOT NULL REFERENCES agents(agent_id),
        reply_interaction_id TEXT UNIQUE REFERENCES interactions(interaction_id),
        reply_source         TEXT CHECK (reply_source IN ('explicit', 'turn_outcome', 'peerwire')),
        created_at           TEXT NOT NULL
    );
    CREATE TABLE claims (
        claim_id       TEXT PRIMARY KEY,
        request_id     TEXT NOT NULL REFERENCES requests(request_id),
        claimant       TEXT NOT NULL CHECK (claimant IN ('receive', 'dispatch')),
        claimed_at     TEXT NOT NULL,
        released_at    TEXT,
        release_reason TEXT
    );
    -- The durable claim: at most one live claim per request, whoever asks.
    CREATE UNIQUE INDEX claims_live ON claims(request_id) WHERE released_at IS NULL;
    CREATE TABLE cursors (
        agent_id   TEXT PRIMARY KEY REFERENCES agents(agent_id),
        acked_seq  INTEGER NOT NULL DEFAULT 0,
        updated_at TEXT NOT NULL
    );
    CREATE TABLE evidence (
        evidence_id    INTEGER PRIMARY KEY AUTOINCREMENT,
        interaction_id TEXT NOT NULL REFERENCES interactions(interaction_id),
        stage          TEXT NOT NULL,
        at             TEXT NOT NULL,
        detail         TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX evidence_interaction ON evidence(interaction_id, evidence_id);
    CREATE TABLE bindings (
        binding_id  TEXT PRIMARY KEY,
        request_id  TEXT NOT NULL REFERENCES requests(request_id),
        claim_id    TEXT NOT NULL REFERENCES claims(claim_id),
        agent_id    TEXT NOT NULL REFERENCES agents(agent_id),
        generation  INTEGER NOT NULL,
        thread_id   TEXT NOT NULL,
        turn_id     TEXT,
        state       TEXT NOT NULL,
        outcome     TEXT,
        created_at  TEXT NOT NULL,
        updated_at  TEXT NOT NULL
    );
    CREATE INDEX bindings_turn ON bindings(thread_id, turn_id);
    """,
    # 2: the collaboration profile's tree (a path per agent, its direct parent)
    """
    ALTER TABLE agents ADD COLUMN path TEXT;
    ALTER TABLE agents ADD COLUMN parent_agent_id TEXT REFERENCES agents(agent_id);
    CREATE UNIQUE INDEX agents_path ON agents(path) WHERE path IS NOT NULL;
    """,
    # 3: answered calls (a retried call, same caller and call id, gets its first receipt) and
    #    rejected requests (so a trace explains them)
    """
    CREATE TABLE calls (
        agent_id       TEXT NOT NULL REFERENCES agents(agent_id),
        call_id        TEXT NOT NULL,
        op             TEXT NOT NULL,
        fingerprint    TEXT NOT NULL,
        interaction_id TEXT NOT NULL REFERENCES interactions(interaction_id),
        receipt        TEXT NOT NULL,
        created_at     TEXT NOT NULL,
        PRIMARY KEY (agent_id, call_id)
    );
    -- requests refused before anything was admitted: what came in, and why it was refused
    CREATE TABLE rejected_requests (
        entry_id    TEXT PRIMARY KEY,
        op          TEXT NOT NULL,
        agent_id    TEXT REFERENCES agents(agent_id),
        via         TEXT NOT NULL,
        call_id     TEXT,
        summary     TEXT NOT NULL,
        entered_at  TEXT NOT NULL,
        rejected_at TEXT NOT NULL,
        code        TEXT NOT NULL,
        reason      TEXT NOT NULL
    );
    """,
    # 4: the store says it is peerwire's (0x70776972, "pwir"), so another program's database is never taken
    #    for one (peerwire.home_files.identify_store reads it from the header before opening the file)
    """
    PRAGMA application_id = 1886873970;
    """,
    # 5: cost independent of the mailbox. A record's number in its recipient's mailbox (1, 2, ...), so how many
    #    records lie between two positions is a subtraction, never a count; the newest row of each identity
    #    found on an index, so list_agents filters in SQL; and the pending tasks of a mailbox on an index.
    """
    ALTER TABLE interactions ADD COLUMN mailbox_index INTEGER;
    UPDATE interactions SET mailbox_index = numbered.n
        FROM (SELECT seq, ROW_NUMBER() OVER (PARTITION BY recipient_id ORDER BY seq) AS n
              FROM interactions) AS numbered
        WHERE numbered.seq = interactions.seq;
    CREATE INDEX agents_identity ON agents(identity_key, row_order);
    -- the tasks waiting for a claim, so dispatch finds them without reading the mailbox
    CREATE INDEX interactions_pending_tasks ON interactions(recipient_id, seq) WHERE kind = 'task' AND state = 'pending';
    """,
]

LATEST = len(MIGRATIONS)
