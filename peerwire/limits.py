"""Every bound of the messaging contract, defined once.

The JSON Schemas in ``contracts/`` state the same numbers; a test keeps the two
in agreement so neither can drift.
"""

MAX_BODY_BYTES = 64 * 1024
"""A message, task or reply body may hold at most this many UTF-8 bytes."""

MIN_RECEIVE_LIMIT = 1
MAX_RECEIVE_LIMIT = 100
DEFAULT_RECEIVE_LIMIT = 50

MAX_TIMEOUT_MS = 60_000
"""Upper bound for ``receive_messages.timeout_ms`` and ``wait_agent.timeout_ms``."""
DEFAULT_WAIT_TIMEOUT_MS = 60_000
DEFAULT_RECEIVE_TIMEOUT_MS = 0

MAX_TARGET_CHARS = 256
MAX_NAME_CHARS = 64

CONTROL_LINE_BYTES = 1024 * 1024
"""Longest control-socket line the app accepts (a full body plus envelope)."""

CONTROL_GRACE_S = 10.0
"""How much longer than a requested wait a control client waits for the app."""

TOKEN_BYTES = 32
"""Random bytes in a session credential (256 bits)."""

STORE_PATH_MAX_BYTES = 504
"""Longest store path (``<home>/peerwire.db``, UTF-8 bytes) SQLite opens.

SQLite's unix VFS keeps file names in a 512-byte buffer and appends its own
suffixes (``-journal``, ``-wal``); a longer home fails inside SQLite with a
bare "unable to open database file", so peerwire refuses it first.
"""
