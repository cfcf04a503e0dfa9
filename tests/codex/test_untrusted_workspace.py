"""The untrusted start-up diagnostic (``runner.py --untrusted-workspace``), live.

With fixture-workspace trust off, the agent's projected config trusts nothing
of the run, and the harness answers no trust prompt: every request Codex sends
the owner is refused (approvals declined, anything else "cannot do this").
What Codex then does by itself is what the diagnostic is for. The pinned Codex
asks nobody: its app-server writes the trust entry for the thread's working
directory into ``CODEX_HOME/config.toml`` itself when the thread starts, and
the task's turn runs.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest

from harness.lab.reference import ReferenceLab
from harness.lab.recorded import routes
from harness.contract.manifest import requirement

pytestmark = pytest.mark.codex


def _projects(codex_home: Path) -> dict:
    return tomllib.loads((codex_home / "config.toml").read_text(encoding="utf-8")).get("projects", {})


@requirement("runner:trust:untrusted-diagnostic")
def test_with_trust_off_nothing_is_trusted_for_the_run_and_no_prompt_is_answered(tmp_path: Path) -> None:
    with ReferenceLab(tmp_path, routes.model_script(), agents=("A", "B"), attach=False,
                      trust_workspaces=False) as lab:
        agent = lab.agents["B"]
        workspace = os.fspath(agent.workspace.resolve())
        assert workspace not in _projects(agent.codex_home)
        lab.attach("B")
        out = routes.idle_start(lab)
        assert out["reply"]["status"] == "done"
        # What the pinned Codex did by itself: the app-server trusted the thread's cwd, with no prompt.
        assert _projects(agent.codex_home).get(workspace) == {"trust_level": "trusted"}
        lines = [json.loads(line) for line in lab.transcript("B").read_text().splitlines()]
        asked = {m["id"] for m in (line["message"] for line in lines if line["dir"] == "received")
                 if "method" in m and "id" in m}
        answers = [line["message"] for line in lines if line["dir"] == "sent"
                   and line["message"].get("id") in asked and "method" not in line["message"]]
        for answer in answers:
            result = answer.get("result") or {}
            assert "error" in answer or result.get("decision") in ("decline", "denied") \
                or result.get("action") == "decline" or result.get("permissions") == {}, answer
