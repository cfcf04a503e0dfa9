"""Copying a run's artifacts into a private report folder, and their SHA-256 manifest.

Folders are created 0700 and files 0600 whatever the umask, so a report is
readable by its owner only. Only regular files are copied: a symbolic link could
lead out of the artifacts (into a Codex home, say) and is skipped. Files that are
known to carry credentials are never copied, whatever folder they are in:
``config.toml`` (a projected Codex config holds the agent's peerwire session
token) and ``auth.json`` (a Codex login).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.names import AUTH_FILE, CONFIG_NAME
from harness.private import FILE_MODE, private_dir

NEVER_COPIED = frozenset({CONFIG_NAME, AUTH_FILE})
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Artifact:
    """One copied file: its path relative to the report folder, size and SHA-256."""

    path: str
    bytes: int
    sha256: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "bytes": self.bytes, "sha256": self.sha256}


def copy_artifacts(source: Path, dest: Path) -> tuple[list[Path], list[str]]:
    """Copy the regular files under ``source`` to ``dest``, keeping relative paths.

    Returns the copied files and the relative paths left out (links, special
    files, :data:`NEVER_COPIED` names). A missing ``source`` copies nothing.
    """
    copied: list[Path] = []
    skipped: list[str] = []
    if not source.is_dir():
        return copied, skipped
    private_dir(dest)
    for folder, dirs, files in os.walk(source, followlinks=False):
        here = Path(folder)
        for name in sorted(dirs):
            path = here / name
            if path.is_symlink():
                skipped.append(path.relative_to(source).as_posix())
            else:
                private_dir(dest / path.relative_to(source))
        dirs[:] = sorted(d for d in dirs if not (here / d).is_symlink())
        for name in sorted(files):
            path = here / name
            relative = path.relative_to(source)
            if path.is_symlink() or name in NEVER_COPIED or not path.is_file():
                skipped.append(relative.as_posix())
                continue
            target = dest / relative
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
            with path.open("rb") as src, os.fdopen(fd, "wb") as out:
                shutil.copyfileobj(src, out, _CHUNK)
            target.chmod(FILE_MODE)
            copied.append(target)
    return copied, skipped


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def manifest(root: Path, files: list[Path]) -> list[Artifact]:
    """SHA-256 and size of ``files``, paths relative to ``root``, sorted by path."""
    return sorted((Artifact(p.relative_to(root).as_posix(), p.stat().st_size, sha256_file(p)) for p in files),
                  key=lambda a: a.path)
