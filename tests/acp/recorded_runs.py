"""Recorded scenario runs of OpenCode agents: a run's evidence, kept so the checks can be judged without OpenCode.

``fixtures/acp/runs/<slug>/`` holds what a scenario run of two OpenCode agents
left that the checks read: the core's evidence export, each agent's ACP
transcript, and the model request log. They are recorded from a run kept with
``--keep-home`` (its artifacts folder)::

    .venv/bin/python runner.py --agents opencode,opencode --scenario smoke --keep-home
    .venv/bin/python -m tests.acp.recorded_runs <runs root>/<run>/artifacts/smoke.attached.opencode-opencode

Machine paths become ``/run`` (the run home) and ``/src`` (the checkout); the
request log keeps each body whole and inline, with OpenCode's system prompt
and its own tools elided (no check reads them; the peerwire tools stay), so a
fixture is small and holds nothing of the machine. Ids and times stay as
recorded: the export, the transcripts and the log name the same ones.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from harness.evidence.layout import ACP_DIR, ACP_TRANSCRIPT, EXPORT_FILE, MODEL_REQUESTS
from harness.evidence.model_log import ModelRequestLog

RUNS_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "acp" / "runs"
ROOT = Path(__file__).resolve().parents[2]
ELIDED = "(OpenCode's system prompt, elided from the fixture)"
_RUN_HOME = re.compile(r"/[^\"\s]*?/scenarios/[^/\"\s]+")


def _paths(text: str) -> str:
    text = _RUN_HOME.sub("/run", text)
    return text.replace(str(ROOT), "/src")


def record_run(artifacts: Path, dest: Path) -> Path:
    """Keep the run in ``artifacts`` as the fixture ``dest`` (replaced)."""
    if dest.exists():
        shutil.rmtree(dest)
    (dest / ACP_DIR).mkdir(parents=True)
    (dest / EXPORT_FILE).write_text(_paths((artifacts / EXPORT_FILE).read_text("utf-8")), "utf-8")
    for path in sorted((artifacts / ACP_DIR).iterdir()):
        if ACP_TRANSCRIPT.fullmatch(path.name):
            (dest / ACP_DIR / path.name).write_text(_paths(path.read_text("utf-8")), "utf-8")
    log = ModelRequestLog.load(artifacts / MODEL_REQUESTS)
    assert not log.problems, log.problems
    lines = []
    for raw in (artifacts / MODEL_REQUESTS).read_text("utf-8").splitlines():
        record = json.loads(raw)
        if record.get("event") == "request":
            request = next(r for r in log.requests if r.seq == record["seq"])
            record.pop("body_sha256", None)
            record["body"] = _trimmed(request.body)
        lines.append(_paths(json.dumps(record, ensure_ascii=False)))
    (dest / MODEL_REQUESTS).write_text("\n".join(lines) + "\n", "utf-8")
    return dest


def _trimmed(body: dict[str, Any]) -> dict[str, Any]:
    messages = [({**m, "content": ELIDED} if m.get("role") == "system" else m) for m in body.get("messages") or []]
    tools = [t for t in body.get("tools") or [] if str((t.get("function") or {}).get("name", "")).startswith("peerwire_")]
    return {**body, "messages": messages, "tools": tools}


if __name__ == "__main__":
    source = Path(sys.argv[1])
    print(record_run(source, RUNS_DIR / source.name.replace(".attached", "")))
