"""Request bodies stored once by content: the model log's ``model-bodies.jsonl``.

Every request Codex sends repeats the system prompt and the tool list, and
carries the whole history again; logged verbatim, a scenario's request log is
mostly copies. The log therefore stores each request's ``body`` *compacted*:
``instructions``, ``tools`` and each ``input`` item (each ``messages`` item of a
Chat Completions request) are replaced by a
reference ``{"$sha256": DIGEST}`` to a value kept once in the bodies file
(one JSON object a line: ``sha256``, ``value``), and the request record keeps
``body_sha256``, the digest of the whole body as Codex sent it. Expanding a
compacted body and hashing it again proves it is the request that arrived
(:func:`expand` checks it), so nothing is lost: every reader sees whole bodies.

A digest is SHA-256 of the value's canonical JSON (keys sorted, no spaces,
UTF-8); the same rule hashes whole bodies.

A report keeps the values of all its scenario runs' bodies files once, in one
run-level store, :data:`RUN_BODIES` in its ``artifacts/`` folder (the runs
share system prompts and tool lists, and compress far better together): a
log's values are those of its own bodies file and of the run-level store of
the ``artifacts`` folder it sits in (:func:`values_for`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from harness.evidence import stored
from harness.evidence.run_store import ARTIFACTS_DIR, RUN_BODIES, digest

BODIES_SUFFIX = ".bodies.jsonl"
"""The bodies file sits beside its log: ``model-requests.jsonl`` -> ``model-requests.bodies.jsonl``."""
REF = "$sha256"
SHARED_FIELDS = ("instructions", "tools")
HISTORY_FIELDS = ("input", "messages")
"""A Responses request's history is ``input``, a Chat Completions request's ``messages``: stored item by item."""


class BodyError(ValueError):
    """A compacted body names a value the bodies file lacks, or expands to another body than was logged."""


def bodies_path(log_path: str | os.PathLike[str]) -> Path:
    path = Path(log_path)
    return path.with_name(path.name.removesuffix(".jsonl") + BODIES_SUFFIX)


class BodyStore:
    """The writer: :meth:`compact` stores each new value once (appending to ``out``) and returns the
    compacted body. Not thread-safe: the model server calls it under its log lock."""

    def __init__(self, out: IO[str] | None):
        self.out = out
        self.known: set[str] = set()

    def compact(self, body: Any) -> Any:
        if not isinstance(body, Mapping):
            return body
        compacted = dict(body)
        for name in SHARED_FIELDS:
            if name in compacted:
                compacted[name] = self._ref(compacted[name])
        for name in HISTORY_FIELDS:
            if isinstance(compacted.get(name), list):
                compacted[name] = [self._ref(item) for item in compacted[name]]
        return compacted

    def _ref(self, value: Any) -> dict[str, str]:
        key = digest(value)
        if key not in self.known:
            self.known.add(key)
            if self.out is not None:
                self.out.write(json.dumps({"sha256": key, "value": value}, ensure_ascii=False) + "\n")
        return {REF: key}


def load_bodies(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The values of a bodies file by digest; a missing file holds none."""
    path = Path(path)
    values: dict[str, Any] = {}
    if not stored.exists(path):
        return values
    with stored.open_text(path) as handle:
        for raw in handle:
            if raw.strip():
                entry = json.loads(raw)
                values[entry["sha256"]] = entry["value"]
    return values


def values_for(log_path: str | os.PathLike[str]) -> dict[str, Any]:
    """The stored values a log's compacted bodies may name: its own bodies file's, and those of the run-level
    store (:data:`RUN_BODIES`) of the nearest ``artifacts`` folder above it, if it has one."""
    path = Path(log_path).absolute()
    values: dict[str, Any] = {}
    run_store = next((folder / RUN_BODIES for folder in path.parents if folder.name == ARTIFACTS_DIR
                      and stored.exists(folder / RUN_BODIES)), None)
    if run_store is not None:
        values.update(load_bodies(run_store))
    values.update(load_bodies(bodies_path(path)))
    return values


def expand(body: Any, values: Mapping[str, Any], *, expected: str | None = None) -> Any:
    """The whole body a compacted one stands for; with ``expected`` (the record's ``body_sha256``) it must
    hash to it. Raises :class:`BodyError` naming the missing value or the mismatch."""
    if not isinstance(body, Mapping):
        return body
    whole = dict(body)
    for name in SHARED_FIELDS:
        if name in whole:
            whole[name] = _resolve(whole[name], values)
    for name in HISTORY_FIELDS:
        if isinstance(whole.get(name), list):
            whole[name] = [_resolve(item, values) for item in whole[name]]
    if expected is not None and digest(whole) != expected:
        raise BodyError(f"the expanded body hashes to {digest(whole)}, not the logged {expected}")
    return whole


def _resolve(value: Any, values: Mapping[str, Any]) -> Any:
    if isinstance(value, Mapping) and set(value) == {REF}:
        try:
            return values[value[REF]]
        except KeyError:
            raise BodyError(f"no stored value {value[REF]}") from None
    return value


def read_log(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, record)`` of each JSON line of a model log, request bodies expanded whole (and checked
    against ``body_sha256``). Lines that are not JSON objects are yielded as ``None`` records so a reader
    can name them; a body that cannot be expanded raises :class:`BodyError` with its line."""
    path = Path(path)
    values = values_for(path)
    with stored.open_text(path, errors="replace") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except ValueError:
                yield number, None  # type: ignore[misc]
                continue
            if isinstance(record, dict) and record.get("event") == "request" and "body_sha256" in record:
                try:
                    record["body"] = expand(record.get("body"), values, expected=record["body_sha256"])
                except BodyError as error:
                    raise BodyError(f"{path.name}:{number}: {error}") from None
            yield number, record
