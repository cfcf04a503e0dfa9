"""Private run reports: ``write_report(out_dir, run, artifacts_root)`` and ``load_report(path)``.

A report folder holds ``report.json``, ``report.md``, ``report.html`` (:mod:`.html`),
``junit.xml`` (:mod:`.junit`) and the artifacts; shard reports merge into one
(:mod:`.merge`). ``run`` is what the acceptance runner hands over::

    {"run_id", "started_at", "finished_at", "codex_version", "provider",
     "suite": {...}, "shard": {...},                  (optional: harness/shards.py)
     "scenarios": [{"name", "mode", "description", "passed", "wall_s",
                    "persona", "provider", "trial",   (optional: the rest of the run's identity, .identity)
                    "phases": [{"name", "s"}],
                    "agents": {name: {"agent_id", "thread_ids": [...], "generations": [...]}},
                    "inputs": {"prompts": {agent: [text, ...]}},
                    "outputs": {agent: [final text, ...]},
                    "checks": [{"id", "verdict": "pass" | "fail", "summary",
                                "evidence": {"records": [ids], "rollout": ["rollouts/B/<file>:<line>"],
                                             "model_requests": [seq, ...],
                                             "appserver": ["appserver/<file>:<line>"]}}],
                    "runner_tool_calls": [{"step", "agent", "tool", "arguments", "result", "error"}],
                    "probe": {"success", "requests", ...},   (optional: the collaboration probe)
                    "artifacts_dir": "<scenario>/"}]}

and ``artifacts_root/<artifacts_dir>`` holds ``core-export.json``,
``model-requests.jsonl``, ``appserver/*.jsonl`` and ``rollouts/<agent>/*.jsonl``.
"""

from harness.evidence.secrets import SecretScan

from .sequence import SequenceDiagram
from .writer import ReportError, load_report, report_schema, validate_report, write_report

__all__ = ["ReportError", "SecretScan", "SequenceDiagram", "load_report", "report_schema", "validate_report", "write_report"]
