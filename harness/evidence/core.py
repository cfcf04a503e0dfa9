"""What a messaging core recorded, read from its evidence export: the harness's one reader of a core.

A core hands over its records, evidence rows, requests, claims, provider
bindings and agents as one document (``contracts/export.schema.json``): the
reference core through its ``export`` operator op or ``peerwire export``,
another core however its driver gets it. Everything in the harness that judges
or reports a run reads that document through :class:`CoreEvidence`, never a
core's storage, so any core that writes the export can be judged.

Records have the shape a recipient reads (``record_id``, ``kind``, ``sender`` and
``recipient`` as ``{agent_id, name}``, ``request_id``, ``status``, ``code``, ...)
plus ``state``, ``tool_receipt`` and timestamps; evidence rows name their record
by ``record_id``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.contract_tables import document_validator, table

from . import stored

SCHEMA = "export.schema.json"
_FORMAT_FIELDS = table(SCHEMA)["properties"]
FORMAT, VERSION = _FORMAT_FIELDS["format"]["const"], _FORMAT_FIELDS["version"]["const"]
"""The export's format and version, as its schema fixes them (the reference writes the same)."""


class ExportError(ValueError):
    """An export this harness cannot read: not JSON, another format or version, or (strict) off-schema."""


class CoreEvidence:
    """One export, indexed. Lists keep the export's order (records by seq, evidence as written)."""

    def __init__(self, document: Mapping[str, Any]):
        if document.get("format") != FORMAT or document.get("version") != VERSION:
            raise ExportError(f"not a {FORMAT} version {VERSION} document (format {document.get('format')!r}, "
                              f"version {document.get('version')!r})")
        self.document = document
        self.records: list[dict[str, Any]] = sorted(document.get("records") or [], key=lambda r: r["seq"])
        self.evidence_rows: list[dict[str, Any]] = sorted(document.get("evidence") or [],
                                                          key=lambda e: e["evidence_id"])
        self.requests: list[dict[str, Any]] = list(document.get("requests") or [])
        self.claims: list[dict[str, Any]] = list(document.get("claims") or [])
        self.bindings: list[dict[str, Any]] = list(document.get("bindings") or [])
        self.agents: list[dict[str, Any]] = list(document.get("agents") or [])
        self._records = {r["record_id"]: r for r in self.records}
        self._evidence: dict[str, list[dict[str, Any]]] = {}
        for row in self.evidence_rows:
            self._evidence.setdefault(row["record_id"], []).append(row)
        self._agents = {a["agent_id"]: a for a in self.agents}
        self.paths: dict[str, str] = {a["agent_id"]: a["path"] for a in self.agents if a.get("path")}
        """agent_id -> collaboration tree path, for the agents of a tree."""

    # -- loading ---------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, strict: bool = True) -> "CoreEvidence":
        """Read an export file; ``strict`` also refuses one that does not match the schema."""
        try:
            document = json.loads(stored.read_bytes(path).decode("utf-8"))
        except ValueError as error:
            raise ExportError(f"{Path(path).name} is not JSON ({error})") from None
        return cls.of(document, strict=strict)

    @classmethod
    def of(cls, document: Any, *, strict: bool = True) -> "CoreEvidence":
        if not isinstance(document, Mapping):
            raise ExportError("an export is a JSON object")
        if strict:
            problems = violations(document)
            if problems:
                raise ExportError(f"the export does not match {SCHEMA}: " + "; ".join(problems[:5]))
        return cls(document)

    # -- questions -------------------------------------------------------------------

    def record(self, record_id: str) -> dict[str, Any] | None:
        return self._records.get(record_id)

    def evidence(self, record_id: str, stage: str | None = None) -> list[dict[str, Any]]:
        """The record's evidence rows in the order written (of one stage when given)."""
        return [row for row in self._evidence.get(record_id, []) if stage in (None, row["stage"])]

    def acknowledgement(self, record_id: str) -> dict[str, Any] | None:
        """The ``acknowledged`` row that covers the record, or ``None`` while it is unacknowledged.

        An acknowledgement is one row for a whole range (on its last record, the range in its detail:
        first_seq..last_seq), so a record is found by its seq within a range of its recipient's.
        """
        record = self.record(record_id)
        if record is None:
            return None
        return next((row for row in self.evidence_rows if row["stage"] == "acknowledged"
                     and (row["detail"].get("by") or {}).get("agent_id") == record["recipient"]["agent_id"]
                     and row["detail"]["first_seq"] <= record["seq"] <= row["detail"]["last_seq"]), None)

    def request(self, request_id: str | None) -> dict[str, Any] | None:
        return next((r for r in self.requests if r["request_id"] == request_id), None)

    def task(self, request_id: str | None) -> dict[str, Any] | None:
        """The task record of a request."""
        return next((r for r in self.records if r["kind"] == "task" and r.get("request_id") == request_id), None)

    def bindings_of(self, request_id: str | None) -> list[dict[str, Any]]:
        return [b for b in self.bindings if b["request_id"] == request_id]

    def binding(self, binding_id: str | None) -> dict[str, Any] | None:
        return next((b for b in self.bindings if b["binding_id"] == binding_id), None)

    def agent(self, agent_id: str | None) -> dict[str, Any] | None:
        return self._agents.get(agent_id or "")

    def name(self, agent_id: str | None) -> str | None:
        agent = self.agent(agent_id)
        return agent["name"] if agent else None


def violations(document: Any) -> list[str]:
    """Where ``document`` departs from ``contracts/export.schema.json`` (empty when it conforms)."""
    errors = sorted(document_validator(SCHEMA).iter_errors(document), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in errors]
