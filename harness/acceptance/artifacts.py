"""A scenario run's artifacts folder: what is copied out of its run home, and what never is.

``<artifacts root>/<scenario>.<mode>/`` (directories 0700, files 0600) holds the
files :mod:`harness.evidence.layout` names: the core's export and its own files
(through its driver), the scripted model's log and its stored bodies, and each agent's rollouts from
its ``CODEX_HOME/sessions``. Only these files are copied: nothing else from an agent's CODEX_HOME (its
``auth.json`` above all) can reach the folder. With a real provider,
:func:`credential_leaks` additionally scans every artifact for the values of
the authorized home's credential file.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from harness.codex.home import AUTH_FILE
from harness.codex.lab import CodexLab
from harness.evidence.layout import EXPORT_FILE, MODEL_REQUESTS, ROLLOUTS_DIR, TUI_DIR, screen_name
from harness.model.bodies import bodies_path
from harness.report.secrets import MIN_SECRET_CHARS, auth_values


def collect(lab: CodexLab, destination: Path) -> Path:
    """Copy the run's evidence from the lab's directories into ``destination``.

    Call once the lab has stopped: the core's export is taken after its app
    released it, and the core's own files come through its driver. Missing
    sources (a run that failed early) are skipped. An existing ``destination``
    is replaced: it only ever holds an earlier copy.
    """
    if destination.exists():
        shutil.rmtree(destination)
    _private_dir(destination)
    document = lab.export()
    if document is not None:
        _write(destination / EXPORT_FILE, json.dumps(document, indent=1, ensure_ascii=False).encode("utf-8"))
    lab.core.collect(destination)
    copy_private(lab.root / "artifacts" / MODEL_REQUESTS, destination / MODEL_REQUESTS)
    copy_private(bodies_path(lab.root / "artifacts" / MODEL_REQUESTS), bodies_path(destination / MODEL_REQUESTS))
    for name, agent in lab.agents.items():
        copy_private(lab.root / "artifacts" / TUI_DIR / screen_name(name), destination / TUI_DIR / screen_name(name))
        for rollout in sorted((agent.codex_home / "sessions").rglob("rollout-*.jsonl")):
            copy_private(rollout, destination / ROLLOUTS_DIR / name / rollout.name)
    return destination


def credential_values(auth_home: Path) -> list[str]:
    """Every string in the authorized home's credential file long enough to identify it."""
    values = auth_values(auth_home / AUTH_FILE).values()
    return sorted({value for value in values if len(value) >= MIN_SECRET_CHARS})


def credential_leaks(folder: Path, secrets: Iterable[str]) -> list[Path]:
    """The files under ``folder`` that contain any of ``secrets`` (or are a credential file)."""
    needles = [secret.encode("utf-8") for secret in secrets]
    leaks = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.name == AUTH_FILE or any(needle in data for needle in needles):
            leaks.append(path)
    return leaks


def copy_private(source: Path, target: Path) -> None:
    """Copy a file into an artifacts folder, private (0600, folders 0700); a missing ``source`` is skipped."""
    if not source.is_file():
        return
    _private_dir(target.parent)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out, source.open("rb") as src:
        shutil.copyfileobj(src, out)


def _write(target: Path, data: bytes) -> None:
    _private_dir(target.parent)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def _private_dir(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)
