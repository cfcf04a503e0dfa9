"""Evidence files as a report stores them: whole, gzip-compressed, cited by their own names.

A run writes its artifacts as plain files. A report keeps every one of them, byte for byte,
but stores each text evidence file (:data:`COMPRESSED_SUFFIXES`: rollouts, app-server
transcripts, the model log and its bodies, the core's export and logs, TUI screens) as
``<name>.gz``: that is most of a report's size, and JSON lines compress about sixfold.

Checks and reports still cite the name the run wrote (``rollouts/A/rollout-….jsonl:12``),
and every reader opens a file by that name through :func:`open_binary` / :func:`open_text`,
which find either form. ``zcat`` (or any gzip reader) shows a stored file as the run wrote it, except that a stored rollout's long
strings are references into the report's run-level store (:mod:`harness.evidence.long_strings`), which
:func:`open_binary` expands.
"""

from __future__ import annotations

import gzip
import io
import os
from collections.abc import Iterable
from pathlib import Path
from typing import IO

GZIP_SUFFIX = ".gz"
COMPRESSED_SUFFIXES = frozenset({".jsonl", ".json", ".log", ".txt"})
"""The kinds of evidence file a report stores compressed; anything else is stored as written."""


def stored_name(name: str) -> str:
    """The name a report stores the file ``name`` under (``a.jsonl`` → ``a.jsonl.gz``)."""
    return name + GZIP_SUFFIX if Path(name).suffix in COMPRESSED_SUFFIXES else name


def cited_name(name: str) -> str:
    """The name the run wrote, which checks cite, for a stored name (``a.jsonl.gz`` → ``a.jsonl``)."""
    if name.endswith(GZIP_SUFFIX) and Path(name[: -len(GZIP_SUFFIX)]).suffix in COMPRESSED_SUFFIXES:
        return name[: -len(GZIP_SUFFIX)]
    return name


def is_stored_compressed(name: str) -> bool:
    """Whether ``name`` is the compressed form of a text evidence file (``a.jsonl.gz``, not ``a.tar.gz``)."""
    return cited_name(name) != name


def locate(path: str | os.PathLike[str]) -> Path | None:
    """The file that holds ``path``'s content: ``path`` as written, else its compressed form, else None."""
    plain = Path(path)
    if plain.is_file():
        return plain
    packed = plain.with_name(plain.name + GZIP_SUFFIX)
    return packed if packed.is_file() else None


def exists(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is held, as written or compressed."""
    return locate(path) is not None


def open_binary(path: str | os.PathLike[str]) -> IO[bytes]:
    """Open ``path`` (as written, or its compressed form) for reading its content as written.
    Raises ``FileNotFoundError`` naming ``path`` when neither form exists."""
    found = locate(path)
    if found is None:
        raise FileNotFoundError(2, "No such file (nor a compressed copy)", os.fspath(path))
    if not is_stored_compressed(found.name):
        return found.open("rb")
    from harness.evidence import long_strings  # it reads the store through this module

    if long_strings.applies(cited_name(found.name)):
        # A rollout in a report: its long strings are kept once in the run-level store; give it back whole.
        with gzip.open(found, "rb") as packed:
            data = packed.read()
        return io.BytesIO(long_strings.expand(data, long_strings.store_values(found) if long_strings.OPENING in data
                                              else {}))
    return gzip.open(found, "rb")


def open_text(path: str | os.PathLike[str], *, errors: str = "strict") -> IO[str]:
    """:func:`open_binary` as UTF-8 text; lines end at ``\\n`` only, as the writers wrote them."""
    return io.TextIOWrapper(open_binary(path), encoding="utf-8", errors=errors, newline="\n")


def read_bytes(path: str | os.PathLike[str]) -> bytes:
    with open_binary(path) as handle:
        return handle.read()


def pack(data: bytes) -> bytes:
    """``data`` as a report stores it: gzip, with no name or time in the header (same bytes in, same out)."""
    return gzip.compress(data, mtime=0)


def compress(path: Path, *, mode: int = 0o600) -> Path:
    """Replace ``path`` by ``<path>.gz`` holding the same bytes (no name or time in the gzip header, so the
    same content always gives the same stored bytes); returns the stored path."""
    target = path.with_name(path.name + GZIP_SUFFIX)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as out:
        out.write(pack(path.read_bytes()))
    target.chmod(mode)
    path.unlink()
    return target


def compress_all(files: Iterable[Path]) -> list[Path]:
    """Store each of ``files`` whose kind is compressed as ``.gz``; returns every stored path, in order."""
    return [compress(path) if stored_name(path.name) != path.name else path for path in files]
