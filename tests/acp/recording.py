"""Recorded ACP exchanges: the regression fixtures of the ACP adapter (``fixtures/acp/<route>.jsonl``).

The live tests (``tests/acp/test_adapter_live.py``) record agent B's ACP
exchange, both directions in order, when ``PEERWIRE_RECORD_ACP=1``:

    PEERWIRE_RECORD_ACP=1 .venv/bin/python -m pytest -n 0 -m opencode tests/acp/test_adapter_live.py

Ids, times and machine paths are replaced with stable placeholders
(``<session:1>``, ``<message:2>``, ``<uuid:1>``, ``<rq:1>``, ``<path:workspace>``,
``<time>``) so a fixture only changes when the protocol does. A fixture never
holds a credential: the transcript already has the MCP server's environment
redacted, and the recorder refuses to write one that contains a session token
or the model key. The format is the app-server fixtures' (``fixtures/appserver``):
``{"dir": "session", "generation": N}``, then ``{"dir": "sent"|"received", "message": ...}``.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Iterable

from harness.acceptance import record
from harness.codex.fixtures import load  # noqa: F401  (the fixtures' reader, for the replay tests)

FIXTURE_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "acp"
RECORD_ENV = "PEERWIRE_RECORD_ACP"

_PEERWIRE_ID = re.compile(r"\b(rq|ix|cl|bd)_[0-9a-f]{32}\b")
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_OPENCODE_ID = re.compile(r"\b(ses|msg|prt|call|toolu)_[A-Za-z0-9]+\b")
_ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})?")
_CURSOR = re.compile(r'("(?:cursor|ack_cursor)"\s*:\s*")[^"]*(")')
_KINDS = {"ses": "session", "msg": "message", "prt": "part", "call": "call", "toolu": "call"}


class Normaliser(record.Normaliser):
    """The app-server fixtures' normaliser with ACP's ids (OpenCode's ``ses_``, ``msg_``, ...), ISO times and
    cursors."""

    time_keys = frozenset({"created", "createdAt", "updatedAt", "timestamp", "time"})

    def ids(self, value: str) -> str:
        value = _ISO_TIME.sub("<time>", value)
        value = _CURSOR.sub(r"\1<cursor>\2", value)
        value = _PEERWIRE_ID.sub(lambda m: self.name(m.group(1), m.group(0)), value)
        value = _UUID.sub(lambda m: self.name("uuid", m.group(0)), value)
        return _OPENCODE_ID.sub(lambda m: self.name(_KINDS[m.group(1)], m.group(0)), value)


def normalise(transcripts: Iterable[list[dict[str, Any]]], normaliser: Normaliser) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for generation, entries in enumerate(transcripts, start=1):
        out.append({"dir": "session", "generation": generation})
        out += [{"dir": e["dir"], "message": normaliser.value(e["message"])} for e in entries if "message" in e]
    return out


def record(lab: Any, route: str, generations: int = 1) -> Path | None:
    """Write B's exchange of this route as ``fixtures/acp/<route>.jsonl`` when recording is asked for."""
    if os.environ.get(RECORD_ENV) != "1":
        return None
    normaliser = Normaliser({"workspace": str(lab.opencode.workspace), "opencode": str(lab.opencode.root),
                             "core": str(lab.home.path), "root": str(lab.root), "python": sys.executable})
    lines = normalise([lab.transcript(g) for g in range(1, generations + 1)], normaliser)
    text = "".join(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n" for line in lines)
    for secret in (*lab.tokens.values(), lab.opencode.env.get("PEERWIRE_MODEL_KEY") or ""):
        if secret and secret in text:
            raise AssertionError(f"refusing to write fixtures/acp/{route}.jsonl: it holds a credential")
    FIXTURE_DIR.mkdir(parents=True, exist_ok=True)
    path = FIXTURE_DIR / f"{route}.jsonl"
    path.write_text(text, encoding="utf-8")
    return path
