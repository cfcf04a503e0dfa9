"""The model request log, written: one writer for the scripted model and the recording proxy alike.

One JSON object a line (read back by :mod:`harness.evidence.model_log`):

* ``request`` when a request arrives: ``seq``, ``at``, ``method``, ``path``,
  ``agent``, ``headers`` (lower-cased, none that may carry a credential),
  ``raw_sha256`` (SHA-256 of the body's bytes as they arrived), ``body_sha256``
  (of the decoded body's canonical JSON) and ``body``, stored compacted: each
  distinct system prompt, tool list and input item once, in the bodies file
  beside the log (:mod:`harness.evidence.model_bodies`);
* ``response`` when it ends: ``seq``, ``at``, ``agent``, ``outcome``, what
  answered it (``rule`` and ``hold`` for the scripted model, ``status`` and
  ``upstream`` for the proxy), the ``items`` emitted and an ``error``;
* ``release`` when the scripted model opens a hold.

Whoever writes both logs from several threads serialises the calls (the
writer holds no lock of its own: its callers already hold theirs).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from harness.evidence.model_bodies import BodyStore, bodies_path, digest

# Header names that may carry a credential or identify an account: never logged.
_SECRET_HEADER = re.compile(r"auth|key|token|secret|cookie|password|account|organization|project", re.IGNORECASE)


def redacted_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Request headers, lower-cased, without any that may carry a credential (Authorization, api keys, tokens,
    cookies) or name an account (ChatGPT account, organization, project)."""
    return {name.lower(): value for name, value in headers if not _SECRET_HEADER.search(name)}


def raw_digest(raw: bytes) -> str:
    """SHA-256 of a body's bytes as they arrived (before any decoding)."""
    return hashlib.sha256(raw).hexdigest()


class ModelLogWriter:
    """Appends to the model request log at ``path`` and its bodies file (``None``: writes nothing)."""

    def __init__(self, path: str | os.PathLike[str] | None):
        self.path = Path(path) if path is not None else None
        self._log: IO[str] | None = None
        self._bodies = BodyStore(None)

    def open(self) -> "ModelLogWriter":
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._log = self.path.open("a", encoding="utf-8")
            self._bodies = BodyStore(bodies_path(self.path).open("a", encoding="utf-8"))
        return self

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._bodies.out is not None:
            self._bodies.out.close()
            self._bodies = BodyStore(None)

    def request(self, *, seq: int, at: float, method: str, path: str, agent: str | None, headers: dict[str, str],
                body: Any, raw: bytes | None, **extra: Any) -> None:
        """The ``request`` record of a request that arrived (``raw``: its body's bytes; ``body``: decoded)."""
        record = {"event": "request", "seq": seq, "at": at, "method": method, "path": path, "agent": agent,
                  "headers": headers, **extra}
        if raw is not None:
            record["raw_sha256"] = raw_digest(raw)
        record["body_sha256"] = digest(body)
        record["body"] = self._bodies.compact(body)
        self.write(record)

    def write(self, record: dict[str, Any]) -> None:
        if self._log is None:
            return
        if self._bodies.out is not None:
            self._bodies.out.flush()  # a reader that sees the request line finds its stored values
        self._log.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._log.flush()
