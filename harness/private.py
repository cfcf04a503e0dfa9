"""Private files: what the harness writes that holds evidence or credentials is its owner's alone.

Folders are 0700 and files 0600 from their first byte, whatever the umask:
a file is created with its mode and only then written, so nothing is ever
readable by others, not even for a moment.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: Path) -> Path:
    """Create ``path`` and its missing parents, each mode 0700 whatever the umask.

    Folders that already exist keep their mode: the caller may own a shared parent.
    """
    missing = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for folder in reversed(missing):
        folder.mkdir(mode=DIR_MODE, exist_ok=True)
        folder.chmod(DIR_MODE)
    return path


def unwritable(path: Path) -> str | None:
    """Why the harness could not write into folder ``path`` (creating it where missing), else ``None``;
    it creates nothing and leaves nothing behind.

    The nearest folder of ``path`` that exists is tried for real (a file made
    and removed at once), not judged from its mode bits, which say nothing of
    a read-only mount, an access list or a run as root.
    """
    probe = path
    while not probe.exists() and not probe.is_symlink() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        return f"{probe} is not a folder" if probe == path else f"{probe}, on its way, is not a folder"
    try:
        fd, name = tempfile.mkstemp(prefix=".writable-", dir=probe)
    except OSError as error:
        return f"cannot write in {probe} ({error.strerror or error})"
    os.close(fd)
    os.unlink(name)
    return None


def write_private(path: Path, data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8) to a new or truncated file that is 0600 from its first byte; its
    missing parent folders are created private."""
    private_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    with os.fdopen(fd, "wb") as out:
        out.write(data.encode("utf-8") if isinstance(data, str) else data)
    path.chmod(FILE_MODE)
    return path


def copy_private(source: Path, target: Path) -> bool:
    """Copy a regular file to ``target``, private (0600, new folders 0700); False when ``source`` is missing
    or is not a regular file (a link is never followed out of where it lies)."""
    if source.is_symlink() or not source.is_file():
        return False
    private_dir(target.parent)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    with os.fdopen(fd, "wb") as out, source.open("rb") as src:
        shutil.copyfileobj(src, out, 1 << 20)
    target.chmod(FILE_MODE)
    return True
