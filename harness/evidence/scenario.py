"""One scenario run's evidence, read back: the one reader that both the checks and the report use.

The files, all inside one scenario's artifacts folder (as the run wrote them, or
as a report stores them, gzip-compressed: :mod:`.stored` reads either):

* ``core-export.json`` — the core's evidence export (records, evidence rows,
  requests, claims, bindings, agents), read through :class:`~.core.CoreEvidence`;
* ``appserver/<agent>.g<n>.appserver.jsonl`` — each owner generation's
  JSON-RPC transcript (``dir`` sent/received, ``message``);
* ``acp/<agent>.g<n>.acp.jsonl`` — an ACP agent's: each generation's ACP
  transcript, read as the agent's history too (:mod:`.acp_history`);
* ``rollouts/<agent>/*.jsonl`` — the agents' Codex rollouts, indexed by
  :class:`~.rollouts.RolloutIndex`;
* ``model-requests.jsonl`` — every request the agents sent their model (the
  scripted model, or a real provider through the run's recording proxy) and
  what it answered, :class:`~.model_log.ModelRequestLog`;
* ``tui/<agent>.screen.txt`` — in mode ``attached_tui``, the agent's TUI screen,
  and ``tui/<agent>.pane.json`` whether that TUI was still running then.

Every file is optional here: what is missing or unreadable is listed in
``problems`` and the rest is still read. Lines carry their reference
(``rollouts/B/<file>:<line>``, ``appserver/B.g1.appserver.jsonl:<line>``,
1-based, by the name the run wrote) so a verdict can cite them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import stored
from .core import CoreEvidence, ExportError, violations
from .acp_history import AcpHistory
from .layout import (ACP_DIR, ACP_TRANSCRIPT, APPSERVER_DIR, EXPORT_FILE, MODEL_REQUESTS, ROLLOUTS_DIR, TRANSCRIPT,
                     TUI_DIR, pane_name, screen_name)
from .model_log import ModelRequestLog
from .rollouts import RolloutIndex
from .transcript_lines import TranscriptLine, read_transcripts

__all__ = ["ScenarioEvidence", "ScreenLine", "TranscriptLine"]


@dataclass(frozen=True)
class ScreenLine:
    """One line of an attached TUI's screen capture, with its reference (``tui/<agent>.screen.txt:<line>``)."""

    ref: str
    text: str


@dataclass
class ScenarioEvidence:
    """The evidence files of one scenario run, loaded (see the module docs)."""

    root: Path
    core: CoreEvidence | None
    """The core's evidence export; ``None`` when it is missing or unreadable (see ``problems``)."""
    export_error: str | None
    """Why ``core`` is None, in one line."""
    rollouts: RolloutIndex
    model_log: ModelRequestLog
    thread_agents: dict[str, str]
    """Thread id -> the agent whose Codex home held its rollout (where exactly one did)."""
    problems: list[str]
    _transcripts: dict[str, list[TranscriptLine]] = field(default_factory=dict, repr=False)
    _acp: dict[str, list[TranscriptLine]] = field(default_factory=dict, repr=False)
    _histories: dict[str, AcpHistory] = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, root: Path, *, model_log: bool = True, strict: bool = False) -> "ScenarioEvidence":
        """Read the folder ``root``.

        ``model_log``: the run kept a model request log (the scripted model's, or the
        recording proxy's in front of a real provider), so a missing one is a problem;
        False for a report of a real-provider run made before the proxy existed.
        ``strict``: an export that does not match its schema is unusable (``core`` None), not a problem beside it.
        """
        root = Path(root)
        problems: list[str] = []
        core, export_error = None, None
        try:
            core = CoreEvidence.load(root / EXPORT_FILE, strict=strict)
        except FileNotFoundError:
            export_error = "the core left no evidence export"
            problems.append(f"{EXPORT_FILE}: missing")
        except (ExportError, KeyError, TypeError) as exc:
            export_error = f"the core's evidence export is unusable: {exc}"
            problems.append(f"{EXPORT_FILE}: unreadable ({exc})")
        if core is not None and not strict:
            problems.extend(f"{EXPORT_FILE}: {problem}" for problem in violations(core.document))
        rollout_files = sorted(p for p in (root / ROLLOUTS_DIR).rglob("*")
                               if p.is_file() and stored.cited_name(p.name).endswith(".jsonl"))
        if not rollout_files and not (root / ACP_DIR).is_dir():
            problems.append(f"{ROLLOUTS_DIR}/: no rollout files")  # an ACP agent leaves its transcript instead
        index = RolloutIndex.load(rollout_files, root=root)
        problems.extend(index.problems)
        thread_agents: dict[str, str] = {}
        for thread in index.threads.values():
            # rollouts/<agent>/...: the folder names the agent whose Codex home held the file
            owners = {Path(f).parts[1] for f in thread.files if len(Path(f).parts) > 2}
            if len(owners) == 1:
                thread_agents[thread.thread_id] = owners.pop()
            else:
                problems.append(f"thread {thread.thread_id} is in the rollouts of {sorted(owners)}")
        requests = ModelRequestLog.load(root / MODEL_REQUESTS, expected=model_log)
        problems.extend(requests.problems)
        return cls(root, core, export_error, index, requests, thread_agents, problems)

    def transcript(self, agent: str) -> list[TranscriptLine]:
        """Every generation's app-server transcript of ``agent``, in generation order (none: empty)."""
        if agent not in self._transcripts:
            self._transcripts[agent] = read_transcripts(self.root, APPSERVER_DIR, TRANSCRIPT, agent)
        return self._transcripts[agent]

    def acp_transcript(self, agent: str) -> list[TranscriptLine]:
        """Every generation's ACP transcript of ``agent`` (an ACP agent), in generation order (none: empty)."""
        if agent not in self._acp:
            self._acp[agent] = read_transcripts(self.root, ACP_DIR, ACP_TRANSCRIPT, agent)
        return self._acp[agent]

    def acp_history(self, agent: str) -> AcpHistory:
        """``agent``'s ACP transcript read as its history (empty for an agent without one)."""
        if agent not in self._histories:
            self._histories[agent] = AcpHistory(self.acp_transcript(agent))
        return self._histories[agent]

    def acp_agents(self) -> list[str]:
        """The agents that left an ACP transcript, by name."""
        folder = self.root / ACP_DIR
        names = {m["agent"] for m in (ACP_TRANSCRIPT.fullmatch(stored.cited_name(p.name))
                                      for p in (folder.iterdir() if folder.is_dir() else ())) if m}
        return sorted(names)

    def screen(self, agent: str) -> list[ScreenLine] | None:
        """The lines of ``agent``'s TUI screen (mode attached_tui); None when the run kept none."""
        path = self.root / TUI_DIR / screen_name(agent)
        if not stored.exists(path):
            return None
        with stored.open_text(path) as text:
            return [ScreenLine(f"{TUI_DIR}/{path.name}:{number}", line)
                    for number, line in enumerate(text.read().split("\n"), start=1)]

    def pane(self, agent: str) -> tuple[str, dict[str, Any]] | None:
        """``agent``'s TUI pane state (``alive``, ``exit_status``) when its screen was kept, with its reference
        (``tui/<agent>.pane.json``); None when the run kept none or it is unreadable."""
        path = self.root / TUI_DIR / pane_name(agent)
        if not stored.exists(path):
            return None
        try:
            with stored.open_text(path) as text:
                state = json.loads(text.read())
        except ValueError:
            return None
        return (f"{TUI_DIR}/{path.name}", state) if isinstance(state, dict) else None
