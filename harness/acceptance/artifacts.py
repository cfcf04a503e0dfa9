"""A scenario run's artifacts folder: what is copied out of its run home, and what never is.

``<artifacts root>/<scenario>.<mode>/`` (directories 0700, files 0600) holds the
files :mod:`harness.evidence.layout` names: the core's export and its own files
(through its driver), the model request log and its stored bodies (the scripted model's, or the recording
proxy's in front of a real provider), the attached TUIs' screens, each Codex agent's rollouts from
its ``CODEX_HOME/sessions``, and each OpenCode agent's own log (its ACP transcripts are the core's files). Only these files are copied: nothing else from an agent's CODEX_HOME (its
``auth.json`` above all) can reach the folder. With a real provider,
the run's checks additionally scan every artifact for the values of
the authorized home's credential file (:meth:`~harness.evidence.secrets.SecretScan.holders`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from harness.lab import acp_agents
from harness.lab.live import CodexLab
from harness.evidence.layout import EXPORT_FILE, MODEL_REQUESTS, ROLLOUTS_DIR, TUI_DIR, pane_name, screen_name
from harness.evidence.model_bodies import bodies_path
from harness.private import copy_private, private_dir, write_private


def collect(lab: CodexLab, destination: Path) -> Path:
    """Copy the run's evidence from the lab's directories into ``destination``.

    Call once the lab has stopped: the core's export is taken after its app
    released it, and the core's own files come through its driver. Missing
    sources (a run that failed early) are skipped. An existing ``destination``
    is replaced: it only ever holds an earlier copy.
    """
    if destination.exists():
        shutil.rmtree(destination)
    private_dir(destination)
    document = lab.export()
    if document is not None:
        write_private(destination / EXPORT_FILE, json.dumps(document, indent=1, ensure_ascii=False))
    lab.core.collect(destination)
    copy_private(lab.root / "artifacts" / MODEL_REQUESTS, destination / MODEL_REQUESTS)
    copy_private(bodies_path(lab.root / "artifacts" / MODEL_REQUESTS), bodies_path(destination / MODEL_REQUESTS))
    for name, agent in lab.agents.items():
        for kept in (screen_name(name), pane_name(name)):
            copy_private(lab.root / "artifacts" / TUI_DIR / kept, destination / TUI_DIR / kept)
        if isinstance(agent, acp_agents.AcpLabAgent):
            acp_agents.collect(agent, destination)
            continue
        for rollout in sorted((agent.codex_home / "sessions").rglob("rollout-*.jsonl")):
            copy_private(rollout, destination / ROLLOUTS_DIR / name / rollout.name)
    return destination
