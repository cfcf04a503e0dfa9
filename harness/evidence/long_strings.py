"""Long strings of Codex rollouts kept once, in a report's run-level store.

Every rollout Codex writes opens with its ``session_meta``, which holds the
whole system prompt (``base_instructions``, some 21 kB), and a collaboration
run's rollouts repeat developer instructions and context blocks: kept in each
rollout of each scenario run, they were most of a report's rollout bytes, and
gzip compresses each file alone. So a report stores each rollout with every
JSON string of at least :data:`MIN_BYTES` bytes replaced by a reference
``{"$sha256":"DIGEST"}`` to the string kept once in the run-level store
(:data:`~harness.evidence.run_store.RUN_BODIES`, beside the request bodies'
values; the system prompt is the same value as the requests' ``instructions``).

Nothing is lost: only a string whose JSON form is the canonical one
(:func:`~harness.evidence.run_store.canonical`, as Codex writes it) is
replaced, and a rollout that already holds a reference's opening is stored
whole, so expanding the references gives back the bytes Codex wrote, line for
line (citations ``rollout-….jsonl:N`` keep their lines). Every reader opens a
stored rollout through :func:`harness.evidence.stored.open_binary`, which
expands it (:func:`expand`); a reference to a string the store lacks raises
:class:`MissingString`.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harness.evidence.run_store import ARTIFACTS_DIR, RUN_BODIES, canonical, digest, read_values

MIN_BYTES = 1024
"""Strings this long (as JSON, quotes included) or longer go to the store."""
OPENING = b'{"$sha256":"'
_REFERENCE = re.compile(rb'\{"\$sha256":"([0-9a-f]{64})"\}')
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')  # a JSON string literal (UTF-8 never has " or \ inside a code point)


class MissingString(ValueError):
    """A stored rollout names a string its report's run-level store does not hold."""


def applies(name: str) -> bool:
    """Whether a file of this (cited) name is stored with its long strings referenced: Codex rollouts."""
    return name.startswith("rollout-") and name.endswith(".jsonl")


def intern(data: bytes, keep: Callable[[str, Any], None]) -> bytes:
    """``data`` (a rollout's bytes) with each long canonical string replaced by its reference; ``keep(digest,
    value)`` is called for each. A rollout that already holds :data:`OPENING` is returned whole."""
    if OPENING in data:
        return data

    def swap(match: re.Match[bytes]) -> bytes:
        literal = match.group()
        if len(literal) < MIN_BYTES:
            return literal
        value = json.loads(literal)
        if canonical(value) != literal:
            return literal
        key = digest(value)
        keep(key, value)
        return OPENING + key.encode("ascii") + b'"}'

    return _STRING.sub(swap, data)


def expand(data: bytes, values: Mapping[str, Any]) -> bytes:
    """The bytes Codex wrote for a rollout stored by :func:`intern`."""
    def back(match: re.Match[bytes]) -> bytes:
        key = match.group(1).decode("ascii")
        if key not in values:
            raise MissingString(f"the run-level store holds no string {key}")
        return canonical(values[key])

    return _REFERENCE.sub(back, data) if OPENING in data else data


def store_values(path: str | os.PathLike[str]) -> Mapping[str, Any]:
    """The values of the run-level store of the nearest ``artifacts`` folder above ``path`` (none: empty)."""
    here = Path(path).absolute()
    for folder in here.parents:
        if folder.name == ARTIFACTS_DIR:
            for name in (RUN_BODIES, RUN_BODIES + ".gz"):
                store = folder / name
                if store.is_file():
                    status = store.stat()
                    return _load(str(store), status.st_mtime_ns, status.st_size)
    return {}


@functools.lru_cache(maxsize=4)
def _load(path: str, mtime_ns: int, size: int) -> Mapping[str, Any]:
    return read_values(path)
