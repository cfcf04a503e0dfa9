"""The operator commands a person uses to run Codex agents by hand."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.lab.recorded import routes
from harness.lab.reference import ReferenceLab
from peerwire.home import HOME_ENV, SESSION_ENV
from tests.patience import WAIT_S

pytestmark = pytest.mark.codex


def peerwire(lab: ReferenceLab, *args: str, token: str | None = None) -> dict:
    env = {**lab.child_env(), HOME_ENV: str(lab.home.path)}
    env.pop(SESSION_ENV, None)
    if token:
        env[SESSION_ENV] = token
    done = subprocess.run([sys.executable, "-m", "peerwire", *args, "--json"], env=env, capture_output=True,
                          text=True, timeout=WAIT_S)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def test_attach_task_prompt_detach(tmp_path):
    script = routes.model_script()
    with ReferenceLab(tmp_path, script, agents=("A", "B"), attach=False) as lab:
        b = lab.agents["B"]
        # The lab's launcher for B: Codex with B's launch settings (its model, approvals) on the command line.
        attached = peerwire(lab, "agent", "attach", "B", "--codex-home", str(b.codex_home), "--cwd",
                            str(b.workspace), "--codex", str(b.launcher))
        assert attached["generation"] == 1 and attached["thread_id"]
        receipt = peerwire(lab, "task", "--to", "B", "--body", "[idle] by hand", token=lab.agents["A"].token)
        reply = routes.await_reply(lab, receipt["request_id"])
        assert reply["status"] == "done" and reply["sender"]["name"] == "B"
        turn = peerwire(lab, "prompt", "B", "--text", "Please check your messages.", "--wait", "60")
        assert turn["status"] == "completed"
        owners = peerwire(lab, "agent", "owners")["owners"]
        assert [o["name"] for o in owners] == ["B"] and owners[0]["active_turn"] is None
        assert peerwire(lab, "agent", "detach", "B")["generation"] == 1
        assert peerwire(lab, "agent", "owners")["owners"] == []
