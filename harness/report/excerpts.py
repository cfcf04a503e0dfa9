"""Cited lines of a report's artifacts, read back so a page can show them where they are cited.

Checks cite ``<file>:<line>`` inside a scenario's artifacts folder (rollouts,
app-server transcripts, terminal captures, whatever a check reads). A browser
cannot open a ``.jsonl`` file at a line, so report.html shows each cited line
inline: JSON pretty-printed with each long string clipped to :data:`STRING_CHARS`
(a rollout's first line holds the whole system prompt, cited again and again),
anything else as text, both clipped to :data:`EXCERPT_CHARS` with a note of the
full length. The link beside an excerpt opens the whole line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from harness.evidence import stored

EXCERPT_CHARS = 4000
STRING_CHARS = 240
"""A JSON string longer than this shows its first STRING_CHARS characters and how many there are in all."""


@dataclass(frozen=True)
class Excerpt:
    ref: str
    """``<file>:<line>`` as cited, relative to the scenario's artifacts folder."""
    path: str | None
    """The file relative to the report folder as stored (a compressed file's ``.gz`` name), when it exists."""
    text: str | None
    """The line, pretty-printed and clipped; ``None`` when the reference is not a line of a file."""
    problem: str | None = None


class ArtifactLines:
    """Reads lines of the artifacts under one report folder, each file once."""

    def __init__(self, folder: Path):
        self.folder = folder.resolve()
        self._lines: dict[Path, list[str]] = {}

    def excerpt(self, artifacts_dir: str, ref: str) -> Excerpt:
        path, sep, line = str(ref).rpartition(":")
        if not sep or not line.isdigit():
            return Excerpt(str(ref), None, None, "not <file>:<line>")
        cited = (self.folder / artifacts_dir / path).resolve()
        target = stored.locate(cited) if self.folder in cited.parents else None
        if target is None:
            return Excerpt(str(ref), None, None, "no such artifact")
        relative = target.relative_to(self.folder).as_posix()
        lines = self._read(target)
        number = int(line)
        if not 1 <= number <= len(lines):
            return Excerpt(str(ref), relative, None, f"the file has {len(lines)} lines")
        return Excerpt(str(ref), relative, _pretty(lines[number - 1]))

    def _read(self, path: Path) -> list[str]:
        if path not in self._lines:
            # Lines end at "\n" only: str.splitlines would also split at U+2028 and friends, which
            # JSON written with ensure_ascii=False may hold inside a string, and shift every number.
            with stored.open_binary(path) as handle:
                self._lines[path] = [raw.rstrip(b"\n").decode("utf-8", errors="replace") for raw in handle]
        return self._lines[path]


def _clip_strings(value):
    if isinstance(value, str) and len(value) > STRING_CHARS:
        return f"{value[:STRING_CHARS]}… ({len(value)} characters in all)"
    if isinstance(value, dict):
        return {key: _clip_strings(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_clip_strings(item) for item in value]
    return value


def _pretty(raw: str) -> str:
    try:
        text = json.dumps(_clip_strings(json.loads(raw)), indent=1, ensure_ascii=False)
    except ValueError:
        text = raw
    if len(text) > EXCERPT_CHARS:
        text = text[:EXCERPT_CHARS] + f"\n… clipped: {len(text)} characters in all; the file has the whole line"
    return text
