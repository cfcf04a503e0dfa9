"""The expected-failures baseline: how another implementation adopts the suite gradually.

One entry a line: a requirement ID or a case ID (``suite/case``), then a
comment saying why it is expected to fail::

    # known gaps of our server, tracked in our issue tracker
    send:unicode:byte-exact    # we normalise to NFC before storing
    receive/limit-honoured     # has_more is not implemented yet

Blank lines and whole-line comments are ignored. An entry without a comment,
or listed twice, is an error: a baseline must say why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator


class BaselineError(ValueError):
    """A baseline file that does not parse; the message names every bad line."""


@dataclass(frozen=True)
class BaselineEntry:
    key: str
    comment: str
    line: int


@dataclass(frozen=True)
class Baseline:
    entries: dict[str, BaselineEntry] = field(default_factory=dict)
    path: str | None = None

    def __contains__(self, key: object) -> bool:
        return key in self.entries

    def __iter__(self) -> Iterator[BaselineEntry]:
        return iter(self.entries.values())

    def comment(self, key: str) -> str | None:
        entry = self.entries.get(key)
        return entry.comment if entry else None


def parse_baseline(text: str, path: str | None = None) -> Baseline:
    """Parse baseline text; :class:`BaselineError` lists every malformed line."""
    entries: dict[str, BaselineEntry] = {}
    problems = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, comment = line.partition("#")
        key, comment = key.strip(), comment.strip()
        if not sep or not comment:
            problems.append(f"line {number}: {key!r} needs a comment saying why it is expected to fail")
        elif len(key.split()) != 1:
            problems.append(f"line {number}: one requirement or case a line, found {key!r}")
        elif key in entries:
            problems.append(f"line {number}: {key!r} is already listed on line {entries[key].line}")
        else:
            entries[key] = BaselineEntry(key=key, comment=comment, line=number)
    if problems:
        raise BaselineError(f"baseline {path or ''} has problems:\n  " + "\n  ".join(problems))
    return Baseline(entries=entries, path=path)


def load_baseline(path: Path | None) -> Baseline:
    """The baseline in ``path``; an empty baseline for ``None``."""
    if path is None:
        return Baseline()
    try:
        text = path.read_text("utf-8")
    except OSError as exc:
        raise BaselineError(f"cannot read baseline {path}: {exc.strerror}") from None
    return parse_baseline(text, str(path))
