"""A live ACP lab for the adapter's tests: the real app, the pinned OpenCode, the scripted model.

Agent A is a manual agent the test drives through the control socket (no
model); agent B is OpenCode (``opencode acp``) in a private, offline home under
the test's folder, attached through the operator call ``attach_acp`` exactly
as an operator (or the acceptance lab) attaches it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from harness.model.rules import ModelScript
from harness.model.server import ScriptedModel
from harness.process.app import AppProcess
from peerwire.acp.opencode import OpenCodeHome, prepare_home
from peerwire.control import ControlClient
from peerwire.home import Home
from tests.patience import WAIT_S

ROOT = Path(__file__).resolve().parents[2]
OPENCODE = ROOT / "node_modules" / ".bin" / "opencode"
"""Bound of every wait (OpenCode starts in seconds, a turn in less; a loaded machine takes longer)."""


def opencode_or_skip() -> Path:
    if not OPENCODE.exists():
        pytest.skip("the pinned OpenCode is not installed (npm ci)")
    return OPENCODE


class AcpLab:
    """One core with A (manual) and B (acp, OpenCode), and B's model."""

    def __init__(self, root: Path, script: ModelScript):
        self.root = root
        self.model = ScriptedModel(script, log_path=root / "model-requests.jsonl").start()
        self.home = Home(root / "core")
        self.app = AppProcess.start(self.home)
        self.admin = ControlClient(self.home)
        self.tokens: dict[str, str] = {}
        self.ids: dict[str, str] = {}
        for name, provider in (("A", "manual"), ("B", "acp")):
            out = self.admin.call("register_agent", {"name": name, "provider": provider})
            self.tokens[name], self.ids[name] = out["session_token"], out["agent"]["agent_id"]
        self.opencode: OpenCodeHome = prepare_home(root / "opencode-B", base_url=self.model.base_url("B"))
        subprocess.run(["git", "init", "-q", str(self.opencode.workspace)], check=True)
        self.attached: dict[str, Any] | None = None

    # -- the operator ----------------------------------------------------------------------

    def attach(self, *, resume: bool = False, wrap: tuple[str, ...] = (),
               env: dict[str, str | None] | None = None) -> dict[str, Any]:
        """``attach_acp`` for B: its ACP command (behind ``wrap``, e.g. a tracer), workspace, credential and
        private environment (``env`` changes it)."""
        self.attached = self.admin.call("attach_acp", {
            "agent_id": self.ids["B"], "command": [*wrap, *self.opencode.command(opencode_or_skip())],
            "cwd": str(self.opencode.workspace), "session_token": self.tokens["B"],
            "env": {**self.opencode.env, **(env or {})}, "resume": resume}, wait_s=WAIT_S)
        return self.attached

    def detach(self) -> dict[str, Any]:
        return self.admin.call("detach_acp", {"agent_id": self.ids["B"]}, wait_s=WAIT_S)

    def prompt(self, text: str) -> dict[str, Any]:
        return self.admin.call("prompt", {"agent_id": self.ids["B"], "text": text}, wait_s=WAIT_S)

    def await_turn(self, turn_id: str) -> dict[str, Any]:
        return self.admin.call("await_turn", {"agent_id": self.ids["B"], "turn_id": turn_id,
                                              "timeout_ms": int(WAIT_S * 1000)}, wait_s=WAIT_S)

    def owner(self) -> dict[str, Any]:
        (owner,) = [o for o in self.admin.call("owners")["owners"] if o["agent_id"] == self.ids["B"]]
        return owner

    # -- A, the requester ------------------------------------------------------------------

    def tool(self, caller: str, tool: str, args: dict[str, Any], wait_s: float = WAIT_S) -> dict[str, Any]:
        return ControlClient(self.home, self.tokens[caller]).call(tool, args, wait_s=wait_s)

    def task(self, text: str) -> str:
        return self.tool("A", "followup_task", {"target": "B", "message": text})["request_id"]

    def inform(self, text: str) -> str:
        return self.tool("A", "send_message", {"target": "B", "message": text})["interaction_id"]

    def trace(self, ident: str) -> dict[str, Any]:
        return self.admin.call("trace", {"id": ident})

    def until(self, what: str, found: Any) -> Any:
        """Wait, on the core's commits, until ``found()`` returns something (bounded by :data:`WAIT_S`)."""
        deadline = time.monotonic() + WAIT_S
        mark = None
        while True:
            value = found()
            if value:
                return value
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"{what}: not within {WAIT_S:.0f}s")
            mark = self.admin.call("await_change", {"mark": mark, "timeout_ms": int(min(remaining, 5) * 1000)},
                                   wait_s=min(remaining, 5))["mark"]

    def reply_to(self, request_id: str) -> dict[str, Any]:
        """The reply record of ``request_id`` once it exists."""
        def reply() -> dict[str, Any] | None:
            trace = self.trace(request_id)
            return next((i for i in trace["interactions"] if i["kind"] == "reply"), None)
        return self.until(f"the reply to {request_id}", reply)

    def stages(self, ident: str) -> list[dict[str, Any]]:
        return self.trace(ident)["interactions"][0]["stages"]

    # -- evidence ---------------------------------------------------------------------------

    def transcript(self, generation: int = 1) -> list[dict[str, Any]]:
        path = self.home.path / "acp" / f"B.g{generation}.acp.jsonl"
        return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]

    def close(self) -> None:
        try:
            if self.attached is not None:
                try:
                    self.detach()
                except Exception:
                    pass
            self.app.terminate()
        finally:
            self.model.stop()

    def keep(self, dest: Path) -> None:
        """Copy the run's evidence (transcripts, model log, OpenCode's log) where a failed run can be read."""
        dest.mkdir(parents=True, exist_ok=True)
        for path in (self.home.path / "acp").glob("*"):
            shutil.copy(path, dest / path.name)
        for path in self.root.glob("model-requests*.jsonl"):
            shutil.copy(path, dest / path.name)
        for path in (self.opencode.data / "opencode" / "log").glob("*.log"):
            shutil.copy(path, dest / f"opencode-{path.name}")


def sent(lines: list[dict[str, Any]], method: str) -> list[dict[str, Any]]:
    return [line["message"] for line in lines if line["dir"] == "sent" and line["message"].get("method") == method]


def updates(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line["message"]["params"]["update"] for line in lines if line["dir"] == "received"
            and line["message"].get("method") == "session/update"]

