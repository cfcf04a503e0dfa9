"""The JSON-RPC transcripts a core's adapters write, read back line by line.

The Codex adapter writes each owner generation's app-server transcript
(``appserver/<agent>.g<n>.appserver.jsonl``), the ACP adapter each ACP
session's (``acp/<agent>.g<n>.acp.jsonl``); both hold one entry a line:
``{"seq", "mono", "wall", "dir": "sent" | "received", "message"}``. A
:class:`TranscriptLine` keeps its reference (``appserver/B.g1.appserver.jsonl:7``,
1-based, by the name the run wrote) so a verdict can cite it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import stored
from .rollouts import Location


@dataclass(frozen=True)
class TranscriptLine:
    """One message of an adapter's transcript, with its reference."""

    ref: str
    generation: int
    dir: str  # sent | received
    message: dict[str, Any]
    wall: float | None = None
    """When the adapter wrote it (Unix seconds), where the transcript says."""

    @property
    def method(self) -> str | None:
        return self.message.get("method")

    @property
    def params(self) -> dict[str, Any]:
        return self.message.get("params") or {}

    @property
    def location(self) -> Location:
        file, _, line = self.ref.rpartition(":")
        return Location(file, int(line))


def read_transcripts(root: Path, folder: str, pattern: re.Pattern[str], agent: str) -> list[TranscriptLine]:
    """Every generation's transcript of ``agent`` in ``root/folder`` whose name matches ``pattern`` (groups
    ``agent`` and ``generation``), in generation order; none: empty. Names are matched, never globbed (a
    collaboration child's path has '/')."""
    directory = root / folder
    found = sorted((int(m["generation"]), directory / m.group(0)) for m in
                   (pattern.fullmatch(stored.cited_name(p.name))
                    for p in (directory.iterdir() if directory.is_dir() else ()))
                   if m and m["agent"] == agent)
    lines: list[TranscriptLine] = []
    for generation, path in found:
        with stored.open_text(path) as text:
            for number, raw in enumerate(text.read().splitlines(), start=1):
                entry = json.loads(raw)
                if "message" not in entry:
                    continue  # a line the peer wrote that was not JSON: kept raw, carries no message
                wall = entry.get("wall")
                lines.append(TranscriptLine(f"{folder}/{path.name}:{number}", generation, entry["dir"],
                                            entry["message"], float(wall) if isinstance(wall, (int, float)) else None))
    return lines
