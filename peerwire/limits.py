"""Every bound the core enforces in code, defined once.

Bounds a JSON Schema can state (a receive's ``limit`` range, timeouts, target
lengths) live only in ``contracts/``: the app validates every call against those
schemas. The numbers here are the ones code needs; where a schema states one too
(a default, the body size in its description), ``tests/core/test_limits.py``
keeps the two in agreement.
"""

MAX_BODY_BYTES = 64 * 1024
"""A message, task or reply body may hold at most this many UTF-8 bytes."""

DEFAULT_RECEIVE_LIMIT = 50
"""Records a ``receive_messages`` returns when the call names no ``limit``."""

DEFAULT_WAIT_TIMEOUT_MS = 60_000
"""How long ``wait_agent`` waits when the call names no ``timeout_ms`` (also an operator's turn wait)."""
DEFAULT_RECEIVE_TIMEOUT_MS = 0

MAX_WAIT_MS = 60_000
"""The longest ``timeout_ms`` a messaging ``wait_agent`` or ``receive_messages`` accepts (the schema's maximum)."""

MAX_NAME_CHARS = 64

MAX_LINE_BYTES = 1024 * 1024
"""Longest line any hop reads as one message: ``mcp serve`` from its client, the app from a control caller.

Each sender holds its own lines to it too (``mcp serve`` and the CLI towards
the app). A body at :data:`MAX_BODY_BYTES`, escaped as badly as JSON can
(six bytes a byte), fits with room to spare; a longer line fails that one
request with ``message_too_large`` (:mod:`peerwire.framing`).
"""

OUTPUT_HIGH_WATER_BYTES = 1024 * 1024
"""Answers ``mcp serve`` holds unread by its client before it stops reading requests (backpressure)."""

MAX_CALLS_IN_FLIGHT = 64
"""Tool calls one MCP session runs at once; the next request is read when one of them is answered."""

MAX_ANSWER_LINE_BYTES = 64 * MAX_LINE_BYTES
"""Longest answer line a control client reads (a page of 100 records at the body bound, escaped at worst)."""

CODEX_TOOL_TIMEOUT_S = 70.0
"""How long Codex waits for an MCP tool call (``tool_timeout_sec`` as the README configures it).

Every messaging call, its longest wait included, is answered within this: by the
app, or by the caller's side of the exchange saying the app did not answer.
"""

ANSWER_GRACE_S = 8.0
"""How much longer than a call's own wait its caller waits for the app to answer.

Past it the app is hung (alive but silent, e.g. stopped with SIGSTOP): the call
fails with the retriable ``app_not_responding``. The longest messaging wait
(60 s) plus this stays under :data:`CODEX_TOOL_TIMEOUT_S`.
"""

MIN_ANSWER_BOUND_S = 20.0
"""The least time a caller gives the app to answer any call, however short its own wait.

A busy disk can hold a commit (its fsync) for seconds: under a load average of
12 on two cores a plain send took over 8 s now and then. An app that has not
answered in this long is hung, not slow.
"""

MAX_JSON_DEPTH = 64
"""Deepest nesting of arrays and objects a JSON-RPC or control message may have."""

MAX_WAITERS_PER_CALLER = 64
"""Concurrent ``wait_agent``/``receive_messages`` waits one caller may hold in the app."""

MAX_CONNECTIONS_PER_CALLER = 64
"""Open control connections one caller (one session credential) may hold at once."""

MAX_CONTROL_CONNECTIONS = 512
"""Open control connections the app serves at once (lowered to fit the process's file limit)."""

CONTROL_BACKLOG = 512
"""Connections the kernel queues for the app before it accepts them (a burst of callers must not see EAGAIN)."""

CONTROL_FD_RESERVE = 64
"""At most this many file descriptors are kept free for the store, logs and providers when bounding connections."""

CONTROL_FD_RESERVE_MIN = 24
"""At least this many are kept free: an idle app holds about 16 (its store's files twice, the lock, the log,
the socket), and refusing one more connection takes one of its own."""

CONTROL_FD_RESERVE_SHARE = 4
"""Between those bounds the reserve is this fraction (1/4) of the file limit, so a low limit still leaves most
descriptors to connections (``ulimit -n 64``: 40 connections; 1024: 512, the configured maximum)."""

TOKEN_BYTES = 32
"""Random bytes in a session credential (256 bits)."""

STORE_PATH_MAX_BYTES = 504
"""Longest store path (``<home>/peerwire.db``, UTF-8 bytes) SQLite opens.

SQLite's unix VFS keeps file names in a 512-byte buffer and appends its own
suffixes (``-journal``, ``-wal``); a longer home fails inside SQLite with a
bare "unable to open database file", so peerwire refuses it first.
"""
