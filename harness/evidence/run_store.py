"""The run-level store's name, the canonical JSON its keys digest, and a reader that needs nothing else.

A report keeps values that many files repeat (request bodies' parts, rollouts'
long strings) once, in :data:`RUN_BODIES` in its ``artifacts/`` folder: one
JSON object a line, ``sha256`` and ``value``, the key being the SHA-256 of the
value's canonical JSON (keys sorted, no spaces, UTF-8). This module sits below
everything that reads stored artifacts (:mod:`harness.evidence.stored` expands
rollouts' references through :mod:`harness.evidence.long_strings`, which reads
the store here), so it imports the standard library alone.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from pathlib import Path
from typing import Any

ARTIFACTS_DIR = "artifacts"
RUN_BODIES = "model-bodies.jsonl"
"""The run-level store's name in a report's ``artifacts/`` folder (``.gz`` once the report is written)."""


def canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def digest(value: Any) -> str:
    return hashlib.sha256(canonical(value)).hexdigest()


def read_values(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The values of a store file (plain, or compressed when its name ends in ``.gz``) by key."""
    path = Path(path)
    opener = gzip.open if path.name.endswith(".gz") else open
    values: dict[str, Any] = {}
    with opener(path, "rt", encoding="utf-8") as handle:
        for raw in handle:
            if raw.strip():
                entry = json.loads(raw)
                values[entry["sha256"]] = entry["value"]
    return values
